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
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::page::{Block, Page};
use crate::{config, transfer};

/// The most blocks a batch holds before it is sent.
pub(crate) const BATCH_MAX: u32 = 64;

/// A batch of at most this many blocks, when it is sent, joins the thread's strays of its
/// class instead (see [`Strays`]).
pub(crate) const STRAY_LEN: u32 = 4;

/// The most bytes of one class's strays a thread holds: past them (or at [`BATCH_MAX`]
/// blocks) they go to the transfer cache, together.
pub(crate) const STRAY_BYTES: usize = 4096;

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

/// Heaps that threads hold (taken from the pool or made, not yet put back: see `pool`).
pub(crate) static HEAPS_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Whether threads hold more than twice as many heaps as there are CPUs: then most of them
/// wait for a core while the others free into their pages, and the blocks freed there wait
/// for them; strays are gathered only then (a read of a line that only a thread's first
/// malloc, park and exit write). With fewer, owners collect their frees soon, and a block
/// handed to another heap would only go round, its next free a remote free too: `larson 2 10
/// 5000 200000`, whose main thread sleeps with its heap while two threads work (three heaps
/// on two CPUs), ran 2.3 % more instructions with strays from more heaps than CPUs.
#[inline]
pub(crate) fn oversubscribed() -> bool {
    HEAPS_IN_USE.load(Ordering::Relaxed) > config::CPUS.load(Ordering::Relaxed).saturating_mul(2)
}

/// Blocks of one class that a thread freed into other heaps' pages in batches of few blocks,
/// of any pages, linked newest first from `first` to `last`; they count as used by their
/// pages meanwhile. Frees that fall on pages at random (`pool`: every thread frees any
/// thread's blocks) close a batch each, one compare-and-swap a block, and each block then
/// waits for its page's owner, which may not run (16 threads on 2 cores); gathered by class,
/// they serve the thread's own next page claim of the class, or any heap's through the
/// transfer cache, as tcmalloc's central free lists hold blocks of any span.
pub(crate) struct Strays {
    pub first: *mut Block,
    pub last: *mut Block,
    pub len: u32,
}

impl Strays {
    pub(crate) const EMPTY: Strays = Strays {
        first: ptr::null_mut(),
        last: ptr::null_mut(),
        len: 0,
    };

    /// Adds the blocks of `b`, given up by the caller.
    pub(crate) unsafe fn add(&mut self, b: &Batch) {
        if self.len == 0 {
            self.last = b.last;
        }
        // SAFETY: the batch's blocks are the caller's; its last one's link joins ours.
        unsafe { (*b.last).next = self.first };
        self.first = b.first;
        self.len += b.len;
    }

    /// Empties the strays; returns what they held.
    pub(crate) fn take(&mut self) -> transfer::Batch {
        let s = core::mem::replace(self, Strays::EMPTY);
        transfer::Batch {
            first: s.first,
            last: s.last,
            len: s.len,
        }
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

    proptest::proptest! {
        /// Against a model (a list of block numbers, newest batch first, each batch's blocks
        /// in its own order): strays joined from batches of a few blocks of several pages
        /// hold every block once, linked from `first` to `last` in the model's order, `len`
        /// of them; `take` hands them all out and empties the strays.
        #[test]
        fn strays_follow_their_model(
            ops in proptest::collection::vec(proptest::option::of(1u32..=STRAY_LEN), 1..100),
        ) {
            let mut blocks: Vec<Block> = (0..ops.len() * STRAY_LEN as usize)
                .map(|_| Block { next: ptr::null_mut() })
                .collect();
            let base = blocks.as_mut_ptr();
            let mut pages = [Page::empty(), Page::empty(), Page::empty()];
            let mut strays = Strays::EMPTY;
            let mut model: Vec<usize> = Vec::new();
            let mut used = 0;
            let walk = |b: &transfer::Batch| -> Result<Vec<usize>, proptest::test_runner::TestCaseError> {
                let mut seen = Vec::new();
                let mut p = b.first;
                while !p.is_null() {
                    // SAFETY: the test's blocks, linked within `blocks`.
                    seen.push(unsafe { p.offset_from(base) } as usize);
                    // SAFETY: as above.
                    let next = unsafe { (*p).next };
                    if p == b.last {
                        proptest::prop_assert!(next.is_null());
                    }
                    p = next;
                }
                Ok(seen)
            };
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Some(n) => {
                        let page: *mut Page = &raw mut pages[i % 3];
                        let mut batch = Batch::EMPTY;
                        let mut added = Vec::new();
                        for _ in 0..n {
                            // SAFETY: a block of the test's, given up to the batch once.
                            let added_now = unsafe { batch.add(page, base.add(used)) };
                            proptest::prop_assert!(added_now);
                            added.insert(0, used);
                            used += 1;
                        }
                        // SAFETY: the batch's blocks are the test's, given up to the strays.
                        unsafe { strays.add(&batch) };
                        added.append(&mut model);
                        model = added;
                    }
                    None => {
                        let b = strays.take();
                        proptest::prop_assert_eq!(b.len as usize, model.len());
                        proptest::prop_assert_eq!(walk(&b)?, core::mem::take(&mut model));
                        proptest::prop_assert_eq!(strays.len, 0);
                        proptest::prop_assert!(strays.first.is_null());
                    }
                }
                proptest::prop_assert_eq!(strays.len as usize, model.len());
            }
            let b = strays.take();
            proptest::prop_assert_eq!(walk(&b)?, model);
        }
    }
}
