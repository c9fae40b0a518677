//! A class's spill: the blocks a heap's thread freed into the class's full pages, newest
//! first, which the class's next mallocs take before any page's. They stay counted as used
//! by their pages, so those pages stay full and where they are (unless other threads free
//! into one: it goes back to its class's queue, its spilled blocks still spilled and
//! counted, so it cannot retire while they are). The blocks are the free list of a page of
//! the spill's own, at which the heap points the class's fast path while the
//! spill holds blocks, and the free of one is the first case of the heap's slow path (the
//! page got a flag saying so when it turned full): a malloc from a spill is a fast-path pop,
//! and a free into it a dozen instructions past free's own (`churn 1 32768 10`: 0.230 ->
//! 0.169 s, tcmalloc 0.145; under callgrind 234 instructions a pair with the malloc and the
//! free of a spill on the slow path, 131 with this, 114 with the flag and the medium classes
//! by table).
//!
//! Why: a page of few blocks (up to [`PAGE_BLOCKS`]: blocks of 2 KiB and more, of 1408 bytes in a
//! segment's first slice) turns full after a few mallocs and back on the next free. Without a
//! spill, every such free moved its page from the full list to the back of its queue, the next
//! malloc that emptied a page moved it back, and a page whose blocks were all freed was given back
//! to its segment and claimed again soon after (`rptest 2 2000 1000`: 96,000 page claims in a run,
//! a few hundred with spills; 0.080 -> 0.060-0.070 s, peak RSS 23.7 -> 16.5 MiB); and malloc handed
//! out a block freed long ago, out of the cache, while one freed just now waited (`churn 1 32768
//! 10`: 13-17 % less time). Pages of many blocks rarely turn full; there a spill only sends every
//! free into a full page to the slow path (`churn 1 1024 50` took three times as long with spills
//! for every class; with spills for pages of up to 64 blocks, from 1 KiB, and the spill on the
//! fast path, 0.265 -> 0.345 s, `churn 2 1024 25` 0.130 -> 0.184 s).
//!
//! What a spill holds is the class's: no other class can use those pages meanwhile. So a
//! spill no malloc took from for the purge delay (`RETYPE_MALLOC_PURGE_DELAY`, as for empty
//! segments) goes back to its pages, which retire if empty, as all spills do at
//! `malloc_trim` and thread exit; the heap looks at its clock when it looks for a page and
//! every 256 frees into spills, so a thread that frees in bulk gives its memory back after
//! the delay as it goes on. Tighter bounds cost the gain: capped at 4 MiB, a quarter
//! of the heap's pages, half the class's blocks, or a run of frees without a malloc, rptest
//! took as long as without spills or longer, its spills given back and taken again every
//! round.

use core::sync::atomic::Ordering;

use crate::config;
use crate::consts::{HEADER_SIZE, SLICE_SIZE};
use crate::page::{Block, Page, CANARY_GAP, FLAG_SPILLS};
use crate::size_class::{self, CLASSES};

/// Pages of at most this many blocks spill their frees while full.
pub(crate) const PAGE_BLOCKS: u32 = 32;

/// Bytes of the smallest page: a slice, less the header in a segment's first, less the gap
/// before the first block with canaries.
const SMALLEST_PAGE: usize = SLICE_SIZE - HEADER_SIZE - CANARY_GAP;

/// The first class whose pages can be of [`PAGE_BLOCKS`] or fewer blocks: classes below never
/// spill, and a heap keeps spills for the others only.
pub(crate) const FIRST_CLASS: usize =
    size_class::class_of(SMALLEST_PAGE / (PAGE_BLOCKS as usize + 1) + 1);

/// How many classes spill.
pub(crate) const CLASSES_SPILLING: usize = CLASSES - FIRST_CLASS;

/// Whether a block freed into `page` by its owner goes to its class's spill: the page is
/// full and of few blocks, and frees spill at all (as [`fits`] said when it turned full).
pub(crate) unsafe fn takes(page: *const Page) -> bool {
    // SAFETY: the caller owns `page`, a page in use.
    unsafe { (*page).flags.load(Ordering::Relaxed) & FLAG_SPILLS != 0 }
}

/// Whether frees into `page` should spill while it is full: it is of few blocks, and frees
/// spill at all - not in hardened mode (a freed block must not be the next malloc's), nor
/// with a purge delay of 0 (memory freed goes back at once).
pub(crate) unsafe fn fits(page: *const Page) -> bool {
    // SAFETY: the caller owns `page`, a page in use.
    let reserved = unsafe { (*page).reserved };
    reserved <= PAGE_BLOCKS
        && !config::hardened()
        && config::PURGE_DELAY_MS.load(Ordering::Relaxed) != 0
}

