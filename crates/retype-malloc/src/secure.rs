//! Secure mode's fast paths (`RETYPE_MALLOC_SECURE=1`; the mode is chosen once, at start-up,
//! by `config`). The default mode's fast paths pop and push plain links, so secure mode,
//! whose links are encoded, cannot share them: its malloc misses the default fast path (the
//! heap points no slot at a page) and starts its slow path with [`alloc`], and its free,
//! past the one flag test the default free makes, starts with [`free`]. Each does in a few
//! dozen instructions what the common case needs, as mimalloc's secure mode does on its fast
//! path: the link popped decoded and checked to be a block of its page; the pointer freed
//! checked, in one pass over its page's fields, to be the start of a block of a page of ours
//! and not free already, then put back (its link encoded on its page's free list, or in the
//! batch for another thread's page). Anything else (a large block, an aligned pointer, a
//! pointer that fails a check) is declined and goes the way of hardened mode's validation,
//! which finds the error and names it. Every way out of either is a jump (a tail call), so
//! neither sets up a stack frame.

use core::sync::atomic::Ordering;

use crate::heap::{self, Heap};
use crate::page::{self, FLAG_CHECKED, FLAG_FULL};
use crate::segment;
use crate::size_class::MEDIUM_MAX;
use crate::{registry, size_class, tls};

/// Malloc of `size` bytes (small or medium) while the first page of its class has a free
/// block and no remote frees wait to be sent: that block, its link checked, as the default
/// fast path would pop it; else the slow path's general way (`global::alloc_general`).
#[inline(always)]
pub(crate) unsafe fn alloc(heap: *mut Heap, size: usize) -> *mut u8 {
    // SAFETY: the heap belongs to the calling thread (or is the empty heap, whose queues are
    // empty); its first page of a class is in use.
    unsafe {
        // The slow path serves the fast path's sizes, up to MEDIUM_MAX (larger ones are
        // `alloc_large`'s): told so, the class table's bound needs no check, nor the panic a
        // stack frame.
        core::hint::assert_unchecked(size <= MEDIUM_MAX);
        let page = heap::first(heap, size_class::class_of(size));
        if page.is_null() || (*page).free.is_null() || !(*heap).remote.is_empty() {
            return crate::global::alloc_general(heap, size);
        }
        page::pop_checked(page)
    }
}

/// Frees `p` if it is the start of a block in use of a small-object segment of ours; anything
/// else goes to hardened mode's validation (`crate::free_validated`), which frees it the
/// general way or stops the program with what is wrong with it.
///
/// The checks, in order: `p` lies in a mapping of ours (the registry), whose header (a
/// small segment's or a large block's) maps it to a page; the page has no flag but
/// [`FLAG_CHECKED`] and [`FLAG_FULL`], so it is a small segment's page in use (a large block's
/// has `page::FLAG_LARGE`, and a page given back to its segment keeps no flag, see
/// `segment::release_page`); `p` is the start of
/// a carved block; the block holds no free-list link (`page::holds_link`: a block that holds
/// one may be free, which the general way tells). The flags read once serve the push too:
/// only the owner writes them, and a page with no other flag does not spill.
#[inline(always)]
pub(crate) unsafe fn free(p: *mut u8) {
    // A pointer at a chunk's start, or misaligned, is no block's start in a segment (a
    // segment's header lies there; blocks are 16-byte aligned): `is_carved` declines it.
    if registry::lookup(p as usize) != registry::HEAD {
        // SAFETY: validated before any header is read.
        return unsafe { crate::free_validated(p) };
    }
    let seg = segment::of(p);
    // SAFETY: the registry says `seg` heads a mapping of ours, whose header maps every slice
    // to a page descriptor; the descriptors are read as hardened mode's validation reads
    // them; the page is written only by the calling thread, if it owns the page.
    unsafe {
        let page = segment::page_of(seg, p);
        let flags = (*page).flags.load(Ordering::Relaxed);
        if flags & !FLAG_FULL != FLAG_CHECKED
            || !page::is_carved(page, p)
            || page::holds_link(page, p)
        {
            return crate::free_validated(p);
        }
        // The heap as stored: null before the thread's first malloc, which owns no page.
        let heap = tls::get().cast::<Heap>();
        if (*page).heap != heap::id(heap) {
            return crate::free::remote_free(heap::current(), page, p.cast());
        }
        page::push_checked(page, p.cast());
        (*page).used -= 1;
        if flags & FLAG_FULL != 0 || (*page).used == 0 {
            heap::settle(heap, page);
        }
    }
}
