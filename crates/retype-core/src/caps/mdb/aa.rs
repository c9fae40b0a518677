//! An AA tree (Andersson 1993) with parent pointers, augmented as an
//! interval tree (CLRS §14.3): every node knows the largest (type root, end
//! address) in its subtree, so range and ancestor queries skip whole
//! subtrees. Nodes live in an arena indexed by slot id, as Barrelfish embeds
//! them in the capability slots: the tree allocates nothing per operation.

use alloc::vec::Vec;

use super::{CapId, Found, Mdb, MdbError, RangeQuery, Relation};
use crate::caps::cap::Key;

const NIL: u32 = u32::MAX;

/// One node: 64 bytes, aligned so that each sits in one cache line.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(64))]
struct Node {
    key: Key,
    left: u32,
    right: u32,
    parent: u32,
    /// The largest (type root, end) of the subtree, as two fields to keep
    /// the node in 64 bytes.
    span_end: u64,
    span_root: u8,
    /// AA level; 0 marks a slot that is not in the tree.
    level: u8,
}

const EMPTY: Node = Node {
    key: Key {
        root: 0,
        ty: 0,
        base: 0,
        size: 0,
        eq: [0, 0],
    },
    left: NIL,
    right: NIL,
    parent: NIL,
    span_end: 0,
    span_root: 0,
    level: 0,
};

impl Node {
    fn span(&self) -> (u8, u64) {
        (self.span_root, self.span_end)
    }
}

/// The augmented AA tree.
#[derive(Clone, Debug, PartialEq)]
pub struct AaTree {
    nodes: Vec<Node>,
    root: u32,
    len: usize,
    /// Set by a rotation or level change during a fix-up step.
    changed: bool,
}

impl AaTree {
    fn node(&self, n: u32) -> &Node {
        &self.nodes[n as usize]
    }

    fn node_mut(&mut self, n: u32) -> &mut Node {
        &mut self.nodes[n as usize]
    }

    fn level(&self, n: u32) -> u8 {
        if n == NIL {
            0
        } else {
            self.node(n).level
        }
    }

    fn span(&self, n: u32) -> (u8, u64) {
        if n == NIL {
            (0, 0)
        } else {
            self.node(n).span()
        }
    }

    /// `a` sorts before `b` (key, then slot id).
    fn less(&self, a: u32, b: u32) -> bool {
        (self.node(a).key, a) < (self.node(b).key, b)
    }

    /// Recomputes `n`'s span from its key and its children's spans.
    fn update(&mut self, n: u32) {
        let x = self.node(n);
        let own = (x.key.root, x.key.end());
        let span = own.max(self.span(x.left)).max(self.span(x.right));
        let x = self.node_mut(n);
        (x.span_root, x.span_end) = span;
    }

    fn set_left(&mut self, n: u32, c: u32) {
        self.node_mut(n).left = c;
        if c != NIL {
            self.node_mut(c).parent = n;
        }
    }

    fn set_right(&mut self, n: u32, c: u32) {
        self.node_mut(n).right = c;
        if c != NIL {
            self.node_mut(c).parent = n;
        }
    }

    /// Removes a left horizontal link by a right rotation.
    fn skew(&mut self, t: u32) -> u32 {
        let l = self.node(t).left;
        if l == NIL || self.level(l) != self.level(t) {
            return t;
        }
        self.set_left(t, self.node(l).right);
        self.set_right(l, t);
        self.update(t);
        self.update(l);
        self.changed = true;
        l
    }

    /// Removes two consecutive right horizontal links by a left rotation.
    fn split(&mut self, t: u32) -> u32 {
        let r = self.node(t).right;
        if r == NIL {
            return t;
        }
        let rr = self.node(r).right;
        if rr == NIL || self.level(rr) != self.level(t) {
            return t;
        }
        self.set_right(t, self.node(r).left);
        self.set_left(r, t);
        self.node_mut(r).level += 1;
        self.update(t);
        self.update(r);
        self.changed = true;
        r
    }

    fn leftmost(&self, mut n: u32) -> u32 {
        while self.node(n).left != NIL {
            n = self.node(n).left;
        }
        n
    }

