//! A thread's batch of frees into one page of another heap: consecutive frees by a thread
//! into the same page it does not own are linked here, without an atomic, and the page's
//! owner is sent them at once, with one compare-and-swap onto the page's remote list,
//! when a free goes to another page, when the batch is full, and whenever the thread's heap
//! goes to its slow path, parks or exits (so blocks never wait longer than the thread's next
//! slow path, and a thread holds back at most [`BATCH_MAX`] blocks of one page).
//!
//! Why: a thread that frees what another allocated (a consumer of a producer's objects,
//! `xmalloc`) frees blocks in about the order they were handed out, so mostly into the page
//! it freed into last; one CAS per block made that page's remote list, written by the
//! consumer and taken by the producer, bounce between their cores on every free. snmalloc
//! batches its remote frees the same way (a builder of frees per open slab, posted together).

use core::ptr;

use crate::page::{Block, Page};

/// The most blocks a batch holds before it is sent.
pub(crate) const BATCH_MAX: u32 = 64;

/// Blocks freed into `page`, linked `first` to `last` (newest first), not yet on its remote
/// list; they count as used by the page meanwhile, which keeps it alive.
pub(crate) struct Batch {
    pub page: *mut Page,
    pub first: *mut Block,
    pub last: *mut Block,
    pub len: u32,
}

impl Batch {
    pub(crate) const EMPTY: Batch = Batch {
        page: ptr::null_mut(),
        first: ptr::null_mut(),
        last: ptr::null_mut(),
        len: 0,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `block`, a block of `page` just freed, if the batch is of `page` and not full;
    /// false (the batch unchanged) if it must be sent first.
    #[inline(always)]
    pub(crate) unsafe fn add(&mut self, page: *mut Page, block: *mut Block) -> bool {
        if self.len == 0 {
            self.page = page;
            self.last = block;
        } else if self.page != page || self.len == BATCH_MAX {
            return false;
        }
        // SAFETY: the caller gives up `block`; its first word becomes the link.
        unsafe { (*block).next = self.first };
        self.first = block;
        self.len += 1;
        true
    }

    /// Empties the batch; returns what it held, to be sent.
    pub(crate) fn take(&mut self) -> Batch {
        core::mem::replace(self, Batch::EMPTY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch takes blocks of one page up to [`BATCH_MAX`], linked newest first from
    /// `first` to `last`, and refuses another page's or one more; `take` empties it.
    #[test]
    fn a_batch_holds_blocks_of_one_page_up_to_its_bound() {
        let n = BATCH_MAX as usize;
        let mut blocks: Vec<Block> = (0..n + 1)
            .map(|_| Block {
                next: ptr::null_mut(),
            })
            .collect();
        let (mut a, mut b) = (Page::empty(), Page::empty());
        let (a, b): (*mut Page, *mut Page) = (&raw mut a, &raw mut b);
        let base = blocks.as_mut_ptr();
        let mut batch = Batch::EMPTY;
        // SAFETY: the blocks are ours and outlive the batch; its links stay within them.
        unsafe {
            for i in 0..n {
                assert!(batch.add(a, base.add(i)));
                assert!(!batch.add(b, base.add(n)), "another page");
            }
            assert!(!batch.add(a, base.add(n)), "full");
            let sent = batch.take();
            assert!(batch.is_empty() && sent.page == a && sent.len == BATCH_MAX);
            assert!(sent.last == base && (*sent.last).next.is_null());
            let mut p = sent.first;
            for i in (0..n).rev() {
                assert_eq!(p, base.add(i), "newest first");
                p = (*p).next;
            }
            assert!(p.is_null());
        }
    }
}
