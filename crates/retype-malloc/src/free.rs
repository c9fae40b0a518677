//! The free path's cases beyond the fast path (the owner's push onto the page's free list, in
//! `alloc`): a free into a full page of few blocks goes to its class's spill (see `spill`).
//! A free by another thread goes to that thread's batch (see `remote`), sent
//! with a compare-and-swap onto the page's `thread_free` list; if the page was in the full
//! list, the sender also puts the page on the heap's `notified` stack so the owner moves it
//! back. A page whose last block its owner frees retires (`heap::retire`).

use core::sync::atomic::Ordering;

use crate::heap::{self, Heap};
use crate::page::{self, Block, Page, FULL, NOTIFIED};
use crate::segment::{self, Segment};
use crate::{canary, config, freed, hardened, large, list, quarantine, spill};

/// A free in the cases the flags of `page` say: a large block, an aligned pointer, counted
/// or hardened mode, a full page; or a free by a thread that does not own the page.
#[cold]
#[inline(never)]
pub(crate) unsafe fn free_special(seg: *mut Segment, page: *mut Page, p: *mut u8) {
    // SAFETY: `p` is a live block of `page`; the flags say which special case applies.
    unsafe {
        let flags = (*page).flags.load(Ordering::Relaxed);
        let heap = heap::current();
        if flags & page::FLAG_LARGE != 0 {
            if config::hardened() {
                hardened::forget_large(seg);
            }
            return large::free(seg);
        }
        let block = if flags & page::FLAG_ALIGNED != 0 {
            page::block_start(page, p)
        } else {
            p
        };
        if flags & page::FLAG_COUNTED != 0 {
            heap::count(heap, -((*page).block_size as isize));
        }
        if flags & page::FLAG_CHECKED != 0 {
            if config::canary() {
                check_canaries(page, block);
            } else if config::secure() {
                hardened::check_not_free(page, block, (*page).heap == heap::id(heap));
            } else {
                hardened::forget_block(seg, page, block);
            }
            return quarantine_or_release(heap, page, block);
        }
        release(heap, page, block)
    }
}

/// Puts `block` of `page`, freed and checked (hardened mode), back: filled (see `freed`),
/// into the quarantine of `heap` (the calling thread's), letting out and putting back the
/// blocks due to leave; or back at once.
#[inline]
pub(crate) unsafe fn quarantine_or_release(heap: *mut Heap, page: *mut Page, block: *mut u8) {
    // SAFETY: `block` is a freed block of `page`, still counted as used; the quarantine is
    // the calling thread's and holds blocks of ours.
    unsafe {
        let bs = (*page).block_size as usize;
        if freed::filled() {
            freed::fill(block, bs);
        }
        if config::quarantine()
            && !heap::is_empty(heap)
            && quarantine::admit(&mut (*heap).quarantine, block, bs)
        {
            while let Some(b) = quarantine::leaving((*heap).quarantine) {
                let page = segment::page_of(segment::of(b), b);
                let own = (*page).heap == heap::id(heap);
                let bs = (*page).block_size as usize;
                quarantine::settle(b, bs, own);
                release(heap, page, b);
                if own && freed::cold(bs) {
                    heap::to_front(heap, page);
                }
            }
            return;
        }
        release(heap, page, block)
    }
}

/// Lets the quarantine of `heap` (the calling thread's, which exits) go: its blocks, checked,
/// go back to their pages (see `quarantine::emptying`); then the free blocks of its pages,
/// where blocks that left it with their first word checked lie, are checked whole (see
/// `freed`).
pub(crate) unsafe fn empty_quarantine(heap: *mut Heap) {
    // SAFETY: the calling thread owns `heap` and its quarantine; their blocks are ours.
    unsafe {
        if (*heap).quarantine.is_null() {
            return;
        }
        while let Some(b) = quarantine::emptying((*heap).quarantine) {
            let seg = segment::of(b);
            release(heap, segment::page_of(seg, b), b);
        }
        if freed::deferred() {
            heap::each_page(heap, |page| page::check_freed(page));
        }
    }
}

/// Puts the freed `block` of `page` back: on its free list, or on its remote list when
/// `heap`, the calling thread's, does not own it.
#[inline(always)]
pub(crate) unsafe fn release(heap: *mut Heap, page: *mut Page, block: *mut u8) {
    // SAFETY: `block` is a freed block of `page`, still counted as used.
    unsafe {
        if (*page).heap != heap::id(heap) {
            return remote_free(heap, page, block.cast());
        }
        if spill::takes(page) {
            return spill_block(heap, page, block.cast());
        }
        heap::give_to_page(heap, page, block.cast());
    }
}

/// Adds `b`, a freed block of the full `page` of `heap`, to its class's spill.
pub(crate) unsafe fn spill_block(heap: *mut Heap, page: *mut Page, b: *mut Block) {
    // SAFETY: `b` is a freed block of the heap's own page, still counted as used; a page
    // that spills is of a class that does.
    unsafe {
        let class = (*page).class as usize;
        let sp = &mut (*heap).spills[class - spill::FIRST_CLASS];
        (*heap).spilling = true;
        if sp.push(b, (*heap).clock) {
            heap::set_direct(heap, class);
        }
        heap::tick(heap);
    }
}

/// Checks the canary of `block`, freed, and tags it free (aborting if it was free already);
/// then the tags of its neighbours, live or free, which an underflow of `block`, or an
/// overflow past its own canary, overwrites first.
unsafe fn check_canaries(page: *mut Page, block: *mut u8) {
    // SAFETY: `block` is a sealed block of `page`; every carved block has a tag.
    unsafe {
        canary::unseal(block, (*page).block_size as usize);
        hardened::check_neighbours(page, block);
    }
}

