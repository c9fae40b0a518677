//! retype-malloc: a fast, thread-scalable, huge-page-aware general-purpose allocator.
//!
//! Design, one concern per module (in the spirit of mimalloc), in layers: each module imports
//! only modules listed before it.
//! - `consts` (segment geometry, alignment), `lock` (a spin lock), `tls` (the thread's heap
//!   pointer, initial-exec on x86-64): they import nothing from the crate;
//! - on `consts` only: [`size_class`] (16-byte classes to 256 bytes, then eight per doubling to
//!   128 KiB), `stats` (counters and the report), `config` (settings);
//! - `os`: mappings, huge-page advice, the clock, diagnostics;
//! - `secret`: hardened and secure mode's per-process secret, which keys their patterns and
//!   free-list links and orders fresh blocks at random;
//! - `canary`, `zero`: hardened mode's keyed patterns after blocks, which catch overflows;
//!   the inaccessible zero-size block;
//! - `freed`: hardened mode's fill of free blocks (zero, or the quarantine's junk), checked
//!   when a block is handed out again, and blocks zeroed when handed out;
//! - `quarantine`: hardened mode's freed blocks, held back filled, checked as they leave (and
//!   at exit);
//! - `list`: the intrusive lists (page and segment queues, the lock-free stacks of remote
//!   frees) with their invariants and consistency checks;
//! - `registry`, `cache`: which mappings are ours (hardened mode); retired mappings, reused
//!   (cut, or gathered by moving their pages) and returned to the OS after a delay, under a
//!   cap;
//! - `page`: per-page free lists (in hardened and secure mode a link is encoded with the
//!   page's key, and checked before it is followed), a lock-free list for frees from other
//!   threads;
//! - `spill`: per class, blocks freed into full pages of few blocks, taken first by malloc;
//!   `remote`: a thread's batch of frees into one page of another heap, sent together;
//!   `transfer`: full batches shared between heaps, taken by any heap before it claims a page;
//! - `segment`: 2 MiB-aligned segments (one transparent huge page each) cut into 64 KiB
//!   slices, holding pages of 1-8 slices; a pointer's page is found by masking its address;
//!   a heap takes pages from its fullest segment, packing small objects into few huge pages;
//! - `large`: objects over 128 KiB are mapped on their own (between guard pages in hardened
//!   mode); those of 2 MiB and more on a 2 MiB boundary, advised for huge pages; realloc
//!   resizes them in their mapping or moves their pages;
//! - `hardened`: optional detection of double and invalid frees (the base of hardened mode,
//!   and with guard pages all of secure mode, `RETYPE_MALLOC_SECURE`);
//! - `kept`: the ring of emptied pages, carved, that a heap keeps for reuse by their class
//!   (up to 4 MiB);
//! - `heap`: one heap per thread, no lock on malloc or free: its page queues and full list,
//!   malloc's slow path, emptied pages retiring (kept, or back to their segment), spills
//!   given back after a while, the count of live bytes;
//! - `consistency`: the full check of a heap (queues, segments, kept pages, spills and byte
//!   counts held against each other), for tests;
//! - `free`: the free path beyond the owner's push: frees into spills, frees by other threads
//!   onto the page's lock-free list (in batches, see `remote`), the flags' special cases;
//! - `secure`: secure mode's own fast paths of malloc and free (links decoded and checked,
//!   frees validated in one pass), chosen at start-up; `sealed`: hardened mode's, for
//!   blocks with canaries;
//! - `pool`: heaps of exited threads (and parked ones of waiting threads), adopted whole by
//!   new threads, their empty pages reclaimed when they waited the purge delay; the list of
//!   every heap made;
//! - `census`: the statistics as figures ([`Stats`], from the counters and the heaps, each
//!   heap's bytes) and their JSON form;
//! - `mallinfo`: glibc's forms of them: `mallinfo2`'s fields ([`Mallinfo`]), `malloc_info`'s
//!   XML;
//! - `global`: start-up, each thread's first malloc (or free of another thread's block),
//!   exit and park, fork handlers;
//! - `alloc`: the fast paths of malloc and free, and the slow paths' entries;
//! - this file: the malloc family, which inlines both fast paths.
//!
//! Debug builds check the lists and segments as they change (aborting with a message on an
//! inconsistency); [`check_consistency`] runs the full check of the calling thread's heap.
//!
//! # Settings
//! Environment variables read once at start-up (huge pages, the cache and purge delay, a
//! reserve, hardened mode and each of its measures, statistics): each is documented once, in
//! the repository's `docs/environment.md`. Without a reserve a program's system calls to
//! allocate are counted by [`system_calls`]; with `RETYPE_MALLOC_STATS` set, [`stats()`] also
//! knows the live bytes of small blocks.
//!
//! Each measure may be switched on alone (it brings the validation of frees with it, which it
//! relies on) or off in hardened mode. A failed check writes one line to standard error,
//! naming the error, the pointer and, when known, the block size of its size class, then
//! calls `abort()`.
//! In every mode the heap's memory is readable and writable, never executable.
//!
//! The same allocator serves Rust programs through [`RetypeMalloc`] and C programs through
//! the `retype-malloc-preload` cdylib (`LD_PRELOAD=libretype_malloc_preload.so`).

