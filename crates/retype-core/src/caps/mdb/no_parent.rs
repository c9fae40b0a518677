//! The augmented AA tree without parent pointers (seed 001 §4.5.4, "tree
//! w/o parent pointers"), Barrelfish's default since 2012 (`lib/mdb/`):
//! dropping the link saves a pointer per node, which is what keeps a
//! Barrelfish capability in 64 bytes. Insert and remove recurse from the
//! root, as Andersson wrote them, and rebalance every node on the way back;
//! a relinking writes two links instead of three. A successor or a
//! predecessor outside the node's own subtree is a search from the root:
//! O(log n) where the tree with parent pointers takes O(1) on average, and
//! so is the copies check, which looks at both.

use super::plain::{Plain, UpLink};
use super::tree::{Nodes, Tree, Walk};
use crate::caps::cap::Key;

/// A plain node's parent field when there is none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoUp;

impl UpLink for NoUp {
    const NAME: &'static str = "tree-noparent";
    const NONE: NoUp = NoUp;

    fn set(&mut self, _parent: u32) {}
}

/// The augmented AA tree without parent pointers, plain nodes.
pub type NoParentTree = Tree<Plain<NoUp>>;

type N = Plain<NoUp>;
const NIL: u32 = <N as Nodes>::NIL;

// The fix-ups report whether they changed the tree so that a bottom-up walk
// can stop early; the recursion rebalances every node on its way back, so
// here the report goes to a throwaway `&mut false`.
impl NoParentTree {
    /// Inserts the placed node `id` into the subtree `t`; returns its top.
    fn insert_at(&mut self, t: u32, id: u32) -> u32 {
        if t == NIL {
            return id;
        }
        if self.less(id, t) {
            let l = self.insert_at(self.nodes.left(t), id);
            self.nodes.set_left(t, l);
        } else {
            let r = self.insert_at(self.nodes.right(t), id);
            self.nodes.set_right(t, r);
        }
        self.rebalance_insert(t, &mut false)
    }

    /// Removes the node `id` from the subtree `t`; returns its top.
    fn remove_at(&mut self, t: u32, id: u32) -> u32 {
        if t == id {
            let (left, right) = (self.nodes.left(t), self.nodes.right(t));
            if left == NIL {
                // A level-1 node: its right child is a leaf or nil.
                return right;
            }
            // An inner node has two children: its successor, the leftmost
            // node of its right subtree, takes its place (nodes are slots:
            // keys never move).
            let (right, s) = self.remove_first(right);
            self.nodes.set_left(s, left);
            self.nodes.set_right(s, right);
            self.nodes.set_level(s, self.nodes.level(t));
            return self.rebalance_remove(s, &mut false);
        }
        if self.less(id, t) {
            let l = self.remove_at(self.nodes.left(t), id);
            self.nodes.set_left(t, l);
        } else {
            let r = self.remove_at(self.nodes.right(t), id);
            self.nodes.set_right(t, r);
        }
        self.rebalance_remove(t, &mut false)
    }

    /// Takes the first node out of the subtree `t`; returns the subtree's
    /// new top and that node.
    fn remove_first(&mut self, t: u32) -> (u32, u32) {
        let l = self.nodes.left(t);
        if l == NIL {
            return (self.nodes.right(t), t);
        }
        let (l, first) = self.remove_first(l);
        self.nodes.set_left(t, l);
        (self.rebalance_remove(t, &mut false), first)
    }
}

impl Walk for N {
    fn link(t: &mut NoParentTree, id: u32) {
        t.root = t.insert_at(t.root, id);
    }

    fn unlink(t: &mut NoParentTree, id: u32) {
        t.root = t.remove_at(t.root, id);
    }

    /// The leftmost node of the right subtree, or else a search from the
    /// root for the first node after `id`.
    fn successor(t: &NoParentTree, id: u32) -> u32 {
        let r = t.nodes.right(id);
        if r != NIL {
            return t.leftmost(r);
        }
        let (mut n, mut best) = (t.root, NIL);
        while n != NIL {
            if t.less(id, n) {
                best = n;
                n = t.nodes.left(n);
            } else {
                n = t.nodes.right(n);
            }
        }
        best
    }

    /// The rightmost node of the left subtree, or else a search from the
    /// root for the last node before `id`.
    fn predecessor(t: &NoParentTree, id: u32) -> u32 {
        let l = t.nodes.left(id);
        if l != NIL {
            return t.rightmost(l);
        }
        let (mut n, mut best) = (t.root, NIL);
        while n != NIL {
            if t.less(n, id) {
                best = n;
                n = t.nodes.right(n);
            } else {
                n = t.nodes.left(n);
            }
        }
        best
    }

    /// One search, as Barrelfish's `has_descendants` does: stepping past
    /// the copies one successor at a time could cost a search each.
    fn past_copies(t: &NoParentTree, _id: u32, k: &Key) -> u32 {
        t.seek_node(k, false)
    }
}
