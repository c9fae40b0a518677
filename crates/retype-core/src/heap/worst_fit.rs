//! Worst fit over a LIFO free list: a request takes the largest free block, so
//! that the remainder stays large enough to be useful (it rarely is).

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::CheckError;

/// Worst fit, sequential search.
pub type WorstFit<S> = FitHeap<Largest, S>;

#[derive(Default)]
pub struct Largest {
    list: FreeList,
}

impl FreeIndex for Largest {
    const NAME: &'static str = "worst-fit";
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
        unsafe {
            self.list
                .iter()
                .max_by_key(|b| b.size())
                .filter(|b| b.size() >= size)
        }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.list.visit(f) }
    }
}
