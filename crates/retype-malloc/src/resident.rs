//! The pages of free slices that may still be resident, held to one budget for the process.
//!
//! A page released to a segment that stays in use leaves its slices' pages resident: its
//! carved blocks were written. Nothing gave them back while the segment had a page in use,
//! and the page claiming a slice next, of whatever class, kept every page its predecessors
//! carved there however few blocks it carved itself. With a heap per thread those add up with
//! the thread count: at 16 threads on 2 cores, free slices and pages past the carved blocks
//! made up half of `transient 16 2000 2000`'s peak RSS. So each slice records how many of its
//! OS pages may be resident; the records of free slices count against [`BUDGET_PAGES`]
//! ([`UNSPILLED_BUDGET_PAGES`] in hardened and secure modes), and a release that would take
//! them past it returns its run's pages at once (bar the first, which the next page there
//! carves at once). One budget for all heaps, not one each: on 1 and 2 threads the free slices
//! stay within it and almost no page is returned, where returning every release's pages cost
//! `transient 2 15000 1000` about 15 % more CPU time (a system call, then page faults when the
//! slice is claimed again); 16 heaps share it.

use core::ops::Range;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::config;
use crate::consts::{HEADER_SIZE, OS_PAGE, SLICES, SLICE_SIZE};

/// Most OS pages the free slices of all segments in use may hold resident before releases
/// return theirs: 1 MiB.
pub(crate) const BUDGET_PAGES: usize = (1 << 20) / OS_PAGE;

/// The budget where frees do not spill (any measure of hardened mode, secure mode's among
/// them, see `spill::fits`): 8 MiB. There pages of few blocks turn empty and are claimed again
/// every few frees and mallocs, and every OS page of a run returned faults again as it is
/// carved (all of them where free blocks are filled, see `freed`): with 1 MiB, hardened
/// `rptest 2 1000 1000` made 6,500 `madvise` calls and 130,000 page faults (the default mode
/// 3,800), 0.55 s of system time in 2.7 s, and secure mode 413,000 faults, 2.2 s of system
/// time in 2.5 s.
const UNSPILLED_BUDGET_PAGES: usize = (8 << 20) / OS_PAGE;

/// The budget in force (see [`UNSPILLED_BUDGET_PAGES`]).
fn budget() -> usize {
    if config::hardened() {
        UNSPILLED_BUDGET_PAGES
    } else {
        BUDGET_PAGES
    }
}

/// OS pages the free slices of all segments in use may hold resident, as recorded.
static FREE_PAGES: AtomicUsize = AtomicUsize::new(0);

/// Per slice of a segment, how many of its OS pages (past the segment's header, in the first)
/// may be resident: touched since they were last returned.
pub(crate) struct Slices {
    pages: [u8; SLICES],
    /// The records of the free slices, counted in [`FREE_PAGES`].
    counted: u32,
}

/// Where the pages of slice `j` that its record counts start, in bytes from the segment's start.
const fn floor(j: usize) -> usize {
    j * SLICE_SIZE + if j == 0 { HEADER_SIZE } else { 0 }
}

impl Slices {
    /// A segment whose `touched` slices (of a mapping whose pages were kept) may be resident
    /// whole; they are free, so they count.
    pub(crate) fn new(touched: u32) -> Slices {
        let mut s = Slices {
            pages: [0; SLICES],
            counted: 0,
        };
        for j in (0..SLICES).filter(|&j| touched & (1 << j) != 0) {
            s.pages[j] = (((j + 1) * SLICE_SIZE - floor(j)) / OS_PAGE) as u8;
            s.counted += s.pages[j] as u32;
        }
        FREE_PAGES.fetch_add(s.counted as usize, Ordering::Relaxed);
        s
    }

    /// The run of `span` slices at `index` is claimed by a page: its records no longer count
    /// (the page holds what they record until it is released).
    pub(crate) fn claim(&mut self, index: usize, span: usize) {
        let held: u32 = self.pages[index..index + span]
            .iter()
            .map(|&p| p as u32)
            .sum();
        if held != 0 {
            self.counted -= held;
            FREE_PAGES.fetch_sub(held as usize, Ordering::Relaxed);
        }
    }

    /// The page at the run of `span` slices at `index` is released, its blocks carved up to
    /// `carved_end` bytes from the segment's start: the run's records take in those pages and
    /// count again. Returns the range (in bytes from the segment's start) whose pages the
    /// caller must return to the OS when they would take the free slices past the budget;
    /// the records then hold only the run's first page.
    pub(crate) fn release(
        &mut self,
        index: usize,
        span: usize,
        carved_end: usize,
    ) -> Option<Range<usize>> {
        let room = budget().saturating_sub(FREE_PAGES.load(Ordering::Relaxed));
        let before = self.counted;
        let returned = self.record(index, span, carved_end, room);
        FREE_PAGES.fetch_add((self.counted - before) as usize, Ordering::Relaxed);
        returned
    }

