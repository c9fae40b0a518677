//! The empty pages a heap keeps, with their class and carved blocks, instead of giving them
//! back to their segments at once: a program that fills and empties pages of many classes
//! in turn (`rptest`: batches of a thousand blocks of random sizes) claimed, carved and
//! released a page for every 20 mallocs. A ring, oldest first, of at most [`KEEP_PAGES`]
//! pages, [`KEEP_BYTES`] and a [`KEEP_SHARE`]th of the bytes of the heap's pages, which
//! `heap::retire` fills; a page leaves it when a newer one needs its room, and goes back to
//! its segment then if it is still empty. A kept page reused meanwhile stays in the ring (it
//! is marked `kept`, so it is never in it twice), which only makes the ring smaller.
//!
//! The share bounds what keeping costs in memory: a class's kept page is memory another
//! class cannot use, so kept pages add up to the classes' peaks. With the share, `rptest 2
//! 2000 1000` took 2 % less time than without keeping on a quiet machine (10-13 % on a
//! loaded one) for 7 % more memory, `churn 2 1024 25` 5 % more memory, and `churn 1 32768
//! 10` 17 % less (its pages of up to eight slices are no longer cut up by other classes);
//! with 4 MiB whatever the heap, rptest took a little less time and every program more
//! memory; with an eighth, rptest took more time than without keeping.

use core::ptr;

use crate::page::{self, HeapId, Page};

/// Most pages a heap keeps.
const KEEP_PAGES: usize = 64;
/// Most bytes of pages a heap keeps.
pub(crate) const KEEP_BYTES: usize = 4 << 20;
/// A heap keeps at most this share (the inverse of) of the bytes of its pages.
pub(crate) const KEEP_SHARE: usize = 4;

/// Most bytes a heap holding `held` bytes of pages keeps.
pub(crate) fn limit(held: usize) -> usize {
    KEEP_BYTES.min(held / KEEP_SHARE)
}

/// The ring of kept pages, oldest first.
pub(crate) struct Kept {
    pages: [*mut Page; KEEP_PAGES],
    first: usize,
    len: usize,
    bytes: usize,
}

impl Kept {
    pub(crate) const EMPTY: Kept = Kept {
        pages: [ptr::null_mut(); KEEP_PAGES],
        first: 0,
        len: 0,
        bytes: 0,
    };

    /// Bytes of the pages in the ring.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many pages it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds `page`, of `bytes`, as the newest.
    pub(crate) fn push(&mut self, page: *mut Page, bytes: usize) {
        self.pages[(self.first + self.len) % KEEP_PAGES] = page;
        self.len += 1;
        self.bytes += bytes;
    }

    /// Takes the oldest page out.
    pub(crate) fn pop(&mut self) -> Option<*mut Page> {
        if self.len == 0 {
            return None;
        }
        let page = self.pages[self.first];
        self.first = (self.first + 1) % KEEP_PAGES;
        self.len -= 1;
        self.bytes -= page::span_bytes(page);
        Some(page)
    }

    /// Takes the oldest page out if the ring has no room for `bytes` more within `limit`.
    pub(crate) fn make_room(&mut self, bytes: usize, limit: usize) -> Option<*mut Page> {
        if self.len < KEEP_PAGES && self.bytes + bytes <= limit {
            return None;
        }
        self.pop()
    }

    /// The pages in the ring, oldest first.
    fn pages(&self) -> impl Iterator<Item = *mut Page> + '_ {
        (0..self.len).map(|i| self.pages[(self.first + i) % KEEP_PAGES])
    }

    /// Checks that the ring holds pages in use by `heap` marked kept, `marked` of them (as
    /// many as the heap's pages so marked), of the bytes counted, at most [`KEEP_BYTES`].
    pub(crate) unsafe fn check(
        &self,
        heap: *mut HeapId,
        marked: usize,
    ) -> Result<(), &'static str> {
        let mut bytes = 0;
        for page in self.pages() {
            // SAFETY: the caller owns the heap, whose kept pages are pages in use.
            if unsafe { !(*page).kept || (*page).heap != heap || (*page).in_use == 0 } {
                return Err("heap: a kept page not marked kept, or not a page of the heap");
            }
            bytes += page::span_bytes(page);
        }
        if marked != self.len || bytes != self.bytes || bytes > KEEP_BYTES {
            return Err("heap: the kept pages are not as counted, or too many");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::consts::SLICE_SIZE;

    proptest! {
        /// The ring is a queue bounded by [`KEEP_PAGES`] and a limit in bytes, which counts
        /// its bytes: put pages in as `heap::retire` does (the oldest taken out until the new
        /// one fits, which it may not even alone) or take the oldest out, and it holds the
        /// pages a double-ended queue holds, in the same order.
        #[test]
        fn the_ring_is_a_bounded_queue(
            limit in 0..=KEEP_BYTES,
            ops in proptest::collection::vec(proptest::option::of(1..=8usize), 0..400),
        ) {
            // A page of each span from 1 to 8 slices; the ring may hold one many times over.
            let mut pages: [Page; 8] =
                core::array::from_fn(|i| Page { span: i as u8 + 1, ..Page::empty() });
            let base = pages.as_mut_ptr();
            let page_of = |span: usize| base.wrapping_add(span - 1);
            let mut ring = Kept::EMPTY;
            let mut model: VecDeque<usize> = VecDeque::new();
            let model_bytes = |m: &VecDeque<usize>| m.iter().sum::<usize>() * SLICE_SIZE;
            for op in ops {
                let Some(span) = op else {
                    prop_assert_eq!(ring.pop(), model.pop_front().map(page_of));
                    continue;
                };
                let bytes = span * SLICE_SIZE;
                let mut out = Vec::new();
                while let Some(old) = ring.make_room(bytes, limit) {
                    out.push(old);
                }
                if ring.bytes() + bytes <= limit {
                    ring.push(page_of(span), bytes);
                }
                let mut expected_out = Vec::new();
                while !model.is_empty()
                    && (model.len() == KEEP_PAGES || model_bytes(&model) + bytes > limit)
                {
                    expected_out.extend(model.pop_front().map(page_of));
                }
                if model_bytes(&model) + bytes <= limit {
                    model.push_back(span);
                }
                prop_assert_eq!(out, expected_out);
                let held: Vec<*mut Page> = ring.pages().collect();
                prop_assert_eq!(held, model.iter().map(|&s| page_of(s)).collect::<Vec<_>>());
                prop_assert_eq!(ring.bytes(), model_bytes(&model));
                prop_assert!(ring.bytes() <= limit && ring.len <= KEEP_PAGES);
            }
        }
    }
}
