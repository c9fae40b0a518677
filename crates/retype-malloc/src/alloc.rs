//! The fast paths: malloc pops a block from the free list of the page that serves its size
//! class (as mimalloc's `alloc.c`), free pushes it back when the calling thread owns the page
//! and no flag of the page asks for more; everything else is a call to a slow path that
//! cannot unwind. The malloc family in `lib.rs` inlines them. Here, above `global`, because a
//! thread's first malloc, and its first free of another thread's block, give it its heap.

use core::sync::atomic::Ordering;

use crate::page::{Block, Page, FLAG_FULL, FLAG_LARGE, FLAG_SPILLS};
use crate::segment::Segment;
use crate::{config, free, global, heap, large, os, page, sealed, secure, tls};

/// Allocates a block for `size` bytes, of fast-path slot `slot` (see [`size_class`]), from
/// the calling thread's heap: the fast path pops from the slot's direct page; anything else
/// (including a thread's first malloc, and every malloc in hardened and secure mode) takes
/// the slow path, which is given the size alone so that the fast path need not keep both in
/// registers.
#[inline(always)]
pub(crate) unsafe fn alloc(slot: usize, size: usize) -> *mut u8 {
    let heap = heap::current();
    // SAFETY: `slot` < CLASSES; the direct page is a live page of this heap or the empty page.
    unsafe {
        let page = heap::direct(heap, slot);
        if !(*page).free.is_null() {
            return page::pop(page);
        }
        alloc_slow(heap, size)
    }
}

/// [`alloc`]'s slow path: null, with errno ENOMEM, when out of memory. Secure mode's malloc
/// starts here, with its own fast path (see `secure`), and hardened mode's with canaries
/// (see `sealed`).
///
/// The functions the fast paths end in (this, [`alloc_large`], `free_checked`,
/// [`free_slow`] and `heap::retire`) are `extern "C"`: they cannot unwind (a panic in one
/// aborts), so a C entry point that inlines a fast path needs no landing pad around the
/// call, and the call is a jump: the fast path sets up no stack frame.
#[cold]
#[inline(never)]
unsafe extern "C" fn alloc_slow(heap: *mut heap::Heap, size: usize) -> *mut u8 {
    // SAFETY: as for `alloc`.
    unsafe {
        if config::secure() {
            return secure::alloc(heap, size);
        }
        if config::canary() {
            return sealed::alloc(heap, size);
        }
        global::alloc_general(heap, size)
    }
}

/// Allocates a large block (null, with errno ENOMEM, when out of memory); the settings are
/// loaded first, since a program's first malloc may be a large one (small ones load them on
/// a thread's first malloc).
#[cold]
#[inline(never)]
pub(crate) unsafe extern "C" fn alloc_large(size: usize, align: usize, zero: bool) -> *mut u8 {
    global::init();
    // SAFETY: large blocks take any size and power-of-two alignment.
    os::enomem_if_null(unsafe { large::alloc(size, align, zero) })
}

/// Frees `p`, a block (or aligned pointer into a block) of `page` in segment `seg`: the
/// owner's push onto the page's free list; anything else takes [`free_slow`].
#[inline(always)]
pub(crate) unsafe fn free_block(seg: *mut Segment, page: *mut Page, p: *mut u8) {
    // The thread's heap as stored (null before its first malloc: a page in use never has a
    // null owner, so such a free goes to the slow path, as every free by a non-owner does).
    let heap = tls::get().cast::<heap::Heap>();
    // SAFETY: `p` is a live block of `page`; owner-only fields are touched only by the owner.
    unsafe {
        if (*page).flags.load(Ordering::Relaxed) == 0 && (*page).heap == heap::id(heap) {
            let b = p.cast::<Block>();
            (*b).next = (*page).free;
            (*page).free = b;
            (*page).used -= 1;
            if (*page).used == 0 {
                heap::retire(heap, page);
            }
            return;
        }
        free_slow(seg, page, p)
    }
}

