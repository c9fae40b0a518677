//! Hardened mode (`RETYPE_MALLOC_HARDENED=1`): every free and realloc is validated. A pointer
//! that retype-malloc did not hand out, a pointer into the middle of a block, or a block that
//! is already free stops the program with a message naming the address, then `abort()`.
//! Liveness is one bit per block, set by malloc and cleared atomically by free, so two
//! threads freeing the same block are caught too.

use core::sync::atomic::Ordering;

use crate::consts::SEGMENT_MASK;
use crate::page::{self, Page, FLAG_ALIGNED, FLAG_LARGE};
use crate::segment::{self, Segment, KIND_LARGE, KIND_SMALL};
use crate::{large, os, registry};

/// Writes `retype-malloc: <what> <p>` to standard error and aborts.
#[cold]
pub(crate) fn die(what: &str, p: *const u8) -> ! {
    let mut hex = [0u8; 18];
    hex[0] = b'0';
    hex[1] = b'x';
    for (i, d) in hex[2..].iter_mut().enumerate() {
        let nibble = (p as usize >> (60 - 4 * i)) & 15;
        *d = b"0123456789abcdef"[nibble];
    }
    os::write_all(2, b"retype-malloc: ");
    os::write_all(2, what.as_bytes());
    os::write_all(2, b" of pointer ");
    os::write_all(2, &hex);
    os::write_all(2, b" (RETYPE_MALLOC_HARDENED); aborting\n");
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Checks that `p` is a pointer retype-malloc handed out (live or not) and returns its segment.
pub(crate) unsafe fn validate(p: *mut u8) -> *mut Segment {
    let addr = p as usize;
    if addr & 15 != 0 {
        die("invalid free (misaligned)", p);
    }
    let seg = match registry::lookup(addr) {
        registry::HEAD if addr & SEGMENT_MASK != 0 => segment::of(p),
        registry::INTERIOR if addr & SEGMENT_MASK == 0 => {
            // SAFETY: the chunk before `p` is part of the same large mapping.
            let seg = unsafe { large::header_of_aligned(p) };
            if registry::lookup(seg as usize) != registry::HEAD {
                die("invalid free (not allocated by retype-malloc)", p);
            }
            seg
        }
        _ => die("invalid free (not allocated by retype-malloc)", p),
    };
    // SAFETY: the registry says `seg` is the header of a live mapping of ours.
    unsafe {
        match (*seg).kind {
            KIND_LARGE => {
                if (*seg).large_ptr != p {
                    die("invalid free (inside a large block)", p);
                }
            }
            KIND_SMALL => {
                let page = segment::page_of(seg, p);
                let flags = (*page).flags.load(Ordering::Relaxed);
                if (*page).in_use == 0 || flags & FLAG_LARGE != 0 {
                    die("double free (page already empty) or invalid free", p);
                }
                let off = addr.wrapping_sub((*page).area as usize);
                let bs = (*page).block_size as usize;
                if addr < (*page).area as usize || off / bs >= (*page).capacity as usize {
                    die("invalid free (outside any block)", p);
                }
                if !off.is_multiple_of(bs) && flags & FLAG_ALIGNED == 0 {
                    die("invalid free (inside a block)", p);
                }
            }
            _ => die("invalid free (corrupt header)", p),
        }
    }
    seg
}

fn bit_of(page: *const Page, block: *const u8) -> (usize, usize, u64) {
    // SAFETY: `block` lies in the page's area.
    let (index, bs) = unsafe {
        (
            (block as usize - (*page).area as usize),
            (*page).block_size as usize,
        )
    };
    let n = index / bs;
    let (_, first) = segment::locate(page as *mut Page);
    (first, n / 64, 1u64 << (n % 64))
}

/// Marks `block` of `page` allocated.
pub(crate) unsafe fn remember_block(page: *mut Page, block: *mut u8) {
    let (first, word, bit) = bit_of(page, block);
    // SAFETY: the bitmap belongs to the page's segment.
    unsafe { (*segment::bitmap(segment::of(block), first))[word].fetch_or(bit, Ordering::AcqRel) };
}

/// Marks `block` free; aborts if it already was.
pub(crate) unsafe fn forget_block(seg: *mut Segment, page: *mut Page, block: *mut u8) {
    let (first, word, bit) = bit_of(page, block);
    // SAFETY: as for `remember_block`.
    let old = unsafe { (*segment::bitmap(seg, first))[word].fetch_and(!bit, Ordering::AcqRel) };
    if old & bit == 0 {
        die("double free", block);
    }
}

/// Marks the large block with header `seg` free; aborts if it already was.
pub(crate) unsafe fn forget_large(seg: *mut Segment) {
    // SAFETY: `validate` found `seg` to be the header of a large mapping of ours.
    unsafe {
        if (*seg).large_live.swap(0, Ordering::AcqRel) == 0 {
            die("double free", (*seg).large_ptr);
        }
    }
}

/// Aborts unless `p` is a live allocation (used before realloc and malloc_usable_size).
pub(crate) unsafe fn check_live(p: *mut u8) {
    // SAFETY: `validate` found `seg` to be ours and, for a small block, `p` in a page in use.
    unsafe {
        let seg = validate(p);
        if (*seg).kind == KIND_LARGE {
            if (*seg).large_live.load(Ordering::Acquire) == 0 {
                die("use after free", p);
            }
            return;
        }
        let page = segment::page_of(seg, p);
        let block = if (*page).flags.load(Ordering::Relaxed) & FLAG_ALIGNED != 0 {
            page::block_start(page, p)
        } else {
            p
        };
        let (first, word, bit) = bit_of(page, block);
        if (*segment::bitmap(seg, first))[word].load(Ordering::Acquire) & bit == 0 {
            die("use after free", p);
        }
    }
}
