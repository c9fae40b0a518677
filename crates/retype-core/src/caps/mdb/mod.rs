//! The mapping database: every capability of a core, indexed so that the
//! capability system can ask "does this have copies, descendants, ancestors,
//! what covers this range" (seed 001 §4.5).
//!
//! Entries are ordered by [`Key`] then by slot id, which puts copies side by
//! side and every descendant right after its ancestor's copies: a preorder
//! walk of the derivation forest, the order of seL4's derivation list. Five
//! implementations answer the same [`Mdb`] interface, the five that seed
//! 001 compares (§4.5.4, Fig. 4.6):
//!
//! - [`AaTree`]: an AA tree augmented with each subtree's largest end
//!   address (O(log n) for every query), with parent pointers;
//! - [`NoParentTree`]: the same tree without parent pointers, Barrelfish's
//!   default (a successor may take a search from the root);
//! - [`PackedTree`]: the tree with parent pointers whose level and span
//!   root are packed into the links' high bits by our own shifts and masks;
//! - [`BitfieldTree`]: the same packed links, declared as bitfields whose
//!   accessors a derive generates (the thesis's C bitfields);
//! - [`List`]: the doubly-linked list of seL4 (O(n) searches).
//!
//! The four trees share one AA tree (`tree`), which a node layout (`plain`,
//! or `packed` over a link word of its own or of `bitfield`) and a way back
//! up (parent links in `aa`, recursion in `no_parent`) make into each
//! variant.
//!
//! The queries rely on one invariant the capability system keeps: two
//! capabilities of the same type root overlap only if one derives from the
//! other. Then a capability's ancestors are exactly the earlier entries that
//! cover it, and its descendants the later entries (past its copies) that
//! start inside it.

mod aa;
mod bitfield;
mod list;
mod no_parent;
mod packed;
mod plain;
mod tree;

pub use aa::AaTree;
pub use bitfield::BitfieldTree;
pub use list::List;
pub use no_parent::NoParentTree;
pub use packed::PackedTree;

use super::cap::Key;

/// A slot id: the tie-breaker of the order, like a cte address in Barrelfish.
pub type CapId = u32;

/// How an entry relates to a queried range, weakest first
/// (Barrelfish's `MDB_RANGE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Relation {
    NotFound,
    /// The entry covers the whole range (equality included).
    Surrounding,
    /// The entry lies inside the range and is not equal to it.
    Inner,
    /// The entry straddles one end of the range.
    Partial,
}

impl Relation {
    /// The relation of `k` to `[addr, addr + size)` of type root `root`.
    pub fn of(k: &Key, root: u8, addr: u64, size: u64) -> Relation {
        let end = addr + size;
        if k.root != root || k.base >= end || k.end() <= addr {
            Relation::NotFound
        } else if k.base <= addr && k.end() >= end {
            Relation::Surrounding
        } else if k.base >= addr && k.end() <= end {
            Relation::Inner
        } else {
            Relation::Partial
        }
    }
}

/// The answer to a range query: the strongest relation found and the entry
/// that has it (None with NotFound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub relation: Relation,
    pub id: Option<CapId>,
}

/// Collects range-query hits visited in ascending order and keeps the best:
/// the strongest relation; among surrounding entries the latest (tightest),
/// among inner ones the earliest, among partial ones one that starts before
/// the range, else the latest.
pub(crate) struct RangeQuery {
    pub root: u8,
    pub addr: u64,
    pub size: u64,
    pub max: Relation,
    pub best: Found,
    best_starts_before: bool,
}

impl RangeQuery {
    pub fn new(root: u8, addr: u64, size: u64, max: Relation) -> RangeQuery {
        RangeQuery {
            root,
            addr,
            size,
            max,
            best: Found {
                relation: Relation::NotFound,
                id: None,
            },
            best_starts_before: false,
        }
    }

    /// Offers one entry; returns true when the search may stop (a relation
    /// stronger than `max` was found).
    pub fn offer(&mut self, id: CapId, k: &Key) -> bool {
        let r = Relation::of(k, self.root, self.addr, self.size);
        if r == Relation::NotFound {
            return false;
        }
        let starts_before = k.base < self.addr;
        let take = match r.cmp(&self.best.relation) {
            core::cmp::Ordering::Greater => true,
            core::cmp::Ordering::Less => false,
            core::cmp::Ordering::Equal => match r {
                Relation::Surrounding => true,
                Relation::Inner => false,
                _ => starts_before || !self.best_starts_before,
            },
        };
        if take {
            self.best = Found {
                relation: r,
                id: Some(id),
            };
            self.best_starts_before = starts_before;
        }
        r > self.max
    }
}

/// `d`, an entry past `k`'s copies, starts inside `k`: it is a descendant.
fn starts_inside(d: &Key, k: &Key) -> bool {
    d.root == k.root && d.base < k.end()
}

/// Why an insert or remove was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MdbError {
    DuplicateEntry,
    EntryNotFound,
    /// The slot id is one that the implementation's links cannot name.
    IdOutOfRange,
}

/// The mapping database interface shared by the trees and the list.
pub trait Mdb {
    /// An empty database.
    fn new() -> Self
    where
        Self: Sized;
    fn name(&self) -> &'static str;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn insert(&mut self, id: CapId, key: Key) -> Result<(), MdbError>;
    fn remove(&mut self, id: CapId) -> Result<(), MdbError>;
    fn contains(&self, id: CapId) -> bool;
    /// The key `id` was inserted with.
    fn key(&self, id: CapId) -> Option<Key>;
    fn first(&self) -> Option<CapId>;
    fn successor(&self, id: CapId) -> Option<CapId>;
    fn predecessor(&self, id: CapId) -> Option<CapId>;

    /// The first entry whose key is greater than `k`, or equal if `inclusive`.
    fn seek(&self, k: &Key, inclusive: bool) -> Option<CapId>;

    /// Another entry with an equal key exists.
    fn has_copies(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let same = |n: Option<CapId>| n.and_then(|n| self.key(n)) == Some(k);
        same(self.predecessor(id)) || same(self.successor(id))
    }

    /// The first entry past `id`'s copies starts inside it.
    fn has_descendants(&self, id: CapId) -> bool;

    /// An entry before `id`'s copies covers it.
    fn has_ancestors(&self, id: CapId) -> bool;

    /// The strongest relation any entry of type root `root` has to
    /// `[addr, addr + size)`, searching no further once one stronger than
    /// `max` is found.
    fn query(&self, root: u8, addr: u64, size: u64, max: Relation) -> Found;
}

#[cfg(test)]
mod tests;
