//! The augmented AA tree that four of the mapping database's
//! implementations share: an AA tree (Andersson 1993) whose every node also
//! knows the largest (type root, end address) in its subtree, as an interval
//! tree (CLRS §14.3), so that range and ancestor queries skip whole
//! subtrees. Nodes live in an arena indexed by slot id, as Barrelfish embeds
//! them in the capability slots: the tree allocates nothing per operation.
//!
//! The variants of seed 001 §4.5.4 differ along two lines, each a trait
//! here. [`Nodes`] is how a node is laid out: a field per datum (`plain`),
//! or the small data packed into the links' high bits (`packed`, its link
//! words written by our shifts and masks or by `bitfield`'s). [`Walk`]
//! is how the tree goes back up after going down: through parent links,
//! rebalancing bottom-up (`aa`), or by returning from a recursion that
//! started at the root, without parent links (`no_parent`). What depends on
//! neither lives here: the rotations, the fix-ups of one node after an
//! insertion or a removal below it, the augmentation, the searches that only
//! go down, the invariant check, and the [`Mdb`] interface over them all.

use super::{starts_inside, CapId, Found, Mdb, MdbError, RangeQuery, Relation};
use crate::caps::cap::Key;

/// How a variant lays out its nodes: one per slot id, in an arena.
pub trait Nodes: Sized {
    /// The variant's name in the benchmark's output.
    const NAME: &'static str;
    /// The link to no node; no slot id from here on can be linked.
    const NIL: u32;

    /// An arena without slots.
    fn new() -> Self;
    /// The slots the arena holds; the ones past it are not in the tree.
    fn slots(&self) -> usize;
    /// Makes slot `id` (growing the arena) a node of level 1 holding `key`,
    /// linked to nothing, its span its own.
    fn place(&mut self, id: u32, key: Key);
    /// Makes slot `id` empty again: level 0, not in the tree.
    fn clear(&mut self, id: u32);

    fn key(&self, n: u32) -> &Key;
    fn left(&self, n: u32) -> u32;
    fn right(&self, n: u32) -> u32;
    /// The AA level; 0 for a slot that is not in the tree.
    fn level(&self, n: u32) -> u8;
    /// The largest (type root, end) of `n`'s subtree.
    fn span(&self, n: u32) -> (u8, u64);
    fn put_left(&mut self, n: u32, c: u32);
    fn put_right(&mut self, n: u32, c: u32);
    fn set_level(&mut self, n: u32, level: u8);
    fn set_span(&mut self, n: u32, span: (u8, u64));
    /// Sets `n`'s parent link, in a layout that has one; the others have
    /// nothing to set.
    fn put_parent(&mut self, _n: u32, _parent: u32) {}

    /// Hangs `c` (a node or NIL) below `n` as its left child.
    fn set_left(&mut self, n: u32, c: u32) {
        self.put_left(n, c);
        if c != Self::NIL {
            self.put_parent(c, n);
        }
    }

    /// Hangs `c` (a node or NIL) below `n` as its right child.
    fn set_right(&mut self, n: u32, c: u32) {
        self.put_right(n, c);
        if c != Self::NIL {
            self.put_parent(c, n);
        }
    }
}

/// A layout whose nodes link to their parents.
pub trait Parents: Nodes {
    /// `n`'s parent; NIL for the root.
    fn parent(&self, n: u32) -> u32;
}

/// How a variant goes back up the tree: what it needs to insert, remove,
/// and step to a neighbour.
pub trait Walk: Nodes {
    /// Hangs the node `id`, just placed, in the tree and rebalances.
    fn link(t: &mut Tree<Self>, id: u32);
    /// Takes the node `id` out of the tree and rebalances; the slot is
    /// cleared after.
    fn unlink(t: &mut Tree<Self>, id: u32);
    /// The next node in the order, or NIL.
    fn successor(t: &Tree<Self>, id: u32) -> u32;
    /// The previous node in the order, or NIL.
    fn predecessor(t: &Tree<Self>, id: u32) -> u32;
    /// The first node past `id`'s copies (all of key `k`), or NIL.
    fn past_copies(t: &Tree<Self>, id: u32, k: &Key) -> u32;
    /// Checks the links that the shared check does not know of. For tests.
    fn check_links(_t: &Tree<Self>) {}
}

/// The augmented AA tree over the layout `N`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tree<N> {
    /// One node per slot id. A node of level > 0 is in the tree, reachable
    /// from `root`; a slot of level 0 is not, and nothing links to it.
    pub(super) nodes: N,
    /// The top node, NIL when the tree is empty. Below it, for every node:
    /// its left child's level is below its own, its right child's is at
    /// most its own and its right grandchild's below it, a node above
    /// level 1 has two children; its span is the largest of its own
    /// (type root, end) and its children's spans; the nodes of its left
    /// subtree sort before it and those of its right subtree after it, by
    /// (key, slot id).
    pub(super) root: u32,
    /// The nodes in the tree.
    pub(super) len: usize,
}

