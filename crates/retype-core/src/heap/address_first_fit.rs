//! First fit over an address-ordered free list (Knuth's algorithm A; Wilson et
//! al. found it among the least fragmenting policies). Freeing walks the list
//! to the block's place, so it is O(free blocks).

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::HeapKind;
use super::{ensure, CheckError};

/// First fit, address-ordered list.
pub type AddressFirstFit<S> = FitHeap<AddressOrdered, S>;

#[derive(Default)]
pub struct AddressOrdered {
    list: FreeList,
}

impl FreeIndex for AddressOrdered {
    const KIND: HeapKind = HeapKind::AddressFirstFit;
    const LINKS: usize = free_list::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: the list holds free blocks; `b` is a free block.
        unsafe {
            let before = self.list.iter().take_while(|&x| x < b).last();
            self.list.insert_after(before, b)
        }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.remove(b) }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        // SAFETY: the list holds free blocks.
        unsafe { self.list.iter().find(|b| b.size() >= size) }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        let mut last: Option<Block> = None;
        // SAFETY: forwarded contract.
        unsafe {
            self.list.visit(&mut |b| {
                f(b)?;
                ensure!(
                    last.is_none_or(|l| l < b),
                    "address-ordered list out of order at {:p}",
                    b.addr()
                );
                last = Some(b);
                Ok(())
            })
        }
    }
}