    /// Puts `new` where `old` hangs below `parent` (or at the root).
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
            if new != NIL {
                self.node_mut(new).parent = NIL;
            }
        } else if self.node(parent).left == old {
            self.set_left(parent, new);
        } else {
            self.set_right(parent, new);
        }
    }

    /// Andersson's fix-up at `t` after an insertion below it.
    fn rebalance_insert(&mut self, t: u32) -> u32 {
        self.update(t);
        let t = self.skew(t);
        self.split(t)
    }

    /// Andersson's fix-up at `t` after a removal below it.
    fn rebalance_remove(&mut self, t: u32) -> u32 {
        let Node { left, right, .. } = *self.node(t);
        let should = self.level(left).min(self.level(right)) + 1;
        if should < self.level(t) {
            self.node_mut(t).level = should;
            if right != NIL && self.level(right) > should {
                self.node_mut(right).level = should;
            }
            self.changed = true;
        }
        self.update(t);
        let t = self.skew(t);
        let r = self.node(t).right;
        if r != NIL {
            let r = self.skew(r);
            self.set_right(t, r);
            let rr = self.node(r).right;
            if rr != NIL {
                let rr = self.skew(rr);
                self.set_right(r, rr);
            }
        }
        let t = self.split(t);
        let r = self.node(t).right;
        if r != NIL {
            let r = self.split(r);
            self.set_right(t, r);
        }
        t
    }

    /// Walks from `t` to the root, rebalancing each node on the way with
    /// `fix`, which reads levels at most `reach` nodes down (2 after an
    /// insertion, 3 after a removal). A change cannot matter past `reach`
    /// ancestors in a row that `fix` left alone: the walk stops there, once
    /// the augmented span stops changing and the walk has passed `stale` (a
    /// node whose span must be redone).
    fn fix_up(&mut self, mut t: u32, fix: fn(&mut AaTree, u32) -> u32, reach: u32, mut stale: u32) {
        let mut quiet = 0;
        while t != NIL {
            let parent = self.node(t).parent;
            let span = self.node(t).span();
            self.changed = false;
            // Even when `t` stays on top (skew then split), its parent link
            // went through a rotation.
            let nt = fix(self, t);
            self.replace_child(parent, t, nt);
            quiet = if self.changed { 0 } else { quiet + 1 };
            if quiet >= reach && stale == NIL && self.node(nt).span() == span {
                return;
            }
            // The stale node's old span was not what its parent summed, so
            // an unchanged span there proves nothing: stop no sooner than
            // its parent.
            if t == stale {
                stale = NIL;
            }
            t = parent;
        }
    }

    /// Swaps the tree positions of `x` and its successor `s`, the leftmost
    /// node of its right subtree (nodes are slots: keys never move).
    fn swap_with_successor(&mut self, x: u32, s: u32) {
        let (xn, sn) = (*self.node(x), *self.node(s));
        self.replace_child(xn.parent, x, s);
        self.node_mut(s).level = xn.level;
        self.node_mut(x).level = sn.level;
        self.set_left(s, xn.left);
        self.node_mut(x).left = NIL;
        if sn.parent == x {
            self.set_right(s, x);
        } else {
            self.set_right(s, xn.right);
            self.set_left(sn.parent, x);
        }
        self.node_mut(x).right = NIL;
        self.set_right(x, sn.right);
    }

    /// The first entry whose key is greater than `k`, or equal if `inclusive`.
    fn seek_node(&self, k: &Key, inclusive: bool) -> u32 {
        let (mut n, mut best) = (self.root, NIL);
        while n != NIL {
            let x = &self.node(n).key;
            if x > k || (inclusive && x == k) {
                best = n;
                n = self.node(n).left;
            } else {
                n = self.node(n).right;
            }
        }
        best
    }

    fn query_at(&self, n: u32, q: &mut RangeQuery) -> bool {
        if n == NIL || self.span(n) <= (q.root, q.addr) {
            return false;
        }
        let x = self.node(n);
        if self.query_at(x.left, q) {
            return true;
        }
        if (x.key.root, x.key.base) >= (q.root, q.addr + q.size) {
            return false;
        }
        q.offer(n, &x.key) || self.query_at(x.right, q)
    }

    /// Checks the AA and augmentation invariants and the parent links;
    /// returns the number of nodes. For tests.
    pub fn check(&self) -> usize {
        fn walk(t: &AaTree, n: u32, parent: u32) -> usize {
            if n == NIL {
                return 0;
            }
            let x = t.node(n);
            assert_eq!(x.parent, parent, "parent link of {n}");
            assert!(t.level(x.left) < x.level, "left child level");
            assert!(t.level(x.right) <= x.level, "right child level");
            if x.right != NIL {
                assert!(t.level(t.node(x.right).right) < x.level, "right grandchild");
            }
            if x.level > 1 {
                assert!(
                    x.left != NIL && x.right != NIL,
                    "inner node has two children"
                );
            }
            let own = (x.key.root, x.key.end());
            assert_eq!(x.span(), own.max(t.span(x.left)).max(t.span(x.right)));
            if x.left != NIL {
                assert!(t.less(x.left, n));
            }
            if x.right != NIL {
                assert!(t.less(n, x.right));
            }
            1 + walk(t, x.left, n) + walk(t, x.right, n)
        }
        let count = walk(self, self.root, NIL);
        assert_eq!(count, self.len);
        count
    }
}

