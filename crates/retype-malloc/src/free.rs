//! The free path's cases beyond the fast path (the owner's push onto the page's free list, in
//! `alloc`): a free into a full page of few blocks goes to its class's spill (see `spill`).
//! A free by another thread goes to that thread's batch (see `remote`): a full one to the
//! transfer cache (see `transfer`) while it has room, any other sent with a
//! compare-and-swap onto the page's `thread_free` list; if the page was in the full
//! list, the sender also puts the page on the heap's `notified` stack so the owner moves it
//! back. A page whose last block its owner frees retires (`heap::retire`).

use core::sync::atomic::Ordering;

use crate::heap::{self, Heap};
use crate::page::{self, Block, Page};
use crate::remote::BATCH_MAX;
use crate::segment::{self, Segment};
use crate::{canary, config, freed, hardened, large, os, quarantine, spill, transfer};

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
            return heap::send(page, block, block);
        }
        if !(*heap).remote.add(page, block) {
            if (*heap).remote.len == BATCH_MAX {
                return send_full(heap, page, block);
            }
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
            heap::send(b.page, b.first, b.last);
        }
    }
}

/// [`remote_free`] when the batch is full: to the transfer cache (in the modes with a fast
/// path, which hands its blocks out), else sent; `block` of `page` starts the next. Out of
/// line, so that frees that fall on pages at random (`pool`), whose batches are rarely full,
/// keep their short path.
#[inline(never)]
unsafe fn send_full(heap: *mut Heap, page: *mut Page, block: *mut Block) {
    // SAFETY: as for `remote_free`; the batch's blocks are freed blocks of its page.
    unsafe {
        let b = (*heap).remote.take();
        if config::no_fast_path() {
            heap::send(b.page, b.first, b.last);
        } else {
            let batch = transfer::Batch {
                first: b.first,
                last: b.last,
                len: b.len,
            };
            transfer::push(
                (*b.page).class as usize,
                batch,
                os::now_ms(),
                heap::send_home,
            );
        }
        let added = (*heap).remote.add(page, block);
        debug_assert!(added);
    }
}

