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

/// Whether bytes `from..` of the block filled by [`fill`] still hold the fill (the first of
/// them does, and every byte equals the one before it), and its free tag.
unsafe fn intact(block: *const u8, size: usize, from: usize) -> bool {
    let n = len(size).saturating_sub(from);
    // SAFETY: the block is the caller's to read, `size` bytes long.
    unsafe {
        let filled = n == 0 || {
            let head = core::slice::from_raw_parts(block.add(from), n - 1);
            let tail = core::slice::from_raw_parts(block.add(from + 1), n - 1);
            *block.add(from) == byte() && head == tail
        };
        filled && (!config::canary() || canary::free_intact(block, size))
    }
}

/// Whether the block filled by [`fill`], held apart from any list (in the quarantine), still
/// holds the fill throughout and its free tag.
pub(crate) unsafe fn untouched(block: *const u8, size: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe { intact(block, size, 0) }
}

/// Readies the block at `block` of `size` bytes, just taken from its page's free list, to be
/// handed out: aborts if its fill was broken (past its link), then zeroes it with
/// `ZERO_ON_MALLOC` (only its link when the fill is zero already).
pub(crate) unsafe fn reuse(block: *mut u8, size: usize) {
    // SAFETY: the block is the caller's, `size` bytes long.
    unsafe {
        if filled() && !intact(block, size, LINK) {
            os::die(
                "heap overflow or write after free (fill of a free block)",
                block,
                Some(size),
            );
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
