//! Large objects (over 128 KiB, or with alignment a page cannot give): each is its own
//! 2 MiB-aligned mapping with a segment header in front, so `free` finds it with the same
//! address mask as small blocks. Freed mappings go through the retirement cache and return to
//! the OS after the purge delay.
//!
//! A block of 2 MiB or more (`RETYPE_MALLOC_HUGEPAGES_LARGE`, on by default) starts on a
//! 2 MiB boundary and its pages are advised for huge pages from the first such block, so a
//! big array or list walk gets them; the first 2 MiB of its mapping hold only the header and
//! are advised against huge pages (a few 4 KiB pages of it are ever touched).
//!
//! A block at a segment boundary (those, and alignments of 2 MiB or more) is where the mask
//! would find no header; the word before such a block points back to the header instead.
//!
//! With guard pages (`RETYPE_MALLOC_GUARD`, hardened mode) a block aligned to at most a page
//! gets an inaccessible page before and after its pages and ends where its last page ends
//! (rounded to its alignment), so an overflow or underflow past its pages faults at the
//! access, and the header cannot be reached from the block. With canaries the slack in the
//! block's first and last pages holds a keyed pattern, checked at free and realloc. With
//! quarantine a freed block's pages are inaccessible until it leaves the quarantine.

use core::sync::atomic::Ordering;

use crate::consts::{HEADER_SIZE, OS_PAGE, SEGMENT_SIZE, SLICES};
use crate::page::FLAG_LARGE;
use crate::segment::{Segment, KIND_LARGE};
use crate::{cache, canary, config, os, quarantine, registry, stats};

/// Maps a block of `size` bytes aligned to `align` (a power of two). `zero` asks for zeroed
/// memory: fresh mappings are, reused ones are cleared here.
pub(crate) unsafe fn alloc(size: usize, align: usize, zero: bool) -> *mut u8 {
    let guarded = config::guard() && align <= OS_PAGE;
    let huge = !guarded && size >= SEGMENT_SIZE && config::huge_large();
    // At least one byte, even for size 0, so the block lies inside its mapping (a block at
    // the mapping's end would be outside, and unknown to hardened mode's registry).
    let Some(rounded) = size.max(1).checked_add(align - 1).map(|n| n & !(align - 1)) else {
        return core::ptr::null_mut();
    };
    // Guarded: header, guard page, the block's pages, guard page.
    let (offset, tail) = if guarded {
        (HEADER_SIZE + OS_PAGE, OS_PAGE)
    } else if align < SEGMENT_SIZE && !huge {
        ((HEADER_SIZE + align - 1) & !(align - 1), 0)
    } else {
        (align.max(SEGMENT_SIZE), 0)
    };
    let Some(need) = offset
        .checked_add(rounded)
        .and_then(|n| n.checked_add(OS_PAGE - 1 + tail))
    else {
        return core::ptr::null_mut();
    };
    let need = need & !(OS_PAGE - 1);
    if need > isize::MAX as usize {
        return core::ptr::null_mut();
    }
    // SAFETY: cached and fresh mappings are ours alone; the header is rewritten here.
    unsafe {
        // Cached mappings are only known to be segment-aligned.
        let cached = if align <= SEGMENT_SIZE {
            cache::take(need, need + need / 4)
        } else {
            None
        };
        let (base, len, fresh) = match cached {
            Some((b, l)) => (b, l, false),
            None => {
                let b = os::map_aligned(need, align.max(SEGMENT_SIZE));
                if b.is_null() {
                    return b;
                }
                registry::mark(b, need);
                (b, need, true)
            }
        };
        let seg = base.cast::<Segment>();
        let (p, end) = if guarded {
            let end = base.add(need - OS_PAGE);
            os::protect(base.add(HEADER_SIZE), OS_PAGE, false);
            os::protect(end, OS_PAGE, false);
            (end.sub(rounded), end)
        } else {
            (base.add(offset), base.add(len))
        };
        (*seg).kind = KIND_LARGE;
        (*seg).large_live.store(1, Ordering::Release);
        (*seg).slice_head = [0; SLICES];
        (*seg).pages[0].flags.store(FLAG_LARGE, Ordering::Relaxed);
        (*seg).map_len = len;
        if huge {
            advise_huge(seg, offset);
        }
        (*seg).large_ptr = p;
        (*seg).large_size = size.max(1);
        (*seg).large_end = end;
        (*seg).large_guarded = guarded;
        if offset >= SEGMENT_SIZE {
            p.cast::<*mut Segment>().sub(1).write(seg);
        }
        if zero && !fresh {
            p.write_bytes(0, size);
        }
        if config::canary() {
            let (from, to) = slack(seg);
            canary::fill_slack(p, from, p);
            canary::fill_slack(p, p.add(size.max(1)), to);
        }
        stats::raise(&stats::LARGE_BYTES, &stats::LARGE_BYTES_PEAK, len);
        p
    }
}

