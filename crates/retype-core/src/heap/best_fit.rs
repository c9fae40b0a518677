//! Best fit over a LIFO free list: a request takes the smallest block that is
//! large enough, scanning the whole list unless it finds an exact fit.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::CheckError;

/// Best fit, sequential search.
pub type BestFit<S> = FitHeap<Smallest, S>;

#[derive(Default)]
pub struct Smallest {
    list: FreeList,
}

impl FreeIndex for Smallest {
    const NAME: &'static str = "best-fit";
    const LINKS: usize = free_list::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.push_front(b) }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.remove(b) }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        let mut best: Option<(usize, Block)> = None;
        // SAFETY: the list holds free blocks.
        unsafe {
            for b in self.list.iter() {
                let s = b.size();
                if s >= size && best.is_none_or(|(bs, _)| s < bs) {
                    best = Some((s, b));
                    if s == size {
                        break;
                    }
                }
            }
        }
        best.map(|(_, b)| b)
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.list.visit(f) }
    }
}
