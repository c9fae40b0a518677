//! What a free small or medium block holds (`RETYPE_MALLOC_ZERO_ON_FREE`, the quarantine;
//! hardened mode) and what a block handed out holds (`RETYPE_MALLOC_ZERO_ON_MALLOC`).
//!
//! With either of the first two, every free block is filled, all but its tag (with canaries):
//! a freed one when it is freed, fresh ones as they are carved. The fill is zero with
//! `ZERO_ON_FREE`, so freed data does not linger; with the quarantine alone, a keyed junk byte.
//! A read after free reads the fill, never the data freed nor a new owner's. The fill is
//! checked when a block leaves the quarantine, and again, but for the free-list link in its
//! first word, when the block is handed out: a write after free, or an overflow or underflow
//! into a free neighbour, stops the program there.
//!
//! With canaries, a block leaving the quarantine for a page of its thread's has only its first
//! word checked (the link overwrites it), and is tagged so ([`deferred`]): the check as it is
//! handed out covers the rest, once instead of twice, and says "write after free
//! (quarantine)" as the check on leaving would. Its page's free blocks are checked so too
//! before the page is given back, at its thread's exit and in the exit check
//! (`page::check_freed`), so none leaves the heap unchecked.
//!
//! With `ZERO_ON_MALLOC` a block handed out is zero, as `calloc`'s are: no earlier owner's
//! bytes show through it.

use crate::canary::{self, TAIL};
use crate::secret::{self, mix};
use crate::{config, os};

/// Bytes at a free block's start that hold its free-list link once it is on a list.
const LINK: usize = core::mem::size_of::<usize>();

/// Whether free blocks are filled.
#[inline]
pub(crate) fn filled() -> bool {
    config::zero_on_free() || config::quarantine()
}

/// The byte free blocks are filled with: zero with `ZERO_ON_FREE`; else keyed by the secret,
/// 0x80 or more (never zero, never ASCII, so freed text does not read as text). One byte, not
/// the canaries' words, so that filling is a `memset` and checking a `memcmp` of the block
/// against itself shifted by one, both of them the C library's vectorised routines.
fn byte() -> u8 {
    if config::zero_on_free() {
        0
    } else {
        (mix(secret::get()) >> 56) as u8 | 0x80
    }
}

/// How much of a block of `size` bytes the fill covers: all of it, or all but its tag when
/// blocks carry canaries.
fn len(size: usize) -> usize {
    if config::canary() {
        size - TAIL
    } else {
        size
    }
}

/// Fills the free block at `block`, `size` bytes, (but its tag).
pub(crate) unsafe fn fill(block: *mut u8, size: usize) {
    // SAFETY: the block is the caller's to write.
    unsafe { block.write_bytes(byte(), len(size)) }
}

/// Whether bytes `from..to` (at most the fill's length) of the block filled by [`fill`] still
/// hold the fill (the first of them does, and every byte equals the one before it).
unsafe fn intact(block: *const u8, size: usize, from: usize, to: usize) -> bool {
    let n = to.min(len(size)).saturating_sub(from);
    // SAFETY: the block is the caller's to read, `size` bytes long.
    unsafe {
        n == 0 || {
            let head = core::slice::from_raw_parts(block.add(from), n - 1);
            let tail = core::slice::from_raw_parts(block.add(from + 1), n - 1);
            *block.add(from) == byte() && head == tail
        }
    }
}

/// Whether the block filled by [`fill`], held apart from any list (in the quarantine), still
/// holds the fill throughout and a free tag.
pub(crate) unsafe fn untouched(block: *const u8, size: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        intact(block, size, 0, size)
            && (!config::canary() || canary::free_tag(block, size).is_some())
    }
}

/// Whether the first word of the block filled by [`fill`], held apart from any list, still
/// holds the fill: the bytes its free-list link overwrites as it leaves the quarantine (one
/// load: every block's fill is a word long at least, 16 bytes but a tag's 8).
pub(crate) unsafe fn link_untouched(block: *const u8, _size: usize) -> bool {
    // SAFETY: the caller's contract: the block is ours, aligned, its first word filled.
    unsafe { block.cast::<usize>().read() == usize::from_ne_bytes([byte(); LINK]) }
}

/// Whether blocks leave the quarantine with only their first word checked (with canaries and
/// the quarantine: the tag says so, see the module's comment).
#[inline]
pub(crate) fn deferred() -> bool {
    config::canary() && config::quarantine()
}

/// Aborts unless the free block at `block` of `size` bytes, on a free list, still holds its
/// fill past its link, and a free tag.
pub(crate) unsafe fn check_rest(block: *const u8, size: usize) {
    // SAFETY: the caller's contract.
    let (filled, tag) = unsafe {
        let tag = if config::canary() {
            canary::free_tag(block, size)
        } else {
            Some(false)
        };
        (intact(block, size, LINK, size), tag)
    };
    match tag {
        Some(_) if filled => {}
        Some(true) => os::die("write after free (quarantine)", block, Some(size)),
        _ => os::die(
            "heap overflow or write after free (fill of a free block)",
            block,
            Some(size),
        ),
    }
}

/// Readies the block at `block` of `size` bytes, just taken from its page's free list, to be
/// handed out: aborts if its fill was broken (past its link), then zeroes it with
/// `ZERO_ON_MALLOC` (only its link when the fill is zero already).
pub(crate) unsafe fn reuse(block: *mut u8, size: usize) {
    // SAFETY: the block is the caller's, `size` bytes long.
    unsafe {
        if filled() {
            check_rest(block, size);
        }
        if config::zero_on_malloc() {
            let n = if config::zero_on_free() {
                LINK
            } else {
                len(size)
            };
            block.write_bytes(0, n);
        }
    }
}
