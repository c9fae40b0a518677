//! Best fit over a LIFO free list: a request takes the smallest block that is
//! large enough, scanning the whole list unless it finds an exact fit.

use super::block::Block;
use super::fit::FitHeap;
use super::free_list::{FreeList, Lifo, ListSearch};
use super::HeapKind;

/// Best fit, sequential search.
pub type BestFit<S> = FitHeap<Lifo<Smallest>, S>;

#[derive(Default)]
pub struct Smallest;

impl ListSearch for Smallest {
    const KIND: HeapKind = HeapKind::BestFit;

    unsafe fn search(list: &FreeList, size: usize) -> Option<Block> {
        let mut best: Option<(usize, Block)> = None;
        // SAFETY: the list holds free blocks.
        unsafe {
            for b in list.iter() {
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
}