/// A free by a thread that does not own the page, whose heap is `heap`: into its batch (see
/// `remote`), the batch sent first if it is of another page or full; sent at once by a
/// thread without a heap (one that could not be given one).
#[inline]
pub(crate) unsafe fn remote_free(heap: *mut Heap, page: *mut Page, block: *mut Block) {
    // SAFETY: the calling thread owns `heap` (unless it is the empty heap, never written);
    // `block` stays counted as used by `page` until it is sent.
    unsafe {
        if heap::is_empty(heap) {
            return send(page, block, block);
        }
        if !(*heap).remote.add(page, block) {
            send_batch(heap);
            let added = (*heap).remote.add(page, block);
            debug_assert!(added);
        }
    }
}

/// Sends the batch of `heap` (the calling thread's) to its page, if it holds blocks: the
/// heap's slow path, `malloc_trim`, and a thread that parks or exits call it.
pub(crate) unsafe fn send_batch(heap: *mut Heap) {
    // SAFETY: the calling thread owns `heap`; the batch's blocks are freed blocks of its page.
    unsafe {
        if !(*heap).remote.is_empty() {
            let b = (*heap).remote.take();
            send(b.page, b.first, b.last);
        }
    }
}

/// Puts the freed blocks `first` to `last`, linked, on the remote list of `page`, which a
/// thread that does not own it freed them into; if the page is full, first on its heap's
/// `notified` stack.
unsafe fn send(page: *mut Page, first: *mut Block, last: *mut Block) {
    // SAFETY: until the blocks are pushed their owner counts them used, so the page and heap
    // stay alive.
    unsafe {
        if (*page).full_state.load(Ordering::SeqCst) == FULL
            && (*page)
                .full_state
                .compare_exchange(FULL, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            let heap = (*page).heap.cast::<Heap>();
            list::push(&(*heap).notified, page, &raw mut (*page).notified_next);
        }
        page::push_remote(page, first, last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consistency::check;
    use crate::consts::SLICE_SIZE;
    use crate::kept::KEEP_BYTES;
    use crate::page::FLAG_FULL;
    use crate::size_class;

    /// A block freed into a full page of few blocks is the next malloc's of its class, taken
    /// from the class's spill (no page moves between lists, and the block is likely still in
    /// the cache); blocks freed in bulk stay spilled until no malloc took from the spill for
    /// the purge delay, then go back to their pages, which retire.
    #[test]
    fn frees_into_full_pages_of_few_blocks_serve_the_next_mallocs() {
        let size = 8 * 1024;
        let class = size_class::class_of(size);
        let per_page = size_class::span_of(class, 0) * SLICE_SIZE / size;
        assert!(per_page <= spill::PAGE_BLOCKS as usize);
        // SAFETY: blocks of this thread's heap, each freed once; the heap is its own.
        unsafe {
            let mut blocks: Vec<*mut u8> = (0..4 * per_page).map(|_| crate::malloc(size)).collect();
            let heap = heap::current();
            let pages = move || (*heap).pages[class] as usize;
            let is_full = |p: *mut u8| {
                (*segment::page_of(segment::of(p), p))
                    .flags
                    .load(Ordering::Relaxed)
                    & FLAG_FULL
                    != 0
            };
            // The thread's heap may be one adopted from an earlier test's thread: allocate
            // until the fast path has a page with a free block and a block lies in a full one.
            while (*heap::direct(heap, class)).free.is_null() || !blocks.iter().any(|&p| is_full(p))
            {
                blocks.push(crate::malloc(size));
            }
            let i = blocks.iter().position(|&p| is_full(p)).unwrap();
            let p = blocks.swap_remove(i);
            crate::free(p);
            // A fresh reference each time: mallocs and frees change the spill meanwhile.
            let sp = move || heap::spill_of(heap, class).unwrap();
            assert_eq!(sp().len(), 1);
            assert!(
                heap::direct(heap, class) == sp().page(),
                "the fast path takes from the spill"
            );
            (*heap).spilling = false;
            assert!(check(heap).unwrap_err().contains("does not look"));
            (*heap).spilling = true;
            let q = crate::malloc(size);
            assert_eq!(
                q, p,
                "the block freed into a full page serves the next malloc"
            );
            assert!(sp().is_empty());
            assert_eq!(check(heap), Ok(()));

            // A bulk free: blocks of full pages stay in the spill, their pages with the heap.
            blocks.push(q);
            let during = pages();
            blocks.iter().for_each(|&p| crate::free(p));
            assert!(!sp().is_empty());
            assert_eq!(check(heap), Ok(()));
            // A purge delay later, the heap looks at its clock when other classes look for
            // pages: the spill goes back to its pages, which retire (but what the ring keeps).
            let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(delay + 10));
            let mut others = Vec::new();
            while !sp().is_empty() && others.len() < 1000 {
                others.push(crate::malloc(96 * 1024));
            }
            assert!(sp().is_empty(), "a stale spill was given back");
            let ring = KEEP_BYTES / (size_class::span_of(class, 0) * SLICE_SIZE);
            assert!(
                pages() + 4 <= during || pages() <= ring,
                "{during} -> {}",
                pages()
            );
            assert_eq!(check(heap), Ok(()));
            others.iter().for_each(|&p| crate::free(p));
        }
    }
}
