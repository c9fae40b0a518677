//! Large objects (over 128 KiB, or with alignment a page cannot give): each is its own
//! 2 MiB-aligned mapping with a segment header in front, so `free` finds it with the same
//! address mask as small blocks. Mappings of 2 MiB and more are advised for huge pages once
//! the heap is big (a sparsely touched block would otherwise cost whole huge pages).
//! Freed mappings go through the retirement cache and return to the OS after the purge delay.
//!
//! An alignment of 2 MiB or more puts the block at a segment boundary, where the mask would
//! find no header; the word before such a block points back to the header instead.

use core::sync::atomic::Ordering;

use crate::consts::{HEADER_SIZE, OS_PAGE, SEGMENT_MASK, SEGMENT_SIZE, SLICES};
use crate::page::FLAG_LARGE;
use crate::segment::{self, Segment, KIND_LARGE};
use crate::{cache, os, registry, stats};

/// Maps a block of `size` bytes aligned to `align` (a power of two). `zero` asks for zeroed
/// memory: fresh mappings are, reused ones are cleared here.
pub(crate) unsafe fn alloc(size: usize, align: usize, zero: bool) -> *mut u8 {
    let offset = if align < SEGMENT_SIZE {
        (HEADER_SIZE + align - 1) & !(align - 1)
    } else {
        align
    };
    // At least one byte, even for size 0, so the block lies inside its mapping (a block at
    // the mapping's end would be outside, and unknown to hardened mode's registry).
    let Some(need) = offset
        .checked_add(size.max(1))
        .and_then(|n| n.checked_add(OS_PAGE - 1))
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
        if len >= SEGMENT_SIZE && segment::big_heap() {
            os::advise_huge(base, len & !SEGMENT_MASK);
        }
        let seg = base.cast::<Segment>();
        let p = base.add(offset);
        (*seg).kind = KIND_LARGE;
        (*seg).large_live.store(1, Ordering::Release);
        (*seg).slice_head = [0; SLICES];
        (*seg).pages[0].flags.store(FLAG_LARGE, Ordering::Relaxed);
        (*seg).map_len = len;
        (*seg).large_ptr = p;
        if offset >= SEGMENT_SIZE {
            p.cast::<*mut Segment>().sub(1).write(seg);
        }
        if zero && !fresh {
            p.write_bytes(0, size);
        }
        stats::raise(&stats::LARGE_BYTES, &stats::LARGE_BYTES_PEAK, len);
        p
    }
}

/// The header of a large block placed at a segment boundary.
pub(crate) unsafe fn header_of_aligned(p: *mut u8) -> *mut Segment {
    // SAFETY: the word before such a block is inside its mapping and holds the header address.
    unsafe { p.cast::<*mut Segment>().sub(1).read() }
}

/// Usable bytes from `p` to the end of its mapping.
pub(crate) unsafe fn usable(seg: *mut Segment, p: *mut u8) -> usize {
    // SAFETY: `seg` is the header of the live block `p`.
    unsafe { (*seg).map_len - (p as usize - seg as usize) }
}

/// Frees the large block whose header is `seg` (in hardened mode, `hardened::forget_large`
/// has checked it first).
pub(crate) unsafe fn free(seg: *mut Segment) {
    // SAFETY: the block is live and owned by the caller, who gives it up.
    unsafe {
        let len = (*seg).map_len;
        stats::lower(&stats::LARGE_BYTES, len);
        cache::put(seg.cast(), len);
    }
}
