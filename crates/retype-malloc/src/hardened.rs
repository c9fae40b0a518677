//! Hardened mode (`RETYPE_MALLOC_HARDENED=1`): every free and realloc is validated. A pointer
//! that retype-malloc did not hand out, a pointer into the middle of a block, or a block that
//! is already free stops the program with a message naming the address, then `abort()`.
//! A small block's liveness is its canary tag when blocks carry canaries (`canary::unseal`
//! swaps it), else one bit per block, set by malloc and cleared atomically by free: either
//! way two threads freeing the same block are caught too. Secure mode
//! (`RETYPE_MALLOC_SECURE=1`) keeps no bit, and so no atomic instruction on malloc or free:
//! a block's liveness is whether it holds a free-list link ([`check_not_free`]).

use core::sync::atomic::Ordering;

use crate::consts::SEGMENT_MASK;
use crate::page::{self, Page, FLAG_ALIGNED, FLAG_LARGE};
use crate::segment::{self, Segment, KIND_LARGE, KIND_SMALL};
use crate::{canary, config, freed, large, os, registry};

/// Aborts with the message for `what` at `p` (the size class is not known here).
fn die_at(what: &str, p: *const u8) -> ! {
    os::die(what, p, None)
}

/// Checks that `p` is a pointer retype-malloc handed out (live or not) and returns its segment.
pub(crate) unsafe fn validate(p: *mut u8) -> *mut Segment {
    let addr = p as usize;
    if addr & 15 != 0 {
        die_at("invalid free (misaligned)", p);
    }
    let seg = match registry::lookup(addr) {
        registry::HEAD if addr & SEGMENT_MASK != 0 => segment::of(p),
        registry::INTERIOR if addr & SEGMENT_MASK == 0 => {
            // SAFETY: the chunk before `p` is part of the same large mapping.
            let seg = unsafe { large::header_of_aligned(p) };
            if registry::lookup(seg as usize) != registry::HEAD {
                die_at("invalid free (not allocated by retype-malloc)", p);
            }
            seg
        }
        _ => die_at("invalid free (not allocated by retype-malloc)", p),
    };
    // SAFETY: the registry says `seg` is the header of a live mapping of ours.
    unsafe {
        match (*seg).kind {
            KIND_LARGE => {
                if (*seg).large_ptr != p {
                    die_at("invalid free (inside a large block)", p);
                }
            }
            KIND_SMALL => {
                let page = segment::page_of(seg, p);
                let flags = (*page).flags.load(Ordering::Relaxed);
                if (*page).in_use == 0 || flags & FLAG_LARGE != 0 {
                    die_at("double free (page already empty) or invalid free", p);
                }
                let area = (*page).area as usize;
                let index = if addr < area {
                    usize::MAX
                } else {
                    page::index_of(page, p)
                };
                if index >= (*page).capacity as usize {
                    die_at("invalid free (outside any block)", p);
                }
                let start = area + index * (*page).block_size as usize;
                if addr != start && flags & FLAG_ALIGNED == 0 {
                    die_at("invalid free (inside a block)", p);
                }
            }
            _ => die_at("invalid free (corrupt header)", p),
        }
    }
    seg
}

fn bit_of(page: *const Page, block: *const u8) -> (usize, usize, u64) {
    // SAFETY: `block` lies in the page's area.
    let n = unsafe { page::index_of(page, block) };
    let (_, first) = segment::locate(page as *mut Page);
    (first, n / 64, 1u64 << (n % 64))
}

/// Marks `block` of `page`, just popped from its free list (its link checked, see
/// `page::pop_checked`), allocated: aborts if it was live already. Links live in freed
/// blocks, where an overflow from the block before or a write after free can rewrite them;
/// checked so, a rewritten link can hand out neither memory outside the page nor (but in
/// secure mode, which keeps no bitmap) a block in use. With canaries, the block's tag says
/// whether it is live (`canary::seal` checks it), and the bitmap is not kept; the tags of its
/// neighbours are checked too, so an overflow or underflow into a block that is never freed
/// is caught at the next malloc beside it. Then the block's fill is checked and it is
/// zeroed, as `freed` says.
pub(crate) unsafe fn remember_block(page: *mut Page, block: *mut u8) {
    // SAFETY: the bitmap belongs to the page's segment; the page is the caller's.
    unsafe {
        if config::canary() {
            check_neighbours(page, block);
        } else if !config::secure() {
            let (first, word, bit) = bit_of(page, block);
            let bits = &(*segment::bitmap(segment::of(block), first))[word];
            if bits.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
                die_at("heap corruption (free list holds a live block)", block);
            }
        }
        freed::reuse(block, (*page).block_size as usize);
    }
}

