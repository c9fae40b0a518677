//! First fit over a LIFO free list: a freed block goes to the front, and a
//! request takes the first listed block that is large enough.

use super::block::Block;
use super::fit::FitHeap;
use super::free_list::{FreeList, Lifo, ListSearch};
use super::HeapKind;

/// First fit, LIFO list.
pub type FirstFit<S> = FitHeap<Lifo<First>, S>;

#[derive(Default)]
pub struct First;

impl ListSearch for First {
    const KIND: HeapKind = HeapKind::FirstFit;

    unsafe fn search(list: &FreeList, size: usize) -> Option<Block> {
        // SAFETY: the list holds free blocks.
        unsafe { list.iter().find(|b| b.size() >= size) }
    }
}