#![warn(missing_docs)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

// The layers, bottom up, as listed above: each group imports only from the groups above
// it (a group's modules are in alphabetical order, as rustfmt keeps them).
mod consts;
mod lock;
mod tls;

mod config;
pub mod size_class;
mod stats;

mod os;

mod secret;

mod canary;
mod zero;

mod freed;

mod quarantine;

mod list;
mod registry;

mod cache;
mod page;

mod remote;
mod spill;
mod transfer;

mod resident;
mod segment;

mod large;

mod hardened;

mod kept;

mod heap;

mod consistency;

mod free;

mod sealed;
mod secure;

mod pool;

mod census;

mod mallinfo;

mod alloc;
mod global;

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;

use alloc::{alloc, alloc_large};
pub use census::{HeapBytes, HeapState, HeapStats, Stats};
pub use consistency::check_consistency;
pub use consts::{HEADER_SIZE, MIN_ALIGN, SEGMENT_SIZE, SLICE_SIZE};
pub use global::{init, park};
pub use mallinfo::Mallinfo;
pub use os::enomem_if_null;
use size_class::{MEDIUM_MAX, SMALL_FAST_MAX};

/// Allocates `size` bytes aligned to 16; null, with errno ENOMEM, when out of memory.
///
/// # Safety
/// Always safe to call; unsafe because it hands out raw memory.
#[inline]
pub unsafe fn malloc(size: usize) -> *mut u8 {
    // SAFETY: the classes passed are in range.
    unsafe {
        if size <= SMALL_FAST_MAX {
            return alloc((size + 15) >> 4, size);
        }
        if size <= MEDIUM_MAX {
            return alloc(size_class::class_of(size), size);
        }
        alloc_large(size, MIN_ALIGN, false)
    }
}

/// Allocates `size` zeroed bytes; null when out of memory.
///
/// # Safety
/// As [`malloc`].
pub unsafe fn malloc_zeroed(size: usize) -> *mut u8 {
    // SAFETY: a fresh block of at least `size` bytes is written only within its bounds.
    unsafe {
        if size > MEDIUM_MAX {
            return alloc_large(size, MIN_ALIGN, true);
        }
        let p = malloc(size);
        if !p.is_null() {
            p.write_bytes(0, size);
        }
        p
    }
}