/// A class's spill. Its blocks are the free list of a page of its own, which no block lies
/// in: while the spill holds blocks the heap points the class's fast path at that page, so
/// malloc pops the newest block as it pops any page's, without a branch of its own.
pub(crate) struct Spill {
    /// The blocks, newest first; its `used` counts the blocks taken out.
    page: Page,
    /// Blocks put in: minus `page.used`, the blocks it holds (both wrap).
    pushed: u32,
    /// `page.used` when the heap last looked (see [`Spill::stale`]).
    seen: u32,
    /// When a malloc last took a block as far as the heap saw, or the first block came (the
    /// heap's clock, ms).
    used_at: u32,
}

impl Spill {
    pub(crate) const fn empty() -> Spill {
        Spill {
            page: Page::empty(),
            pushed: 0,
            seen: 0,
            used_at: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.page.free.is_null()
    }

    pub(crate) fn len(&self) -> usize {
        self.pushed.wrapping_sub(self.page.used) as usize
    }

    /// The page whose free list the blocks are, for the fast path.
    pub(crate) fn page(&mut self) -> *mut Page {
        &raw mut self.page
    }

    /// Whether it holds blocks and no malloc took one for more than `delay` ms before `now`,
    /// as far as the heap can tell: it looks at every spill, at least half a delay apart, and
    /// a spill whose count of blocks taken moved since the look before, at `last`, was used
    /// then (the fast path takes blocks without reading the clock).
    pub(crate) fn stale(&mut self, last: u32, now: u32, delay: u32) -> bool {
        if self.page.used != self.seen {
            self.seen = self.page.used;
            if now.wrapping_sub(last) < now.wrapping_sub(self.used_at) {
                self.used_at = last;
            }
        }
        !self.is_empty() && now.wrapping_sub(self.used_at) > delay
    }

    /// Adds `b`, a freed block, as the newest, at `now` (see `used_at`); true if it is the
    /// only one.
    pub(crate) unsafe fn push(&mut self, b: *mut Block, now: u32) -> bool {
        let first = self.is_empty();
        if first {
            self.used_at = now;
        }
        // SAFETY: the caller gives up the freed block `b`; its first word becomes the link.
        unsafe { (*b).next = self.page.free };
        self.page.free = b;
        self.pushed = self.pushed.wrapping_add(1);
        first
    }

    /// Takes the newest block out, as the fast path does.
    pub(crate) fn pop(&mut self) -> Option<*mut Block> {
        if self.is_empty() {
            return None;
        }
        // SAFETY: the page's free list holds blocks.
        Some(unsafe { crate::page::pop(&raw mut self.page) }.cast())
    }

    /// Empties the spill; returns its blocks, linked through their first words.
    pub(crate) fn take(&mut self) -> *mut Block {
        let first = self.page.free;
        self.page.free = core::ptr::null_mut();
        self.pushed = self.page.used;
        first
    }

    /// The first block, to walk the list (for the heap's consistency check).
    pub(crate) fn first(&self) -> *mut Block {
        self.page.free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest page of a class below the first that spills holds too many blocks to
    /// spill, and the first class's does not.
    #[test]
    fn classes_below_the_first_never_spill() {
        let blocks = |class| (SMALLEST_PAGE / size_class::block_size(class)) as u32;
        for class in (1..FIRST_CLASS).filter(|&c| size_class::is_class(c)) {
            assert!(blocks(class) > PAGE_BLOCKS, "class {class}");
        }
        assert!(blocks(FIRST_CLASS) <= PAGE_BLOCKS);
    }

    /// A spill counts blocks in and out without bound: its length stays right when both
    /// counts wrap (a debug build would stop on an overflow otherwise).
    #[test]
    fn counts_wrap() {
        let mut blocks = [const {
            Block {
                next: core::ptr::null_mut(),
            }
        }; 3];
        let mut sp = Spill::empty();
        sp.page.used = u32::MAX - 1;
        sp.pushed = u32::MAX - 1;
        assert_eq!(sp.len(), 0);
        for (i, b) in blocks.iter_mut().enumerate() {
            // SAFETY: the blocks are ours and outlive the spill's use of them.
            unsafe { sp.push(b, 0) };
            assert_eq!(sp.len(), i + 1);
        }
        for left in (0..3).rev() {
            assert!(sp.pop().is_some());
            assert_eq!(sp.len(), left);
        }
        assert!(sp.is_empty() && sp.pop().is_none());
        assert_eq!(sp.page.used, 1, "wrapped past u32::MAX");
    }
}