impl<N: Nodes> Tree<N> {
    /// The level of `n`, 0 for NIL.
    pub(super) fn level(&self, n: u32) -> u8 {
        if n == N::NIL {
            0
        } else {
            self.nodes.level(n)
        }
    }

    /// The span of `n`'s subtree, the least for NIL.
    pub(super) fn span(&self, n: u32) -> (u8, u64) {
        if n == N::NIL {
            (0, 0)
        } else {
            self.nodes.span(n)
        }
    }

    /// `a` sorts before `b` (key, then slot id).
    pub(super) fn less(&self, a: u32, b: u32) -> bool {
        (self.nodes.key(a), a) < (self.nodes.key(b), b)
    }

    /// Recomputes `n`'s span from its key and its children's spans.
    pub(super) fn update(&mut self, n: u32) {
        let k = self.nodes.key(n);
        let own = (k.root, k.end());
        let span = own
            .max(self.span(self.nodes.left(n)))
            .max(self.span(self.nodes.right(n)));
        self.nodes.set_span(n, span);
    }

    /// Removes a left horizontal link by a right rotation; returns the
    /// subtree's new top and sets `changed` if it rotated.
    fn skew(&mut self, t: u32, changed: &mut bool) -> u32 {
        let l = self.nodes.left(t);
        if l == N::NIL || self.nodes.level(l) != self.nodes.level(t) {
            return t;
        }
        self.nodes.set_left(t, self.nodes.right(l));
        self.nodes.set_right(l, t);
        self.update(t);
        self.update(l);
        *changed = true;
        l
    }

    /// Removes two consecutive right horizontal links by a left rotation
    /// that lifts the middle node a level; returns the subtree's new top and
    /// sets `changed` if it rotated.
    fn split(&mut self, t: u32, changed: &mut bool) -> u32 {
        let r = self.nodes.right(t);
        if r == N::NIL {
            return t;
        }
        let rr = self.nodes.right(r);
        if rr == N::NIL || self.nodes.level(rr) != self.nodes.level(t) {
            return t;
        }
        self.nodes.set_right(t, self.nodes.left(r));
        self.nodes.set_left(r, t);
        self.nodes.set_level(r, self.nodes.level(r) + 1);
        self.update(t);
        self.update(r);
        *changed = true;
        r
    }

    /// Andersson's fix-up at `t` after an insertion below it; returns the
    /// subtree's new top.
    pub(super) fn rebalance_insert(&mut self, t: u32, changed: &mut bool) -> u32 {
        self.update(t);
        let t = self.skew(t, changed);
        self.split(t, changed)
    }

    /// Andersson's fix-up at `t` after a removal below it: the level comes
    /// down to one above its lower child, then three skews and two splits
    /// along the right spine; returns the subtree's new top.
    pub(super) fn rebalance_remove(&mut self, t: u32, changed: &mut bool) -> u32 {
        let (left, right) = (self.nodes.left(t), self.nodes.right(t));
        let should = self.level(left).min(self.level(right)) + 1;
        if should < self.nodes.level(t) {
            self.nodes.set_level(t, should);
            if right != N::NIL && self.nodes.level(right) > should {
                self.nodes.set_level(right, should);
            }
            *changed = true;
        }
        self.update(t);
        let t = self.skew(t, changed);
        let r = self.nodes.right(t);
        if r != N::NIL {
            let r = self.skew(r, changed);
            self.nodes.set_right(t, r);
            let rr = self.nodes.right(r);
            if rr != N::NIL {
                let rr = self.skew(rr, changed);
                self.nodes.set_right(r, rr);
            }
        }
        let t = self.split(t, changed);
        let r = self.nodes.right(t);
        if r != N::NIL {
            let r = self.split(r, changed);
            self.nodes.set_right(t, r);
        }
        t
    }

    pub(super) fn leftmost(&self, mut n: u32) -> u32 {
        while self.nodes.left(n) != N::NIL {
            n = self.nodes.left(n);
        }
        n
    }

    pub(super) fn rightmost(&self, mut n: u32) -> u32 {
        while self.nodes.right(n) != N::NIL {
            n = self.nodes.right(n);
        }
        n
    }

    /// The first node whose key is greater than `k`, or equal if
    /// `inclusive`; NIL if none.
    pub(super) fn seek_node(&self, k: &Key, inclusive: bool) -> u32 {
        let (mut n, mut best) = (self.root, N::NIL);
        while n != N::NIL {
            let x = self.nodes.key(n);
            if x > k || (inclusive && x == k) {
                best = n;
                n = self.nodes.left(n);
            } else {
                n = self.nodes.right(n);
            }
        }
        best
    }

