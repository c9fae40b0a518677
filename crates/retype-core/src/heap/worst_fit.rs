//! Worst fit over a LIFO free list: a request takes the largest free block, so
//! that the remainder stays large enough to be useful (it rarely is).

use super::block::Block;
use super::fit::FitHeap;
use super::free_list::{FreeList, Lifo, ListSearch};
use super::HeapKind;

/// Worst fit, sequential search.
pub type WorstFit<S> = FitHeap<Lifo<Largest>, S>;

#[derive(Default)]
pub struct Largest;

impl ListSearch for Largest {
    const KIND: HeapKind = HeapKind::WorstFit;

    unsafe fn search(list: &FreeList, size: usize) -> Option<Block> {
        // SAFETY: the list holds free blocks.
        unsafe {
            list.iter()
                .max_by_key(|b| b.size())
                .filter(|b| b.size() >= size)
        }
    }
}