/// Gives the blocks `heap` took from the transfer cache and holds (the calling thread's heap,
/// which exits or trims, or one in the pool under its lock) back to their pages.
pub(crate) unsafe fn give_back_transferred(heap: *mut Heap) {
    // SAFETY: the blocks are freed blocks counted as used by their pages; the heap is the
    // caller's.
    unsafe {
        let mut b = heap::take_transferred_blocks(heap);
        while !b.is_null() {
            let next = (*b).next;
            release(
                heap,
                segment::page_of(segment::of(b.cast()), b.cast()),
                b.cast(),
            );
            b = next;
        }
        send_batch(heap);
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
    use std::collections::HashSet;
    use std::sync::mpsc;
    use std::thread;

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

    /// A thread that allocates 256 blocks of `size` bytes (a class no other test of the crate
    /// uses, of pages of more than a batch) and waits: its blocks, which the calling thread
    /// (not their pages' owner) has freed and sent in full batches, the sender that ends the
    /// wait, and the thread's handle.
    fn frees_into_a_waiting_heap(
        size: usize,
    ) -> (Vec<usize>, mpsc::Sender<()>, thread::JoinHandle<()>) {
        assert!(SLICE_SIZE / size > crate::remote::BATCH_MAX as usize);
        let (blocks_tx, blocks_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let owner = thread::spawn(move || {
            let blocks: Vec<usize> = (0..256)
                // SAFETY: blocks of this thread's heap, freed once by the caller's thread.
                .map(|_| unsafe { crate::malloc(size) } as usize)
                .collect();
            blocks_tx.send(blocks).unwrap();
            done_rx.recv().unwrap();
        });
        let blocks = blocks_rx.recv().unwrap();
        // SAFETY: live blocks of the owner's heap, each freed once; the heap is this thread's.
        unsafe {
            blocks.iter().for_each(|&p| crate::free(p as *mut u8));
            send_batch(heap::current());
        }
        (blocks, done_tx, owner)
    }

    /// Full batches of frees into the pages of a heap whose thread does not run (it waits)
    /// serve another heap's mallocs of the class before that heap claims a page (see
    /// `transfer`): without the cache no other heap ever hands out a block of its pages.
    #[test]
    fn full_batches_of_remote_frees_serve_other_heaps() {
        // The tests that trim, which empties the transfer cache, wait meanwhile.
        let _serial = crate::cache::tests::serial();
        let size = 720;
        let (blocks, done_tx, owner) = frees_into_a_waiting_heap(size);
        let freed: HashSet<usize> = blocks.into_iter().collect();
        let found = thread::spawn(move || {
            let mine: Vec<usize> = (0..4096)
                // SAFETY: blocks of this thread's heap, freed once below.
                .map(|_| unsafe { crate::malloc(size) } as usize)
                .collect();
            let found = mine.iter().filter(|p| freed.contains(p)).count();
            for p in mine {
                // SAFETY: a live block of this thread's heap, freed once.
                unsafe { crate::free(p as *mut u8) };
            }
            found
        })
        .join()
        .unwrap();
        done_tx.send(()).unwrap();
        owner.join().unwrap();
        assert!(
            found >= crate::remote::BATCH_MAX as usize,
            "{found} of the freed blocks handed out again"
        );
    }

    /// The heap's page of transferred blocks serves one class at a time: when it takes a batch
    /// of another class, the fast path of the class it served before, which took its last
    /// block, no longer pops from it. (Before, that class's next malloc took a block of the
    /// new class: 576 bytes asked for, 640 given, or the other way round, an overflow.)
    #[test]
    fn the_page_of_transferred_blocks_serves_one_class_at_a_time() {
        // The tests that trim, which empties the transfer cache, wait meanwhile.
        let _serial = crate::cache::tests::serial();
        let (small, large) = (576, 640);
        let (small_class, large_class) = (size_class::class_of(small), size_class::class_of(large));
        assert_ne!(small_class, large_class);
        let (_, small_done, small_owner) = frees_into_a_waiting_heap(small);
        let (_, large_done, large_owner) = frees_into_a_waiting_heap(large);
        thread::spawn(move || {
            let class_of = |p: *mut u8| {
                // SAFETY: a live block of a page in use.
                unsafe { (*segment::page_of(segment::of(p), p)).class as usize }
            };
            // SAFETY: blocks this thread allocates, each freed once below; the heap is its own.
            unsafe {
                let mut blocks = vec![crate::malloc(large)];
                let heap = heap::current();
                let tp = &raw mut (*heap).transferred;
                assert_eq!((*heap).transferred_class, large_class, "a batch taken");
                // The fast path takes the batch's blocks, the last one included.
                while !(*tp).free.is_null() {
                    blocks.push(crate::malloc(large));
                }
                blocks.push(crate::malloc(small));
                assert_eq!((*heap).transferred_class, small_class, "the next batch");
                for _ in 0..4 {
                    let p = crate::malloc(large);
                    assert_eq!(class_of(p), large_class, "a block of the class asked for");
                    blocks.push(p);
                }
                assert_eq!(check(heap), Ok(()));
                blocks.iter().for_each(|&p| crate::free(p));
            }
        })
        .join()
        .unwrap();
        small_done.send(()).unwrap();
        large_done.send(()).unwrap();
        small_owner.join().unwrap();
        large_owner.join().unwrap();
    }

    /// Full batches of frees into the pages of a heap whose thread waits go to the transfer
    /// cache and, no heap taking them, go home to their pages' remote lists once they waited
    /// a purge delay, at the next page claim (see `transfer::expire_if_due`), so that their
    /// pages can empty: then every freed block lies on its page's remote list.
    #[test]
    fn batches_waiting_a_purge_delay_go_home() {
        // The tests that trim, which empties the transfer cache, wait meanwhile.
        let _serial = crate::cache::tests::serial();
        let size = 960;
        let class = size_class::class_of(size);
        let (blocks, done_tx, owner) = frees_into_a_waiting_heap(size);
        let mut pages: Vec<usize> = blocks
            .iter()
            // SAFETY: blocks of small pages, which stay alive while their blocks are in use or
            // on their remote lists.
            .map(|&p| unsafe { segment::page_of(segment::of(p as *mut u8), p as *mut u8) } as usize)
            .collect();
        pages.dedup();
        // Blocks on the pages' remote lists; the owner, waiting, collects none meanwhile.
        let sent = || -> usize {
            let mut n = 0;
            for &page in &pages {
                // SAFETY: the lists' blocks are freed blocks of their pages, linked through
                // their first word.
                unsafe {
                    let mut b = (*(page as *mut Page)).thread_free.load(Ordering::Acquire);
                    while !b.is_null() {
                        n += 1;
                        b = (*b).next;
                    }
                }
            }
            n
        };
        let waiting = transfer::CACHE.batches(class);
        assert!(waiting >= 2, "{waiting} batches in the cache");
        assert_eq!(sent(), blocks.len() - waiting * BATCH_MAX as usize);
        let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
        thread::sleep(std::time::Duration::from_millis(delay + 20));
        transfer::expire_if_due(heap::send_home);
        assert_eq!(
            transfer::CACHE.batches(class),
            0,
            "batches left in the cache"
        );
        assert_eq!(sent(), blocks.len(), "blocks on their pages' remote lists");
        done_tx.send(()).unwrap();
        owner.join().unwrap();
    }
}
