//! The plain node layout: every datum of a node in a field of its own, so
//! that reading one is a load. The tree with parent pointers and the tree
//! without them share it; they differ in the parent field, which is a link
//! ([`Up`](super::aa::Up)) or nothing at all
//! ([`NoUp`](super::no_parent::NoUp)).

use alloc::vec::Vec;

use super::tree::Nodes;
use crate::caps::cap::Key;

const NIL: u32 = u32::MAX;

/// What a plain node keeps of its parent.
pub trait UpLink: Copy + core::fmt::Debug + PartialEq {
    /// The name of the variant the layout makes.
    const NAME: &'static str;
    /// The field of a node without a parent.
    const NONE: Self;
    fn set(&mut self, parent: u32);
}

/// One node: 64 bytes whatever the parent field, aligned so that each sits
/// in one cache line, as a Barrelfish capability slot does.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(64))]
struct Node<P> {
    /// Meaningful while `level > 0`.
    key: Key,
    /// The children; NIL for none.
    left: u32,
    right: u32,
    parent: P,
    /// The largest (type root, end) of the subtree, as two fields to keep
    /// the node in 64 bytes.
    span_end: u64,
    span_root: u8,
    /// AA level; 0 marks a slot that is not in the tree.
    level: u8,
}

impl<P: UpLink> Node<P> {
    const EMPTY: Node<P> = Node {
        key: Key::EMPTY,
        left: NIL,
        right: NIL,
        parent: P::NONE,
        span_end: 0,
        span_root: 0,
        level: 0,
    };
}

/// The arena of plain nodes, indexed by slot id.
#[derive(Clone, Debug, PartialEq)]
pub struct Plain<P>(Vec<Node<P>>);

impl<P> Plain<P> {
    fn node(&self, n: u32) -> &Node<P> {
        &self.0[n as usize]
    }

    fn node_mut(&mut self, n: u32) -> &mut Node<P> {
        &mut self.0[n as usize]
    }

    /// `n`'s parent field.
    pub(super) fn up(&self, n: u32) -> &P {
        &self.node(n).parent
    }
}

impl<P: UpLink> Nodes for Plain<P> {
    const NAME: &'static str = P::NAME;
    const NIL: u32 = NIL;

    fn new() -> Plain<P> {
        Plain(Vec::new())
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
            level: 1,
            span_root: key.root,
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
        self.node(n).left
    }

    fn right(&self, n: u32) -> u32 {
        self.node(n).right
    }

    fn level(&self, n: u32) -> u8 {
        self.node(n).level
    }

    fn span(&self, n: u32) -> (u8, u64) {
        let x = self.node(n);
        (x.span_root, x.span_end)
    }

    fn put_left(&mut self, n: u32, c: u32) {
        self.node_mut(n).left = c;
    }

    fn put_right(&mut self, n: u32, c: u32) {
        self.node_mut(n).right = c;
    }

    fn set_level(&mut self, n: u32, level: u8) {
        self.node_mut(n).level = level;
    }

    fn set_span(&mut self, n: u32, span: (u8, u64)) {
        let x = self.node_mut(n);
        (x.span_root, x.span_end) = span;
    }

    fn put_parent(&mut self, n: u32, parent: u32) {
        self.node_mut(n).parent.set(parent);
    }
}
