//! Best fit in O(log n): the free blocks sit in a balanced tree ordered by
//! (size, address), and a request takes the first block of at least its size,
//! the smallest sufficient one and the lowest-addressed among equals.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::treap::{Order, Treap};
use super::CheckError;
use super::HeapKind;

/// Best fit, tree-indexed.
pub type IndexedBestFit<S> = FitHeap<SizeTree, S>;

/// Orders free blocks by size, then address.
pub struct BySize;

impl Order for BySize {
    const AUGMENTED: bool = false;

    unsafe fn less(a: Block, b: Block) -> bool {
        // SAFETY: forwarded contract.
        unsafe { (a.size(), a) < (b.size(), b) }
    }
}

#[derive(Default)]
pub struct SizeTree {
    tree: Treap<BySize>,
}

impl FreeIndex for SizeTree {
    const KIND: HeapKind = HeapKind::IndexedBestFit;
    const LINKS: usize = BySize::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.tree.insert(b) }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.tree.remove(b) }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        // SAFETY: the tree holds free blocks.
        unsafe { self.tree.lower_bound(|n| n.size() < size) }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.tree.visit(f) }
    }
}