/// Advises the mapping with header `seg` for huge pages from `offset` (a multiple of 2 MiB,
/// where its block starts) and against them before: once per mapping, which keeps the offset
/// advised in its header, also while it is cached.
unsafe fn advise_huge(seg: *mut Segment, offset: usize) {
    // SAFETY: `seg` heads a mapping of ours at least `offset` bytes long.
    unsafe {
        if (*seg).huge_from == offset {
            return;
        }
        let base = seg.cast::<u8>();
        os::advise_small(base, offset);
        os::advise_huge(base.add(offset), (*seg).map_len - offset);
        (*seg).huge_from = offset;
    }
}

/// The pages of the large block with header `seg`: from the start of its first page to the
/// end of its last (its mapping's end at most).
unsafe fn slack(seg: *mut Segment) -> (*mut u8, *mut u8) {
    // SAFETY: `seg` is the header of a live large block.
    unsafe {
        let p = (*seg).large_ptr;
        let end = (p as usize + (*seg).large_size).next_multiple_of(OS_PAGE);
        let from = p.sub(p as usize & (OS_PAGE - 1));
        (from, (end as *mut u8).min((*seg).large_end))
    }
}

/// Aborts if the canaries in the slack of the large block with header `seg` were overwritten.
unsafe fn check_slack(seg: *mut Segment) {
    // SAFETY: `seg` is the header of a live large block whose slack holds its canaries.
    unsafe {
        let (p, size) = ((*seg).large_ptr, (*seg).large_size);
        let (from, to) = slack(seg);
        canary::check_slack(p, size, from, p);
        canary::check_slack(p, size, p.add(size), to);
    }
}

/// The header of a large block placed at a segment boundary.
pub(crate) unsafe fn header_of_aligned(p: *mut u8) -> *mut Segment {
    // SAFETY: the word before such a block is inside its mapping and holds the header address.
    unsafe { p.cast::<*mut Segment>().sub(1).read() }
}

/// Usable bytes from `p` to the end of its block (with canaries, which are checked here, the
/// size asked for).
pub(crate) unsafe fn usable(seg: *mut Segment, p: *mut u8) -> usize {
    // SAFETY: `seg` is the header of the live block `p`.
    unsafe {
        if config::canary() {
            check_slack(seg);
            return (*seg).large_size;
        }
        (*seg).large_end as usize - p as usize
    }
}

/// Frees the large block whose header is `seg` (in hardened mode, `hardened::forget_large`
/// has checked it first). With quarantine its pages become inaccessible and the mapping
/// waits in the quarantine before it can be reused.
pub(crate) unsafe fn free(seg: *mut Segment) {
    // SAFETY: the block is live and owned by the caller, who gives it up.
    unsafe {
        if config::canary() {
            check_slack(seg);
        }
        let (base, len) = (seg.cast::<u8>(), (*seg).map_len);
        if config::quarantine() {
            let p = (*seg).large_ptr;
            let from = p.sub(p as usize & (OS_PAGE - 1));
            os::protect(from, base.add(len) as usize - from as usize, false);
            if quarantine::hold_large(base, len) {
                while let Some((b, l)) = quarantine::large_leaving() {
                    retire(b, l, true);
                }
                return;
            }
            return retire(base, len, true);
        }
        retire(base, len, (*seg).large_guarded)
    }
}

/// Gives the freed large mapping `[base, base+len)` to the cache, with everything after its
/// header made accessible again if `protected` (guard pages, quarantine).
unsafe fn retire(base: *mut u8, len: usize, protected: bool) {
    // SAFETY: the mapping is the caller's to give up.
    unsafe {
        if protected {
            os::protect(base.add(HEADER_SIZE), len - HEADER_SIZE, true);
        }
        stats::lower(&stats::LARGE_BYTES, len);
        cache::put(base, len);
    }
}