/// Aborts unless the blocks either side of `block` in `page`, live or free, hold sound tags
/// (blocks with canaries): the one before (a page's first block has a tag before it too),
/// which an underflow of `block` breaks first, and the one after, if carved, which an
/// overflow past `block`'s own canary breaks. Tags are whole words, written atomically, so
/// this holds whichever thread frees either neighbour meanwhile.
pub(crate) unsafe fn check_neighbours(page: *mut Page, block: *mut u8) {
    // SAFETY: `block` is a block of `page`, in use; carved blocks have tags.
    unsafe {
        let bs = (*page).block_size as usize;
        if !canary::tag_sound(block.wrapping_sub(bs), bs) {
            os::die(
                "heap underflow (canary of the block before)",
                block,
                Some(bs),
            );
        }
        let after = block.wrapping_add(bs);
        let carved_end = (*page).area as usize + (*page).carved as usize;
        if (after as usize) < carved_end && !canary::tag_sound(after, bs) {
            os::die("heap overflow (canary of the block after)", block, Some(bs));
        }
    }
}

/// Whether `block` of `page` in `seg` is allocated.
pub(crate) unsafe fn is_live(seg: *mut Segment, page: *mut Page, block: *mut u8) -> bool {
    let (first, word, bit) = bit_of(page, block);
    // SAFETY: as for `remember_block`.
    unsafe { (*segment::bitmap(seg, first))[word].load(Ordering::Acquire) & bit != 0 }
}

/// Marks `block` free; aborts if it already was (blocks without canaries: see
/// [`remember_block`]).
pub(crate) unsafe fn forget_block(seg: *mut Segment, page: *mut Page, block: *mut u8) {
    let (first, word, bit) = bit_of(page, block);
    // SAFETY: as for `remember_block`.
    let old = unsafe { (*segment::bitmap(seg, first))[word].fetch_and(!bit, Ordering::AcqRel) };
    if old & bit == 0 {
        die_at("double free", block);
    }
}

/// Secure mode's check of a freed small block: aborts if `block` of `page` is free already.
/// Only a free block holds a free-list link (see `page::holds_link`), so a block that holds
/// none is live: the common case costs one load and a decode. One that holds one is looked
/// for on the free list if the caller owns the page, and taken for free if not (the list
/// is another thread's to walk; a live block holds a link by a chance of one in 2^50). A
/// block freed first by another thread and not yet collected holds a link of that thread's
/// batch, which is not encoded: its second free is not caught here (the page's walk of its
/// remote list may find the loop it makes, see `page::collect`).
pub(crate) unsafe fn check_not_free(page: *mut Page, block: *mut u8, owner: bool) {
    // SAFETY: `validate` found `block` to be a carved block of `page`, in use.
    unsafe {
        if page::holds_link(page, block) && (!owner || page::on_free_list(page, block)) {
            os::die("double free", block, Some((*page).block_size as usize));
        }
    }
}

/// Marks the large block with header `seg` free; aborts if it already was.
pub(crate) unsafe fn forget_large(seg: *mut Segment) {
    // SAFETY: `validate` found `seg` to be the header of a large mapping of ours.
    unsafe {
        if (*seg).large_live.swap(0, Ordering::AcqRel) == 0 {
            die_at("double free", (*seg).large_ptr);
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
                die_at("use after free", p);
            }
            return;
        }
        let page = segment::page_of(seg, p);
        let block = if (*page).flags.load(Ordering::Relaxed) & FLAG_ALIGNED != 0 {
            page::block_start(page, p)
        } else {
            p
        };
        // With canaries, the tag says whether the block is live (`canary::size`); in secure
        // mode, its first word.
        let free = if config::canary() {
            false
        } else if config::secure() {
            page::holds_link(page, block)
        } else {
            !is_live(seg, page, block)
        };
        if free {
            die_at("use after free", p);
        }
    }
}