/// Allocates `size` bytes aligned to `align` (a power of two); null when out of memory.
///
/// # Safety
/// `align` must be a power of two.
pub unsafe fn malloc_aligned(size: usize, align: usize) -> *mut u8 {
    if align <= MIN_ALIGN {
        // SAFETY: plain allocation.
        return unsafe { malloc(size) };
    }
    // Small alignments come from a block big enough to hold an aligned run of `size` bytes,
    // at least one: an empty run at the very end of the block would be the next block.
    if align <= consts::SLICE_SIZE / 4 && size <= MEDIUM_MAX - align {
        // SAFETY: the block was just allocated by this thread; its page is this thread's, or
        // another heap's whose block came from the transfer cache (`set_flag` is atomic).
        unsafe {
            let raw = malloc(size.max(1) + align - MIN_ALIGN);
            if raw.is_null() {
                return raw;
            }
            let p = ((raw as usize + align - 1) & !(align - 1)) as *mut u8;
            if p != raw {
                let page = segment::page_of(segment::of(raw), raw);
                page::set_flag(page, page::FLAG_ALIGNED, true);
            }
            return p;
        }
    }
    // SAFETY: large blocks take any power-of-two alignment.
    unsafe { alloc_large(size, align, false) }
}

/// Frees a pointer returned by this allocator; null is ignored.
///
/// # Safety
/// `p` must be null or a live pointer from this allocator.
#[inline]
pub unsafe fn free(p: *mut u8) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` is live; its header is at the masked address (or behind its back pointer).
    unsafe {
        if config::hardened() {
            return free_checked(p);
        }
        let seg = header_of(p);
        alloc::free_block(seg, segment::page_of(seg, p), p)
    }
}

/// Hardened and secure mode's free: `p` is validated before any header is read (the common
/// case by the mode's own fast path, see `secure::free` and `sealed::free`). Out of line, so that the
/// default mode's free keeps no register for it.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_checked(p: *mut u8) {
    // SAFETY: `secure::free` frees `p` only once it found it a block in use of ours, and
    // passes anything else to `free_validated`.
    unsafe {
        if config::secure() {
            return secure::free(p);
        }
        if zero::contains(p) {
            return;
        }
        if config::canary() {
            return sealed::free(p);
        }
        free_validated(p)
    }
}

/// Frees `p` once hardened mode's validation found it a block of ours; else stops the
/// program with what is wrong with it.
#[inline(never)]
unsafe extern "C" fn free_validated(p: *mut u8) {
    // SAFETY: `validate` aborts unless `p` is a block of a segment or large mapping of ours.
    unsafe {
        let seg = hardened::validate(p);
        alloc::free_block(seg, segment::page_of(seg, p), p)
    }
}

/// The header of the segment or large mapping holding the live block `p`: at the address
/// masked to its segment, or behind the back pointer of a block at a segment boundary.
#[inline(always)]
unsafe fn header_of(p: *mut u8) -> *mut segment::Segment {
    if p as usize & consts::SEGMENT_MASK == 0 {
        // SAFETY: only large blocks lie at a segment boundary (a segment starts with its header).
        unsafe { large::header_of_aligned(p) }
    } else {
        segment::of(p)
    }
}

/// Usable bytes at `p`: at least the size asked for, and exactly what may be written (with
/// canaries, exactly the size asked for, at least 1; their check runs here too).
///
/// # Safety
/// `p` must be a live pointer from this allocator.
pub unsafe fn usable_size(p: *mut u8) -> usize {
    // SAFETY: as for `free`.
    unsafe {
        if config::hardened() {
            if zero::contains(p) {
                return 0;
            }
            hardened::check_live(p);
        }
        let seg = header_of(p);
        let page = segment::page_of(seg, p);
        let flags = (*page).flags.load(core::sync::atomic::Ordering::Relaxed);
        if flags & page::FLAG_LARGE != 0 {
            return large::usable(seg, p);
        }
        let start = if flags & page::FLAG_ALIGNED != 0 {
            page::block_start(page, p)
        } else {
            p
        };
        let block_size = (*page).block_size as usize;
        let end = if config::canary() {
            canary::size(start, block_size)
        } else {
            block_size
        };
        end - (p as usize - start as usize)
    }
}

/// Resizes the block at `p` (non-null) to `size` bytes (≥ 1), in place when it fits and would
/// not waste more than half the block (never with `RETYPE_MALLOC_REALLOC_MOVES`); a large block staying large is resized in its
/// mapping or has its pages moved (see `large::realloc`); otherwise the block is copied.
/// Null (and `p` untouched) when out of memory.
///
/// # Safety
/// `p` must be a live pointer from this allocator.
pub unsafe fn realloc(p: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: `p` is live; the copy stays within both blocks.
    unsafe {
        let usable = usable_size(p);
        if size <= usable
            && size >= usable / 2
            && !large::misplaced(p, size)
            && !config::realloc_moves()
        {
            return p;
        }
        // Hardened mode copies: its guard pages, canaries and registry follow blocks as made.
        if size > MEDIUM_MAX && !config::hardened() {
            let seg = header_of(p);
            let flags = (*segment::page_of(seg, p))
                .flags
                .load(core::sync::atomic::Ordering::Relaxed);
            if flags & page::FLAG_LARGE != 0 {
                if let Some(q) = large::realloc(seg, p, size) {
                    return q;
                }
            }
        }
        let q = malloc(size);
        if !q.is_null() {
            ptr::copy_nonoverlapping(p, q, usable.min(size));
            free(p);
        }
        q
    }
}

/// Gives retired memory back to the OS now, instead of after the purge delay; and back to
/// their segments the empty pages of the calling thread's heap (kept, or emptied by other
/// threads' frees), and those of the heaps of exited and parked threads (see
/// `pool::reclaim`), after sending the blocks waiting in the transfer cache to their pages'
/// owners (see `transfer`).
pub fn trim() {
    let heap = heap::current();
    let own = !heap::is_empty(heap);
    if own {
        // SAFETY: the heap is the calling thread's own.
        unsafe { free::give_back_transferred(heap) };
    }
    transfer::CACHE.drain(heap::send_home);
    if own {
        // SAFETY: as above.
        unsafe { heap::release_empty_pages(heap) };
    }
    pool::reclaim();
    cache::purge(true);
}

/// How many calls that map, unmap, move, advise or protect memory (`mmap`, `munmap`,
/// `mremap`, `madvise`, and `mprotect` for hardened mode's guard pages and quarantine) the
/// allocator has made so far, process-wide: a real-time program can check that this stays
/// still after its warm-up.
pub fn system_calls() -> usize {
    stats::system_calls()
}

/// Writes the statistics report (the text form of the report at exit with
/// `RETYPE_MALLOC_STATS`) to descriptor `fd`.
pub fn print_stats(fd: i32) {
    stats::report(&mut |line| os::write_all(fd, line), config::counted());
}

/// The statistics now, as figures: the bytes mapped and where, the large blocks, each thread
/// heap's bytes (the calling thread's, and those in the pool, walked; see [`HeapState`]),
/// and the live bytes of small and medium blocks when `RETYPE_MALLOC_STATS` is set (see
/// [`Stats::small_live`]). In JSON: [`Stats::write_json`]; as glibc's `mallinfo2` and
/// `malloc_info`: [`Stats::mallinfo`], [`Stats::write_xml`]. It allocates (the list of heaps).
pub fn stats() -> Stats {
    census::take()
}

/// retype-malloc as a Rust global allocator:
/// `#[global_allocator] static A: retype_malloc::RetypeMalloc = retype_malloc::RetypeMalloc;`
pub struct RetypeMalloc;

// SAFETY: every method forwards to the allocator with a layout-respecting size and alignment.
unsafe impl GlobalAlloc for RetypeMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: Layout guarantees a power-of-two alignment.
        unsafe { malloc_aligned(layout.size(), layout.align()) }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _layout: Layout) {
        // SAFETY: `p` came from `alloc` of this allocator.
        unsafe { free(p) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`; aligned blocks are cleared here.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                return malloc_zeroed(layout.size());
            }
            let p = malloc_aligned(layout.size(), layout.align());
            if !p.is_null() {
                p.write_bytes(0, layout.size());
            }
            p
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `p` is live; over-aligned blocks move through an aligned allocation.
        unsafe {
            if layout.align() <= MIN_ALIGN {
                return realloc(p, new_size);
            }
            let q = malloc_aligned(new_size, layout.align());
            if !q.is_null() {
                ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                free(p);
            }
            q
        }
    }
}
