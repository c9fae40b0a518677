//! A class's spill: the blocks a heap's thread freed into the class's full pages, newest
//! first, which the class's next mallocs take before any page's. They stay counted as used
//! by their pages, so those pages stay full and where they are.
//!
//! Why: a page of few blocks (up to [`PAGE_BLOCKS`]: blocks of 2 KiB and more) turns full
//! after a few mallocs and back on the next free. Without a spill, every such free moved its
//! page from the full list to the back of its queue, the next malloc that emptied a page
//! moved it back, and a page whose blocks were all freed was given back to its segment and
//! claimed again soon after (`rptest 2 2000 1000`: 96,000 page claims in a run, a few
//! hundred with spills; 0.080 -> 0.060-0.070 s, peak RSS 23.7 -> 16.5 MiB); and malloc handed
//! out a block freed long ago, out of the cache, while one freed just now waited (`churn 1
//! 32768 10`: 13-17 % less time). Pages of many blocks rarely turn full; there a spill only
//! sends every free into a full page, and every malloc while the spill holds blocks, to the
//! slow path (`churn 1 1024 50` took three times as long with spills for every class).
//!
//! What a spill holds is the class's: no other class can use those pages meanwhile. A spill
//! no malloc has taken from while the heap claimed `heap::STALE_CLAIMS` pages goes back to
//! its pages (which retire if empty) at the next claim, as do all spills at `malloc_trim`
//! and thread exit. Tighter bounds cost the gain: capped at 4 MiB, a quarter of the heap's
//! pages, half the class's blocks, or a run of frees without a malloc, rptest took as long
//! as without spills or longer, its spills given back and taken again every round.

use core::ptr;

use crate::page::Block;

/// Pages of at most this many blocks spill their frees while full.
pub(crate) const PAGE_BLOCKS: u32 = 32;

/// A class's spill: a list through the blocks' first words.
#[derive(Clone, Copy)]
pub(crate) struct Spill {
    first: *mut Block,
    len: u32,
    /// When a malloc last took a block, or the first block came: a count of the heap's page
    /// claims, its clock.
    used_at: u32,
}

impl Spill {
    pub(crate) const EMPTY: Spill = Spill {
        first: ptr::null_mut(),
        len: 0,
        used_at: 0,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_null()
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no malloc took a block since `stale` claims before `now`.
    pub(crate) fn stale(&self, now: u32, stale: u32) -> bool {
        !self.is_empty() && now.wrapping_sub(self.used_at) > stale
    }

    /// Adds `b`, a freed block, as the newest, at `now` (see `used_at`).
    pub(crate) unsafe fn push(&mut self, b: *mut Block, now: u32) {
        if self.first.is_null() {
            self.used_at = now;
        }
        // SAFETY: the caller gives up the freed block `b`; its first word becomes the link.
        unsafe { (*b).next = self.first };
        self.first = b;
        self.len += 1;
    }

    /// Takes the newest block out, at `now`.
    pub(crate) unsafe fn pop(&mut self, now: u32) -> Option<*mut Block> {
        if self.first.is_null() {
            return None;
        }
        let b = self.first;
        // SAFETY: `b` is a block of the list, whose first word links to the next.
        self.first = unsafe { (*b).next };
        self.len -= 1;
        self.used_at = now;
        Some(b)
    }

    /// Empties the spill; returns its blocks, linked through their first words.
    pub(crate) fn take(&mut self) -> *mut Block {
        let first = self.first;
        *self = Spill::EMPTY;
        first
    }

    /// The first block, to walk the list (for the heap's consistency check).
    pub(crate) fn first(&self) -> *mut Block {
        self.first
    }
}