impl Mdb for AaTree {
    fn new() -> AaTree {
        AaTree {
            nodes: Vec::new(),
            root: NIL,
            len: 0,
            changed: false,
        }
    }

    fn name(&self) -> &'static str {
        "tree"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn insert(&mut self, id: CapId, key: Key) -> Result<(), MdbError> {
        if self.contains(id) {
            return Err(MdbError::DuplicateEntry);
        }
        if self.nodes.len() <= id as usize {
            self.nodes.resize(id as usize + 1, EMPTY);
        }
        *self.node_mut(id) = Node {
            key,
            level: 1,
            span_root: key.root,
            span_end: key.end(),
            ..EMPTY
        };
        self.len += 1;
        if self.root == NIL {
            self.root = id;
            return Ok(());
        }
        let mut p = self.root;
        loop {
            let next = if self.less(id, p) {
                self.node(p).left
            } else {
                self.node(p).right
            };
            if next == NIL {
                break;
            }
            p = next;
        }
        if self.less(id, p) {
            self.set_left(p, id);
        } else {
            self.set_right(p, id);
        }
        self.fix_up(p, AaTree::rebalance_insert, 2, NIL);
        Ok(())
    }

    fn remove(&mut self, id: CapId) -> Result<(), MdbError> {
        if !self.contains(id) {
            return Err(MdbError::EntryNotFound);
        }
        let mut stale = NIL;
        if self.node(id).left != NIL {
            // An inner node (level > 1) has two children: its successor, a
            // level-1 node without a left child, takes its place.
            let s = self.leftmost(self.node(id).right);
            self.swap_with_successor(id, s);
            stale = s;
        }
        // Now `id` has no left child, so its right child is a leaf or nil.
        let Node { parent, right, .. } = *self.node(id);
        self.replace_child(parent, id, right);
        self.fix_up(parent, AaTree::rebalance_remove, 3, stale);
        *self.node_mut(id) = EMPTY;
        self.len -= 1;
        Ok(())
    }

    fn contains(&self, id: CapId) -> bool {
        self.nodes.get(id as usize).is_some_and(|n| n.level > 0)
    }

    fn key(&self, id: CapId) -> Option<Key> {
        self.contains(id).then(|| self.node(id).key)
    }

    fn first(&self) -> Option<CapId> {
        (self.root != NIL).then(|| self.leftmost(self.root))
    }

    fn successor(&self, id: CapId) -> Option<CapId> {
        if !self.contains(id) {
            return None;
        }
        let r = self.node(id).right;
        if r != NIL {
            return Some(self.leftmost(r));
        }
        let mut n = id;
        let mut p = self.node(n).parent;
        while p != NIL && self.node(p).right == n {
            n = p;
            p = self.node(p).parent;
        }
        (p != NIL).then_some(p)
    }

    fn predecessor(&self, id: CapId) -> Option<CapId> {
        if !self.contains(id) {
            return None;
        }
        let mut n = self.node(id).left;
        if n != NIL {
            while self.node(n).right != NIL {
                n = self.node(n).right;
            }
            return Some(n);
        }
        let mut n = id;
        let mut p = self.node(n).parent;
        while p != NIL && self.node(p).left == n {
            n = p;
            p = self.node(p).parent;
        }
        (p != NIL).then_some(p)
    }

    fn seek(&self, k: &Key, inclusive: bool) -> Option<CapId> {
        let n = self.seek_node(k, inclusive);
        (n != NIL).then_some(n)
    }

    fn has_descendants(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        // The next entry past the copies: a few successor steps usually
        // reach it; many copies fall back to a search from the root.
        let mut n = id;
        for _ in 0..4 {
            n = self.successor(n).unwrap_or(NIL);
            if n == NIL || self.node(n).key != k {
                break;
            }
        }
        if n != NIL && self.node(n).key == k {
            n = self.seek_node(&k, false);
        }
        n != NIL && {
            let d = self.node(n).key;
            d.root == k.root && d.base < k.end()
        }
    }

    fn has_ancestors(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let target = (k.root, k.end());
        let (mut n, mut best) = (self.root, (0, 0));
        while n != NIL {
            let x = self.node(n);
            if x.key < k {
                best = best.max(self.span(x.left)).max((x.key.root, x.key.end()));
                if best >= target {
                    return true;
                }
                n = x.right;
            } else {
                n = x.left;
            }
        }
        false
    }

    fn query(&self, root: u8, addr: u64, size: u64, max: Relation) -> Found {
        let mut q = RangeQuery::new(root, addr, size, max);
        self.query_at(self.root, &mut q);
        q.best
    }
}
