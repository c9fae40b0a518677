//! The augmented AA tree with parent pointers (seed 001 §4.5.4, "tree"):
//! every node also links to its parent, so that a successor is one step
//! up or down on average and an update rebalances bottom-up from where it
//! changed the tree, stopping as soon as nothing above can change. The
//! links cost a third pointer per node and a third write per relinking.
//!
//! This file holds that walk, for any layout with parent links (the plain
//! one here, and the packed one of [`packed`](super::packed)).

use super::plain::{Plain, UpLink};
use super::tree::{Parents, Tree, Walk};
use crate::caps::cap::Key;

/// A plain node's parent link: its parent's slot id, NIL at the root.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Up(u32);

impl UpLink for Up {
    const NAME: &'static str = "tree";
    const NONE: Up = Up(u32::MAX);

    fn set(&mut self, parent: u32) {
        self.0 = parent;
    }
}

impl Parents for Plain<Up> {
    fn parent(&self, n: u32) -> u32 {
        self.up(n).0
    }
}

/// The augmented AA tree with parent pointers, plain nodes.
pub type AaTree = Tree<Plain<Up>>;

/// A rebalancing step at one node: returns the subtree's new top, sets the
/// flag if it rotated or changed a level.
type Fix<N> = fn(&mut Tree<N>, u32, &mut bool) -> u32;

impl<N: Parents> Tree<N> {
    /// Puts `new` where `old` hangs below `parent` (or at the root).
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == N::NIL {
            self.root = new;
            if new != N::NIL {
                self.nodes.put_parent(new, N::NIL);
            }
        } else if self.nodes.left(parent) == old {
            self.nodes.set_left(parent, new);
        } else {
            self.nodes.set_right(parent, new);
        }
    }

    /// Walks from `t` to the root, rebalancing each node on the way with
    /// `fix`, which reads levels at most `reach` nodes down (2 after an
    /// insertion, 3 after a removal). A change cannot matter past `reach`
    /// ancestors in a row that `fix` left alone: the walk stops there, once
    /// the augmented span stops changing and the walk has passed `stale` (a
    /// node whose span must be redone).
    fn fix_up(&mut self, mut t: u32, fix: Fix<N>, reach: u32, mut stale: u32) {
        let mut quiet = 0;
        while t != N::NIL {
            let parent = self.nodes.parent(t);
            let span = self.nodes.span(t);
            let mut changed = false;
            // Even when `t` stays on top (skew then split), its parent link
            // went through a rotation.
            let nt = fix(self, t, &mut changed);
            self.replace_child(parent, t, nt);
            quiet = if changed { 0 } else { quiet + 1 };
            if quiet >= reach && stale == N::NIL && self.nodes.span(nt) == span {
                return;
            }
            // The stale node's old span was not what its parent summed, so
            // an unchanged span there proves nothing: stop no sooner than
            // its parent.
            if t == stale {
                stale = N::NIL;
            }
            t = parent;
        }
    }

    /// Swaps the tree positions of `x` and its successor `s`, the leftmost
    /// node of its right subtree (nodes are slots: keys never move).
    fn swap_with_successor(&mut self, x: u32, s: u32) {
        let n = &self.nodes;
        let (x_parent, x_left, x_right, x_level) = (n.parent(x), n.left(x), n.right(x), n.level(x));
        let (s_parent, s_right, s_level) = (n.parent(s), n.right(s), n.level(s));
        self.replace_child(x_parent, x, s);
        self.nodes.set_level(s, x_level);
        self.nodes.set_level(x, s_level);
        self.nodes.set_left(s, x_left);
        self.nodes.put_left(x, N::NIL);
        if s_parent == x {
            self.nodes.set_right(s, x);
        } else {
            self.nodes.set_right(s, x_right);
            self.nodes.set_left(s_parent, x);
        }
        self.nodes.set_right(x, s_right);
    }
}

impl<N: Parents> Walk for N {
    fn link(t: &mut Tree<N>, id: u32) {
        if t.root == N::NIL {
            t.root = id;
            return;
        }
        let mut p = t.root;
        loop {
            let next = if t.less(id, p) {
                t.nodes.left(p)
            } else {
                t.nodes.right(p)
            };
            if next == N::NIL {
                break;
            }
            p = next;
        }
        if t.less(id, p) {
            t.nodes.set_left(p, id);
        } else {
            t.nodes.set_right(p, id);
        }
        t.fix_up(p, Tree::rebalance_insert, 2, N::NIL);
    }

    fn unlink(t: &mut Tree<N>, id: u32) {
        let mut stale = N::NIL;
        if t.nodes.left(id) != N::NIL {
            // An inner node (level > 1) has two children: its successor, a
            // level-1 node without a left child, takes its place.
            let s = t.leftmost(t.nodes.right(id));
            t.swap_with_successor(id, s);
            stale = s;
        }
        // Now `id` has no left child, so its right child is a leaf or nil.
        let (parent, right) = (t.nodes.parent(id), t.nodes.right(id));
        t.replace_child(parent, id, right);
        t.fix_up(parent, Tree::rebalance_remove, 3, stale);
    }

    fn successor(t: &Tree<N>, id: u32) -> u32 {
        let r = t.nodes.right(id);
        if r != N::NIL {
            return t.leftmost(r);
        }
        let (mut n, mut p) = (id, t.nodes.parent(id));
        while p != N::NIL && t.nodes.right(p) == n {
            (n, p) = (p, t.nodes.parent(p));
        }
        p
    }

    fn predecessor(t: &Tree<N>, id: u32) -> u32 {
        let l = t.nodes.left(id);
        if l != N::NIL {
            return t.rightmost(l);
        }
        let (mut n, mut p) = (id, t.nodes.parent(id));
        while p != N::NIL && t.nodes.left(p) == n {
            (n, p) = (p, t.nodes.parent(p));
        }
        p
    }

    /// A few successor steps usually get past the copies; many copies fall
    /// back to a search from the root.
    fn past_copies(t: &Tree<N>, id: u32, k: &Key) -> u32 {
        let mut n = id;
        for _ in 0..4 {
            n = Self::successor(t, n);
            if n == N::NIL || t.nodes.key(n) != k {
                return n;
            }
        }
        t.seek_node(k, false)
    }

    fn check_links(t: &Tree<N>) {
        fn walk<N: Parents>(t: &Tree<N>, n: u32, parent: u32) {
            if n != N::NIL {
                assert_eq!(t.nodes.parent(n), parent, "parent link of {n}");
                walk(t, t.nodes.left(n), n);
                walk(t, t.nodes.right(n), n);
            }
        }
        walk(t, t.root, N::NIL);
    }
}