/// [`free_block`] when the page has a flag set or another owner: first the common cases kept
/// lean, the owner's free into a full page of few blocks (to its spill) and another thread's
/// free into a page of the default mode, added to the thread's batch (see `remote`), which is
/// sent first when it is of another page or full (where other threads' frees fall on pages at
/// random, as `pool`'s do, that is nearly every such free); the others out of line (see
/// `free::free_special`).
unsafe extern "C" fn free_slow(seg: *mut Segment, page: *mut Page, p: *mut u8) {
    // SAFETY: as for `free_block`; the empty heap's batch is never written.
    unsafe {
        let heap = heap::current();
        let flags = (*page).flags.load(Ordering::Relaxed);
        if (*page).heap == heap::id(heap) {
            if flags == FLAG_FULL | FLAG_SPILLS {
                return free::spill_block(heap, page, p.cast());
            }
        } else if heap::is_empty(heap) {
            if flags & FLAG_LARGE == 0 {
                return free_first(seg, page, p);
            }
        } else if flags & !(FLAG_FULL | FLAG_SPILLS) == 0 {
            return free::remote_free(heap, page, p.cast());
        }
        free::free_special(seg, page, p)
    }
}

/// The free of a small or medium block (another thread's) by a thread without a heap: the
/// thread is given its heap first, so that its frees of other threads' blocks go in batches
/// (a consumer that only frees would otherwise send each block alone, one compare-and-swap
/// each on a line its producer writes); out of memory, it frees without one.
#[cold]
#[inline(never)]
unsafe fn free_first(seg: *mut Segment, page: *mut Page, p: *mut u8) {
    global::heap_for_frees();
    // SAFETY: as for `free_block`.
    unsafe { free::free_special(seg, page, p) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::BATCH_MAX;
    use proptest::prelude::*;

    /// The page of the live block at address `p`.
    fn page_of(p: usize) -> usize {
        let p = p as *const u8;
        // SAFETY: the callers' blocks are live small or medium blocks of ours.
        unsafe { crate::segment::page_of(crate::segment::of(p), p) as usize }
    }

    /// Blocks on the remote lists of `pages`, together.
    fn sent(pages: &[usize]) -> usize {
        let mut n = 0;
        for &page in pages {
            // SAFETY: the lists' blocks are freed blocks of their pages, linked through their
            // first word; nobody collects them meanwhile (their owner does not allocate).
            unsafe {
                let mut b = (*(page as *mut Page)).thread_free.load(Ordering::Acquire);
                while !b.is_null() {
                    n += 1;
                    b = (*b).next;
                }
            }
        }
        n
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// A thread that never allocated frees blocks of another thread's pages in any order:
        /// it is given a heap at its first such free, and its batch then holds, against a model,
        /// the run of its latest frees into one page, at most `BATCH_MAX` of them; every other
        /// block it freed lies on its page's remote list. At its exit the batch goes too.
        #[test]
        fn a_thread_without_a_heap_batches_its_remote_frees(
            picks in proptest::collection::vec(0usize..600, 1..600),
        ) {
            // Three classes, several pages of each (4 KiB blocks: 16 a page).
            let sizes = [4096usize, 200, 48];
            let blocks: Vec<usize> = (0..600)
                // SAFETY: plain allocations of this thread.
                .map(|i| unsafe { crate::malloc(sizes[i % 3] + i % 7) } as usize)
                .collect();
            let mut seen = vec![false; blocks.len()];
            let order: Vec<usize> = picks
                .into_iter()
                .filter(|&i| !std::mem::replace(&mut seen[i], true))
                .map(|i| blocks[i])
                .collect();
            let pages: Vec<usize> = blocks
                .iter()
                .map(|&p| page_of(p))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let before = sent(&pages);
            let (freed, pages_in) = (order.clone(), pages.clone());
            std::thread::spawn(move || {
                assert!(heap::is_empty(heap::current()), "the thread has not allocated");
                let (mut run_page, mut run_len) = (0usize, 0u32);
                for (n, &p) in freed.iter().enumerate() {
                    let page = page_of(p);
                    // SAFETY: a live block of the other thread, freed once.
                    unsafe { crate::free(p as *mut u8) };
                    (run_page, run_len) = if page == run_page && run_len < BATCH_MAX {
                        (page, run_len + 1)
                    } else {
                        (page, 1)
                    };
                    let heap = heap::current();
                    assert!(!heap::is_empty(heap), "given a heap at its first free");
                    // SAFETY: the thread's own heap.
                    let batch = unsafe { &(*heap).remote };
                    assert_eq!((batch.page as usize, batch.len), (run_page, run_len));
                    assert_eq!(sent(&pages_in) - before, n + 1 - run_len as usize, "the others were sent");
                }
            })
            .join()
            .unwrap();
            prop_assert_eq!(sent(&pages) - before, order.len(), "the batch went at the thread's exit");
            for &p in blocks.iter().filter(|p| !order.contains(p)) {
                // SAFETY: the blocks not freed yet, each once.
                unsafe { crate::free(p as *mut u8) };
            }
        }
    }
}
