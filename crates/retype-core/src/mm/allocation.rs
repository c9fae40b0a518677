//! The table of live allocations: where each served request's objects went
//! and the capabilities naming them.
//!
//! Entries are filled and emptied in place and reused last-freed first, so a
//! request moves no entry, and an entry's vectors keep their capacity: once
//! the table has grown, requests allocate nothing.

use alloc::vec::Vec;

use super::AllocId;
use crate::kernel::CapId;

/// The objects one descriptor created: contiguous, `count` of `2^bits` bytes
/// from offset `first` of slab `slab`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed {
    pub first: u64,
    pub slab: u32,
    pub bits: u32,
    pub count: u32,
}

impl Placed {
    pub fn bytes(&self) -> u64 {
        u64::from(self.count) << self.bits
    }
}

/// A served request; empty while its entry is free.
#[derive(Clone, Debug, Default)]
pub(super) struct Allocation {
    pub placed: Vec<Placed>,
    /// One per object, in the order of `placed`.
    pub caps: Vec<CapId>,
}

/// The live allocations, indexed by [`AllocId`].
#[derive(Clone, Debug, Default)]
pub(super) struct Allocations {
    entries: Vec<Allocation>,
    free: Vec<u32>,
}

impl Allocations {
    /// An empty entry to fill, and its name; [`Allocations::vacate`] gives it
    /// back if the request fails.
    #[inline]
    pub fn vacant(&mut self) -> (AllocId, &mut Allocation) {
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.entries.push(Allocation::default());
                self.entries.len() - 1
            }
        };
        (AllocId(i as u32), &mut self.entries[i])
    }

    /// The live allocation `id`.
    pub fn get(&self, id: AllocId) -> Option<&Allocation> {
        self.entries
            .get(id.0 as usize)
            .filter(|a| !a.placed.is_empty())
    }

    /// Empties entry `id` for reuse.
    pub fn vacate(&mut self, id: AllocId) {
        let a = &mut self.entries[id.0 as usize];
        a.placed.clear();
        a.caps.clear();
        self.free.push(id.0);
    }

    /// Every live allocation.
    pub fn iter(&self) -> impl Iterator<Item = &Allocation> {
        self.entries.iter().filter(|a| !a.placed.is_empty())
    }
}
