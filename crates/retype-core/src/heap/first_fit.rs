//! First fit over a LIFO free list: a freed block goes to the front, and a
//! request takes the first listed block that is large enough.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::CheckError;

/// First fit, LIFO list.
pub type FirstFit<S> = FitHeap<Lifo, S>;

#[derive(Default)]
pub struct Lifo {
    list: FreeList,
}

impl FreeIndex for Lifo {
    const NAME: &'static str = "first-fit";
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
        // SAFETY: the list holds free blocks.
        unsafe { self.list.iter().find(|b| b.size() >= size) }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.list.visit(f) }
    }
}