    /// [`Slices::release`] with `room` pages left in the budget.
    fn record(
        &mut self,
        index: usize,
        span: usize,
        carved_end: usize,
        room: usize,
    ) -> Option<Range<usize>> {
        let (mut total, mut end) = (0, 0);
        for j in index..index + span {
            let top = carved_end.clamp(floor(j), (j + 1) * SLICE_SIZE);
            let carved = (top - floor(j)).div_ceil(OS_PAGE) as u8;
            self.pages[j] = self.pages[j].max(carved);
            total += self.pages[j] as u32;
            if self.pages[j] != 0 {
                end = floor(j) + self.pages[j] as usize * OS_PAGE;
            }
        }
        let from = floor(index) + OS_PAGE;
        let returned = (total as usize > room && end > from).then(|| {
            self.pages[index + 1..index + span].fill(0);
            self.pages[index] = self.pages[index].min(1);
            total = self.pages[index] as u32;
            from..end
        });
        self.counted += total;
        returned
    }

    /// The segment is empty and leaves the heap (for the cache): its records no longer count.
    pub(crate) fn forget(&mut self) {
        FREE_PAGES.fetch_sub(self.counted as usize, Ordering::Relaxed);
        self.counted = 0;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const PAGES: usize = SLICES * SLICE_SIZE / OS_PAGE;

    /// The OS pages a record of slice `j` counts, as indices in the segment.
    fn pages_of(j: usize) -> Range<usize> {
        floor(j) / OS_PAGE..(j + 1) * SLICE_SIZE / OS_PAGE
    }

    proptest! {
        /// Against a model of the kernel's view (which OS pages of a segment are resident):
        /// pages are claimed on free aligned runs, carve to a depth and are released with
        /// some room left in the budget. Every resident page but a run's first lies within
        /// its slice's record, so a returned range covers them all; the records of the free
        /// slices are what is counted; a release keeps within the room, or returns all of
        /// its run but the first page (which alone may stay past the room).
        #[test]
        fn records_cover_what_is_resident(
            touched in any::<u32>(),
            ops in proptest::collection::vec((0..SLICES, 0..4u32, 0..=SLICE_SIZE * 8, 0..600usize), 0..200),
        ) {
            let mut s = Slices { pages: [0; SLICES], counted: 0 };
            let mut resident = [false; PAGES];
            for j in (0..SLICES).filter(|&j| touched & (1 << j) != 0) {
                let fresh = Slices::new(1 << j);
                FREE_PAGES.fetch_sub(fresh.counted as usize, Ordering::Relaxed);
                s.pages[j] = fresh.pages[j];
                s.counted += fresh.counted;
                resident[pages_of(j)].fill(true);
            }
            let mut used = 0u32;
            for (at, log, depth, room) in ops {
                let span = 1usize << log;
                let index = at / span * span;
                let mask = (((1u64 << span) - 1) as u32) << index;
                if used & mask != 0 {
                    continue;
                }
                s.claim(index, span);
                used |= mask;
                let start = floor(index);
                let carved_end = (start + depth).min((index + span) * SLICE_SIZE);
                resident[start / OS_PAGE..carved_end.div_ceil(OS_PAGE)].fill(true);
                let returned = s.record(index, span, carved_end, room);
                used &= !mask;
                if let Some(r) = returned.clone() {
                    prop_assert!(r.start == start + OS_PAGE && r.end <= (index + span) * SLICE_SIZE);
                    resident[r.start / OS_PAGE..r.end / OS_PAGE].fill(false);
                }
                let run: u32 = s.pages[index..index + span].iter().map(|&p| p as u32).sum();
                // Only the run's first page may stay past the room: that page is never
                // returned (nothing is, when nothing past it was carved).
                prop_assert!(run as usize <= room || run <= 1);
                prop_assert!(returned.is_none() || run <= 1);
                for j in 0..SLICES {
                    let covered = floor(j) + s.pages[j] as usize * OS_PAGE;
                    for k in pages_of(j).filter(|&k| resident[k]) {
                        prop_assert!(k * OS_PAGE < covered, "slice {} page {}", j, k);
                    }
                }
                let free: u32 = (0..SLICES)
                    .filter(|&j| used & (1 << j) == 0)
                    .map(|j| s.pages[j] as u32)
                    .sum();
                prop_assert_eq!(s.counted, free);
            }
        }
    }
}
