//! An intrusive treap of free blocks: a binary search tree in the blocks' own
//! link words, kept balanced (expected depth O(log n)) by heap-ordering the
//! nodes on a hash of their address. The hash makes the shape a deterministic
//! function of the set of blocks, so no priority needs storing.
//!
//! The order of the keys is the [`Order`] parameter, which may also ask each
//! node to carry the largest block size in its subtree: that lets an
//! address-ordered tree answer "first block of at least n bytes" in one
//! descent (McCreight's augmented tree, which seed 002 proposes).

use core::marker::PhantomData;

use super::block::{get_link, set_link, Block, WORD};
use super::{ensure, CheckError};

const LEFT: usize = 0;
const RIGHT: usize = 1;
const MAX: usize = 2;

/// A strict total order on free blocks, and whether the tree keeps subtree maxima.
pub trait Order {
    /// Whether each node records the largest block size in its subtree
    /// (needed by [`Treap::first_at_least`]; costs a third link word).
    const AUGMENTED: bool;
    /// Link words a tree node needs: left, right and, if augmented, the maximum.
    const LINKS: usize = if Self::AUGMENTED { 3 } else { 2 };

    /// # Safety
    /// Both blocks must be free blocks of the heap.
    unsafe fn less(a: Block, b: Block) -> bool;
}

pub struct Treap<O> {
    root: Option<Block>,
    order: PhantomData<O>,
}

impl<O> Default for Treap<O> {
    fn default() -> Self {
        Treap {
            root: None,
            order: PhantomData,
        }
    }
}

/// The node's priority: a mix of its address (splitmix64's finaliser).
fn priority(b: Block) -> u64 {
    crate::rng::mix((b.addr() as usize / WORD) as u64)
}

unsafe fn left(b: Block) -> Option<Block> {
    // SAFETY: callers pass tree nodes.
    unsafe { get_link(b, LEFT) }
}

unsafe fn right(b: Block) -> Option<Block> {
    // SAFETY: callers pass tree nodes.
    unsafe { get_link(b, RIGHT) }
}

/// The largest block size in the subtree rooted at `t` (0 if empty).
///
/// # Safety
/// `t` must be a tree node or `None`.
unsafe fn subtree_max(t: Option<Block>) -> usize {
    // SAFETY: by the caller's contract.
    t.map_or(0, |b| unsafe { b.link(MAX).read() as usize })
}

impl<O: Order> Treap<O> {
    /// Sets the children of `b` and, if augmented, recomputes its subtree maximum.
    unsafe fn join(b: Block, l: Option<Block>, r: Option<Block>) -> Block {
        // SAFETY: callers pass tree nodes.
        unsafe {
            set_link(b, LEFT, l);
            set_link(b, RIGHT, r);
            if O::AUGMENTED {
                let max = b.size().max(subtree_max(l)).max(subtree_max(r));
                b.link(MAX).write(max as *mut u8);
            }
        }
        b
    }

    /// Splits `t` into the nodes before `key` and the nodes from `key` on.
    unsafe fn split(t: Option<Block>, key: Block) -> (Option<Block>, Option<Block>) {
        let Some(n) = t else { return (None, None) };
        // SAFETY: `n` is a tree node; `key` a free block.
        unsafe {
            if O::less(n, key) {
                let (l, r) = Self::split(right(n), key);
                (Some(Self::join(n, left(n), l)), r)
            } else {
                let (l, r) = Self::split(left(n), key);
                (l, Some(Self::join(n, r, right(n))))
            }
        }
    }

    /// Joins two trees where every node of `a` is before every node of `b`.
    unsafe fn merge(a: Option<Block>, b: Option<Block>) -> Option<Block> {
        match (a, b) {
            (None, t) | (t, None) => t,
            // SAFETY: both are tree nodes.
            (Some(x), Some(y)) => unsafe {
                if priority(x) > priority(y) {
                    Some(Self::join(x, left(x), Self::merge(right(x), b)))
                } else {
                    Some(Self::join(y, Self::merge(a, left(y)), right(y)))
                }
            },
        }
    }

    /// # Safety
    /// `b` must be a free block not in the tree.
    pub unsafe fn insert(&mut self, b: Block) {
        // SAFETY: by the caller's contract.
        unsafe { self.root = Some(Self::insert_into(self.root, b)) }
    }

