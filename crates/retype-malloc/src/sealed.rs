//! Hardened mode's fast paths, for blocks with canaries (`RETYPE_MALLOC_HARDENED=1`, or
//! `RETYPE_MALLOC_CANARY`): the common case of malloc and free in one pass each, as secure
//! mode's (see `secure`), instead of the slow paths' chain of calls, each reading the heap,
//! the page and its flags again. They check what the general way checks, in the same order,
//! and end in the same functions, which name any error the same way; anything else (a large
//! block, an aligned or counted page, a thread's first malloc, a pointer that fails a test
//! here) goes the general way. Out of line, and `extern "C"` (they cannot unwind), so that
//! the slow path's entry and `free_checked`, where secure mode's fast paths are inlined,
//! reach them by a jump and still set up no stack frame.

use core::sync::atomic::Ordering;

use crate::canary::{self, TAIL};
use crate::free::quarantine_or_release;
use crate::heap::{self, Heap};
use crate::page::{self, FLAG_CHECKED, FLAG_FULL};
use crate::size_class::{self, MEDIUM_MAX};
use crate::{freed, hardened, registry, segment, tls};

/// Malloc of `size` bytes (at most `MEDIUM_MAX`) while the first page of its class (with
/// room for the tag) has a free block and no remote frees wait to be sent: that block, its
/// link checked (`page::pop_checked`), its neighbours' tags and its fill checked
/// (`hardened::remember_block`), sealed; else the slow path's general way
/// (`global::alloc_general`), which a zero-size block, and a block too big for a tag, take.
#[inline(never)]
pub(crate) unsafe extern "C" fn alloc(heap: *mut Heap, size: usize) -> *mut u8 {
    // SAFETY: the heap belongs to the calling thread (or is the empty heap, whose queues are
    // empty); the first page of a class is in use; a page with no flag but `FLAG_CHECKED`
    // is not counted.
    unsafe {
        // A block of no byte, or with no room for its tag in the medium classes.
        if size.wrapping_sub(1) >= MEDIUM_MAX - TAIL || !(*heap).remote.is_empty() {
            return crate::global::alloc_general(heap, size);
        }
        let page = heap::first(heap, size_class::class_of(size + TAIL));
        if page.is_null()
            || (*page).free.is_null()
            || (*page).flags.load(Ordering::Relaxed) != FLAG_CHECKED
        {
            return crate::global::alloc_general(heap, size);
        }
        let p = page::pop_checked(page);
        hardened::remember_block(page, p);
        // `remember_block` checked the block's fill and tag (see `freed::reuse`).
        canary::seal(p, (*page).block_size as usize, size, freed::filled());
        p
    }
}

/// Frees `p` if it is the start of a carved block of a small-object segment's page of ours
/// that is neither aligned nor counted, and the calling thread has a heap: its canary and
/// liveness checked (`canary::unseal`), its neighbours' tags (`hardened::check_neighbours`),
/// then filled and quarantined as the general way does (`free::quarantine_or_release`).
/// Anything else goes to hardened mode's validation (`crate::free_validated`), which frees
/// it the general way or stops the program with what is wrong with it. The page tests are
/// secure mode's (see `secure::free`).
#[inline(never)]
pub(crate) unsafe extern "C" fn free(p: *mut u8) {
    if registry::lookup(p as usize) != registry::HEAD {
        // SAFETY: validated before any header is read.
        return unsafe { crate::free_validated(p) };
    }
    let seg = segment::of(p);
    // The heap as stored: null before the thread's first malloc (such a free goes the
    // general way, which gives the thread its heap).
    let heap = tls::get().cast::<Heap>();
    // SAFETY: the registry says `seg` heads a mapping of ours, whose header maps every slice
    // to a page descriptor, read as hardened mode's validation reads them; `p` is then a
    // carved block of the page, whose tag says whether it is live.
    unsafe {
        let page = segment::page_of(seg, p);
        if (*page).flags.load(Ordering::Relaxed) & !FLAG_FULL != FLAG_CHECKED
            || !page::is_carved(page, p)
            || heap.is_null()
        {
            return crate::free_validated(p);
        }
        canary::unseal(p, (*page).block_size as usize);
        hardened::check_neighbours(page, p);
        quarantine_or_release(heap, page, p)
    }
}
