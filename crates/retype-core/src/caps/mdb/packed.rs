//! The augmented AA tree with parent pointers and the node's small data
//! packed into the links' high bits (seed 001 §4.5.4, "shifts and masks").
//!
//! The thesis's pointers are 64 bits of which an address uses 48. It packs
//! the node's level and the span's type root into the left pointer's high
//! bytes, the capability's owning core into the right pointer's and its
//! one-bit flags (remote copies, ancestors and descendants, being deleted,
//! locked) into the parent pointer's, to fit a capability and its tree node
//! in 64 bytes; every access to a link or a packed datum then shifts and
//! masks. Our links are 32-bit slot ids, so a link word here is a 24-bit
//! slot id and one byte: the left word carries the level, the right word the
//! span's type root, and the parent word's byte stays free (the owner and
//! the flags belong to the capability, which the mapping database does not
//! hold). Slot ids stop below 2^24 − 1 (16 Mi slots), as the thesis's
//! pointers below 2^48.
//!
//! In this arena the packing saves 2 of the 22 bytes that a plain node
//! spends on the tree, and both nodes fill the same 64-byte cache line: what
//! this variant measures against [`AaTree`](super::AaTree) is the cost of
//! the shifts and masks alone, which is where the thesis puts the blame for
//! its slowdown. It rebalances and steps through parent links exactly as
//! the tree with parent pointers does ([`aa`](super::aa)).
//!
//! The layout is generic over how a link word is read and written
//! ([`Link`]): here by our own shifts and masks ([`Word`]), in
//! [`bitfield`](super::bitfield) by the accessors a bitfield declaration
//! generates, the thesis's two packed variants.

use alloc::vec::Vec;

use super::tree::{Nodes, Parents, Tree};
use crate::caps::cap::Key;

/// A link word: a slot id below 2^24 − 1 (all ones for none) and one byte
/// of node data, however the two are laid out and reached.
pub trait Link: Copy + core::fmt::Debug + PartialEq {
    /// The name of the variant the word makes.
    const NAME: &'static str;
    /// The word linking to no node, its byte 0.
    const NONE: Self;

    fn id(self) -> u32;
    fn byte(self) -> u8;
    /// The word with its id replaced by `id` (below 2^24).
    fn with_id(self, id: u32) -> Self;
    fn with_byte(self, byte: u8) -> Self;
}

/// A link word read and written by hand: the slot id in the low 24 bits,
/// the byte in the high 8.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Word(u32);

impl Word {
    const ID: u32 = (1 << 24) - 1;
}

impl Link for Word {
    const NAME: &'static str = "tree-packed";
    const NONE: Word = Word(NIL);

    fn id(self) -> u32 {
        self.0 & Word::ID
    }

    fn byte(self) -> u8 {
        (self.0 >> 24) as u8
    }

    fn with_id(self, id: u32) -> Word {
        Word((self.0 & !Word::ID) | id)
    }

    fn with_byte(self, byte: u8) -> Word {
        Word((self.0 & Word::ID) | (byte as u32) << 24)
    }
}

/// The link to no node, and the first slot id a link cannot name.
pub(super) const NIL: u32 = Word::ID;

/// One node: 60 bytes, aligned so that each sits in one cache line.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(64))]
struct Node<W> {
    /// Meaningful while the level is above 0.
    key: Key,
    /// The left child (NIL for none) and the AA level, 0 marking a slot
    /// that is not in the tree.
    left: W,
    /// The right child (NIL for none) and the type root of the subtree's
    /// largest (type root, end).
    right: W,
    /// The parent (NIL at the root); its byte is unused.
    parent: W,
    /// The end of the subtree's largest (type root, end).
    span_end: u64,
}

impl<W: Link> Node<W> {
    const EMPTY: Node<W> = Node {
        key: Key::EMPTY,
        left: W::NONE,
        right: W::NONE,
        parent: W::NONE,
        span_end: 0,
    };
}

/// The arena of packed nodes, indexed by slot id.
#[derive(Clone, Debug, PartialEq)]
pub struct Packed<W>(Vec<Node<W>>);

/// The augmented AA tree with parent pointers, small data packed into the
/// links by shifts and masks.
pub type PackedTree = Tree<Packed<Word>>;

impl<W> Packed<W> {
    fn node(&self, n: u32) -> &Node<W> {
        &self.0[n as usize]
    }

    fn node_mut(&mut self, n: u32) -> &mut Node<W> {
        &mut self.0[n as usize]
    }
}

impl<W: Link> Nodes for Packed<W> {
    const NAME: &'static str = W::NAME;
    const NIL: u32 = NIL;

    fn new() -> Packed<W> {
        Packed(Vec::new())
    }

    fn slots(&self) -> usize {
        self.0.len()
    }

    fn place(&mut self, id: u32, key: Key) {
        if self.0.len() <= id as usize {
            self.0.resize(id as usize + 1, Node::EMPTY);
        }
        *self.node_mut(id) = Node {
            key,
            left: W::NONE.with_byte(1),
            right: W::NONE.with_byte(key.root),
            span_end: key.end(),
            ..Node::EMPTY
        };
    }

    fn clear(&mut self, id: u32) {
        *self.node_mut(id) = Node::EMPTY;
    }

    fn key(&self, n: u32) -> &Key {
        &self.node(n).key
    }

    fn left(&self, n: u32) -> u32 {
        self.node(n).left.id()
    }

    fn right(&self, n: u32) -> u32 {
        self.node(n).right.id()
    }

    fn level(&self, n: u32) -> u8 {
        self.node(n).left.byte()
    }

    fn span(&self, n: u32) -> (u8, u64) {
        let x = self.node(n);
        (x.right.byte(), x.span_end)
    }

    fn put_left(&mut self, n: u32, c: u32) {
        let x = self.node_mut(n);
        x.left = x.left.with_id(c);
    }

    fn put_right(&mut self, n: u32, c: u32) {
        let x = self.node_mut(n);
        x.right = x.right.with_id(c);
    }

    fn set_level(&mut self, n: u32, level: u8) {
        let x = self.node_mut(n);
        x.left = x.left.with_byte(level);
    }

    fn set_span(&mut self, n: u32, (root, end): (u8, u64)) {
        let x = self.node_mut(n);
        x.right = x.right.with_byte(root);
        x.span_end = end;
    }

    fn put_parent(&mut self, n: u32, parent: u32) {
        let x = self.node_mut(n);
        x.parent = x.parent.with_id(parent);
    }
}

impl<W: Link> Parents for Packed<W> {
    fn parent(&self, n: u32) -> u32 {
        self.node(n).parent.id()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::{Link, Word, NIL};
    use proptest::prelude::*;

    /// Setting one part of a link word leaves the other as it was, and the
    /// word without a link says so.
    pub fn id_and_byte_are_independent<W: Link>(
        w: W,
        id: u32,
        byte: u8,
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(W::NONE.id(), NIL);
        prop_assert_eq!(W::NONE.byte(), 0);
        prop_assert_eq!(w.with_id(id).id(), id);
        prop_assert_eq!(w.with_id(id).byte(), w.byte());
        prop_assert_eq!(w.with_byte(byte).byte(), byte);
        prop_assert_eq!(w.with_byte(byte).id(), w.id());
        Ok(())
    }

    proptest! {
        #[test]
        fn words_keep_id_and_byte_apart(word: u32, id in 0..=NIL, byte: u8) {
            id_and_byte_are_independent(Word(word), id, byte)?;
        }
    }
}