    /// Descends to where `b`'s priority puts it and splits the subtree there
    /// into its children.
    unsafe fn insert_into(t: Option<Block>, b: Block) -> Block {
        // SAFETY: `t` is a tree node or None; `b` a free block.
        unsafe {
            match t {
                Some(n) if priority(n) > priority(b) => {
                    if O::less(b, n) {
                        Self::join(n, Some(Self::insert_into(left(n), b)), right(n))
                    } else {
                        Self::join(n, left(n), Some(Self::insert_into(right(n), b)))
                    }
                }
                _ => {
                    let (l, r) = Self::split(t, b);
                    Self::join(b, l, r)
                }
            }
        }
    }

    /// # Safety
    /// `b` must be in the tree with the key it was inserted with.
    pub unsafe fn remove(&mut self, b: Block) {
        // SAFETY: by the caller's contract.
        unsafe { self.root = Self::remove_from(self.root, b) }
    }

    unsafe fn remove_from(t: Option<Block>, b: Block) -> Option<Block> {
        let n = t?;
        // SAFETY: `n` is a tree node; `b` is in its subtree.
        unsafe {
            if n == b {
                Self::merge(left(n), right(n))
            } else if O::less(b, n) {
                Some(Self::join(n, Self::remove_from(left(n), b), right(n)))
            } else {
                Some(Self::join(n, left(n), Self::remove_from(right(n), b)))
            }
        }
    }

    /// The first node in key order whose key is not less than `key`'s, for a
    /// `key` described by the predicate `before(n)` = "n is less than key".
    ///
    /// # Safety
    /// The tree must be well formed.
    pub unsafe fn lower_bound(&self, before: impl Fn(Block) -> bool) -> Option<Block> {
        let (mut at, mut found) = (self.root, None);
        while let Some(n) = at {
            // SAFETY: `n` is a tree node.
            at = unsafe {
                if before(n) {
                    right(n)
                } else {
                    found = Some(n);
                    left(n)
                }
            };
        }
        found
    }

    /// The first node in key order of at least `size` bytes, by the subtree maxima.
    ///
    /// # Safety
    /// The tree must be well formed and augmented.
    pub unsafe fn first_at_least(&self, size: usize) -> Option<Block> {
        const { assert!(O::AUGMENTED, "first_at_least needs subtree maxima") };
        let mut at = self.root;
        // SAFETY: every node reached is a tree node.
        unsafe {
            while let Some(n) = at {
                if subtree_max(left(n)) >= size {
                    at = left(n);
                } else if n.size() >= size {
                    return Some(n);
                } else if subtree_max(right(n)) >= size {
                    at = right(n);
                } else {
                    return None;
                }
            }
        }
        None
    }

    /// Visits the nodes in order, checking key order, heap order of the
    /// priorities and the subtree maxima.
    ///
    /// # Safety
    /// As for [`super::fit::FreeIndex::visit`].
    pub unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        let mut last = None;
        // SAFETY: forwarded contract.
        unsafe { Self::visit_subtree(self.root, u64::MAX, &mut last, f).map(|_| ()) }
    }

    /// Returns the subtree's largest block size.
    unsafe fn visit_subtree(
        t: Option<Block>,
        parent_priority: u64,
        last: &mut Option<Block>,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<usize, CheckError> {
        let Some(n) = t else { return Ok(0) };
        f(n)?;
        // SAFETY: `f` accepted `n` as a free block of the heap.
        unsafe {
            ensure!(
                priority(n) <= parent_priority,
                "treap: heap order broken at {:p}",
                n.addr()
            );
            let l = Self::visit_subtree(left(n), priority(n), last, f)?;
            ensure!(
                last.is_none_or(|l| O::less(l, n)),
                "treap: key order broken at {:p}",
                n.addr()
            );
            *last = Some(n);
            let r = Self::visit_subtree(right(n), priority(n), last, f)?;
            let max = n.size().max(l).max(r);
            ensure!(
                !O::AUGMENTED || subtree_max(Some(n)) == max,
                "treap: wrong subtree maximum at {:p}",
                n.addr()
            );
            Ok(max)
        }
    }
}
