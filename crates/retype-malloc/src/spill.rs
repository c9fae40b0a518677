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
//! What a spill holds is the class's: no other class can use those pages meanwhile. So a
//! spill no malloc took from for the purge delay (`RETYPE_MALLOC_PURGE_DELAY`, as for empty
//! segments) goes back to its pages, which retire if empty, as all spills do at
//! `malloc_trim` and thread exit; the heap looks at its clock when it looks for a page and
//! every 256 spill pushes and pops, so a thread that frees in bulk gives its memory back
//! after the delay as it goes on. Tighter bounds cost the gain: capped at 4 MiB, a quarter
//! of the heap's pages, half the class's blocks, or a run of frees without a malloc, rptest
//! took as long as without spills or longer, its spills given back and taken again every
//! round.

use core::ptr;
use core::sync::atomic::Ordering;

use crate::config;
use crate::page::{Block, Page, FLAG_FULL};

/// Pages of at most this many blocks spill their frees while full.
pub(crate) const PAGE_BLOCKS: u32 = 32;

/// Whether a block freed into `page` by its owner goes to its class's spill: the page is
/// full and of few blocks, and frees spill at all - not in hardened mode (a freed block must
/// not be the next malloc's), nor with a purge delay of 0 (memory freed goes back at once).
pub(crate) unsafe fn takes(page: *const Page) -> bool {
    // SAFETY: the caller owns `page`, a page in use.
    let (flags, reserved) = unsafe { ((*page).flags.load(Ordering::Relaxed), (*page).reserved) };
    flags & FLAG_FULL != 0
        && reserved <= PAGE_BLOCKS
        && !config::hardened()
        && config::PURGE_DELAY_MS.load(Ordering::Relaxed) != 0
}

/// A class's spill: a list through the blocks' first words.
#[derive(Clone, Copy)]
pub(crate) struct Spill {
    first: *mut Block,
    len: u32,
    /// When a malloc last took a block, or the first block came (the heap's clock, ms).
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

    /// Whether it holds blocks and no malloc took one for more than `delay` ms before `now`.
    pub(crate) fn stale(&self, now: u32, delay: u32) -> bool {
        !self.is_empty() && now.wrapping_sub(self.used_at) > delay
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
