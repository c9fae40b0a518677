//! First fit in O(log n): the free blocks sit in a balanced tree ordered by
//! address, each node knowing the largest block in its subtree, so one descent
//! finds the lowest-addressed block that is large enough. This is the
//! enhancement seed 002 proposes after McCreight; it places blocks exactly as
//! [`super::address_first_fit`] does.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::treap::{Order, Treap};
use super::CheckError;
use super::HeapKind;

/// Address-ordered first fit, tree-indexed.
pub type IndexedFirstFit<S> = FitHeap<AddressTree, S>;

/// Orders free blocks by address.
pub struct ByAddress;

impl Order for ByAddress {
    const AUGMENTED: bool = true;

    unsafe fn less(a: Block, b: Block) -> bool {
        a < b
    }
}

#[derive(Default)]
pub struct AddressTree {
    tree: Treap<ByAddress>,
}

impl FreeIndex for AddressTree {
    const KIND: HeapKind = HeapKind::IndexedFirstFit;
    const LINKS: usize = ByAddress::LINKS;

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
        unsafe { self.tree.first_at_least(size) }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.tree.visit(f) }
    }
}