    /// Offers `q` the nodes of `n`'s subtree that may relate to its range,
    /// in order; returns true when `q` needs no more.
    fn query_at(&self, n: u32, q: &mut RangeQuery) -> bool {
        if n == N::NIL || self.span(n) <= (q.root, q.addr) {
            return false;
        }
        if self.query_at(self.nodes.left(n), q) {
            return true;
        }
        let k = self.nodes.key(n);
        if (k.root, k.base) >= (q.root, q.addr + q.size) {
            return false;
        }
        q.offer(n, k) || self.query_at(self.nodes.right(n), q)
    }

    fn opt(n: u32) -> Option<CapId> {
        (n != N::NIL).then_some(n)
    }
}

impl<N: Walk> Tree<N> {
    /// Checks the AA and augmentation invariants, the order and the
    /// variant's own links; returns the number of nodes. For tests.
    pub fn check(&self) -> usize {
        fn walk<N: Nodes>(t: &Tree<N>, n: u32) -> usize {
            if n == N::NIL {
                return 0;
            }
            let (x, l, r) = (&t.nodes, t.nodes.left(n), t.nodes.right(n));
            let level = x.level(n);
            assert!(t.level(l) < level, "left child level");
            assert!(t.level(r) <= level, "right child level");
            if r != N::NIL {
                assert!(t.level(x.right(r)) < level, "right grandchild");
            }
            if level > 1 {
                assert!(l != N::NIL && r != N::NIL, "inner node has two children");
            }
            let own = (x.key(n).root, x.key(n).end());
            assert_eq!(x.span(n), own.max(t.span(l)).max(t.span(r)), "span");
            if l != N::NIL {
                assert!(t.less(l, n), "left child sorts before");
            }
            if r != N::NIL {
                assert!(t.less(n, r), "right child sorts after");
            }
            1 + walk(t, l) + walk(t, r)
        }
        let count = walk(self, self.root);
        assert_eq!(count, self.len);
        let live = (0..self.nodes.slots() as u32).filter(|&n| self.nodes.level(n) > 0);
        assert_eq!(
            live.count(),
            self.len,
            "every node of level > 0 is in the tree"
        );
        N::check_links(self);
        count
    }
}

impl<N: Walk> Mdb for Tree<N> {
    fn new() -> Tree<N> {
        Tree {
            nodes: N::new(),
            root: N::NIL,
            len: 0,
        }
    }

    fn name(&self) -> &'static str {
        N::NAME
    }

    fn len(&self) -> usize {
        self.len
    }

    fn insert(&mut self, id: CapId, key: Key) -> Result<(), MdbError> {
        if id >= N::NIL {
            return Err(MdbError::IdOutOfRange);
        }
        if self.contains(id) {
            return Err(MdbError::DuplicateEntry);
        }
        self.nodes.place(id, key);
        self.len += 1;
        N::link(self, id);
        Ok(())
    }

    fn remove(&mut self, id: CapId) -> Result<(), MdbError> {
        if !self.contains(id) {
            return Err(MdbError::EntryNotFound);
        }
        N::unlink(self, id);
        self.nodes.clear(id);
        self.len -= 1;
        Ok(())
    }

    fn contains(&self, id: CapId) -> bool {
        (id as usize) < self.nodes.slots() && self.nodes.level(id) > 0
    }

    fn key(&self, id: CapId) -> Option<Key> {
        self.contains(id).then(|| *self.nodes.key(id))
    }

    fn first(&self) -> Option<CapId> {
        (self.root != N::NIL).then(|| self.leftmost(self.root))
    }

    fn successor(&self, id: CapId) -> Option<CapId> {
        self.contains(id)
            .then(|| Self::opt(N::successor(self, id)))?
    }

    fn predecessor(&self, id: CapId) -> Option<CapId> {
        self.contains(id)
            .then(|| Self::opt(N::predecessor(self, id)))?
    }

    fn seek(&self, k: &Key, inclusive: bool) -> Option<CapId> {
        Self::opt(self.seek_node(k, inclusive))
    }

    fn has_descendants(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let n = N::past_copies(self, id, &k);
        n != N::NIL && starts_inside(self.nodes.key(n), &k)
    }

    /// Goes down towards `id`'s key; the subtrees left behind on the way,
    /// and the nodes turned right at, are exactly the entries before it, so
    /// their largest span says whether any of them covers it.
    fn has_ancestors(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let target = (k.root, k.end());
        let (mut n, mut best) = (self.root, (0, 0));
        while n != N::NIL {
            let x = self.nodes.key(n);
            if *x < k {
                best = best
                    .max(self.span(self.nodes.left(n)))
                    .max((x.root, x.end()));
                if best >= target {
                    return true;
                }
                n = self.nodes.right(n);
            } else {
                n = self.nodes.left(n);
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
