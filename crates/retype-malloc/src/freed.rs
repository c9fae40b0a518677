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
use crate::secret;
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
        (secret::mixed() >> 56) as u8 | 0x80
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

/// Fills the free block at `block`, `size` bytes, (but its tag): up to 64 bytes by a few
/// overlapping stores, longer ones by `memset` (whose call costs as much as a short fill).
pub(crate) unsafe fn fill(block: *mut u8, size: usize) {
    let (n, b) = (len(size), byte());
    // SAFETY: the block is the caller's to write; every store lies in its first `n` bytes.
    unsafe {
        if n > 64 {
            return block.write_bytes(b, n);
        }
        let word = u64::from_ne_bytes([b; 8]);
        let wide = u128::from(word) << 64 | u128::from(word);
        let put = |at: usize| block.add(at).cast::<u128>().write_unaligned(wide);
        match n {
            8..16 => {
                block.cast::<u64>().write_unaligned(word);
                block.add(n - 8).cast::<u64>().write_unaligned(word);
            }
            16..=32 => {
                put(0);
                put(n - 16);
            }
            33..=64 => {
                put(0);
                put(16);
                put(n - 32);
                put(n - 16);
            }
            _ => block.write_bytes(b, n),
        }
    }
}

/// Whether bytes `from..to` (at most the fill's length) of the block filled by [`fill`] still
/// hold the fill: under 32 bytes a word at a time; else 32 bytes at a time where the
/// processor has AVX2 (see [`holds_avx2`]), or the first byte compared and the rest against
/// itself shifted by one (the C library's vectorised `memcmp`).
unsafe fn intact(block: *const u8, size: usize, from: usize, to: usize) -> bool {
    let n = to.min(len(size)).saturating_sub(from);
    // SAFETY: the block is the caller's to read, `size` bytes long.
    unsafe {
        let at = block.add(from);
        if (8..32).contains(&n) {
            // Four words, overlapping as `n` asks, cover it.
            let want = u64::from_ne_bytes([byte(); 8]);
            let word = |i: usize| at.add(i).cast::<u64>().read_unaligned() ^ want;
            return word(0) | word((n - 8).min(8)) | word(n.max(16) - 16) | word(n - 8) == 0;
        }
        #[cfg(target_arch = "x86_64")]
        if n >= 32 && std::arch::is_x86_feature_detected!("avx2") {
            return if config::zero_on_free() {
                holds_avx2::<true>(at, n, 0)
            } else {
                holds_avx2::<false>(at, n, byte())
            };
        }
        n == 0 || {
            let head = core::slice::from_raw_parts(at, n - 1);
            let tail = core::slice::from_raw_parts(at.add(1), n - 1);
            *at == byte() && head == tail
        }
    }
}

/// Whether the `n` bytes (32 or more) at `at` all hold `fill` (zero if `ZERO`): the bytes
/// xored with it (if not zero) and or-ed together, four registers of 32 bytes at a time,
/// the last 32 bytes overlapping the ones before; no early exit, since the common case is
/// that nothing was written. About half the instructions of `memcmp`'s, which reads two
/// copies of the block and tells where they differ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn holds_avx2<const ZERO: bool>(at: *const u8, n: usize, fill: u8) -> bool {
    use core::arch::x86_64::*;
    let want = _mm256_set1_epi8(fill as i8);
    // SAFETY: every load lies in `[at, at + n)`, readable by the caller's contract.
    let load = |i: usize| unsafe {
        let v = _mm256_loadu_si256(at.add(i).cast());
        if ZERO {
            v
        } else {
            _mm256_xor_si256(v, want)
        }
    };
    let mut acc = load(n - 32);
    let mut i = 0;
    while i + 128 <= n {
        let pair = _mm256_or_si256(load(i), load(i + 32));
        let pair2 = _mm256_or_si256(load(i + 64), load(i + 96));
        acc = _mm256_or_si256(acc, _mm256_or_si256(pair, pair2));
        i += 128;
    }
    while i + 32 <= n {
        acc = _mm256_or_si256(acc, load(i));
        i += 32;
    }
    _mm256_testz_si256(acc, acc) != 0
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
pub(crate) unsafe fn link_untouched(block: *const u8) -> bool {
    // SAFETY: the caller's contract: the block is ours, aligned, its first word filled.
    unsafe { block.cast::<usize>().read() == usize::from_ne_bytes([byte(); LINK]) }
}

/// Blocks at least this long are read from memory by their check as they are handed out
/// (see [`cold`]).
const COLD_MIN: usize = 4096;

/// Whether a block of `size` bytes that left the quarantine for a page of its thread's is
/// to be handed out soon, its page put first in its class's queue (`heap::to_front`): its
/// fill, checked as it is handed out (see [`deferred`]), is then still in the caches, where
/// a block handed out later, or another page's, is read from memory. Blocks of a few
/// kilobytes and more: smaller ones stay cached, and moving their pages cost more than it
/// saved.
#[inline]
pub(crate) fn cold(size: usize) -> bool {
    size >= COLD_MIN
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
            if config::zero_on_free() {
                block.cast::<usize>().write(0);
            } else {
                block.write_bytes(0, len(size));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fill, intact, LINK};
    use proptest::prelude::*;

    proptest! {
        /// A block filled holds the fill, whole and past its link, at every block size (short
        /// fills by overlapping stores, long ones by `memset`; checks by words, by AVX2 or by
        /// `memcmp`); with any one byte of it changed, it does not; bytes past it are not
        /// filled.
        #[test]
        fn a_filled_block_holds_its_fill_until_a_byte_changes(
            blocks in 1usize..48,
            changed in proptest::option::of((0usize..768, 1u8..=255)),
            from_link in any::<bool>(),
        ) {
            let size = 16 * blocks;
            let mut buf = vec![0x5au8; size + 16];
            // SAFETY: the block lies in `buf`, 16-aligned or not (the checks read unaligned).
            unsafe {
                let block = buf.as_mut_ptr();
                fill(block, size);
                prop_assert_eq!(buf[size], 0x5a, "nothing past the block written");
                let from = if from_link { LINK } else { 0 };
                prop_assert!(intact(block, size, from, size));
                if let Some((at, delta)) = changed {
                    let at = at % size;
                    buf[at] = buf[at].wrapping_add(delta);
                    prop_assert_eq!(intact(buf.as_ptr(), size, from, size), at < from);
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod avx2_tests {
    use super::holds_avx2;
    use proptest::prelude::*;

    proptest! {
        /// The vectorised check says what a byte-by-byte look says, at any length, offset and
        /// fill, with any one byte changed or none.
        #[test]
        fn the_vectorised_check_agrees_with_a_plain_one(
            offset in 0usize..32,
            n in 32usize..700,
            fill in any::<u8>(),
            changed in proptest::option::of((0usize..700, 1u8..=255)),
        ) {
            prop_assume!(std::arch::is_x86_feature_detected!("avx2"));
            let mut buf = vec![fill; offset + n + 32];
            // Bytes just outside the range differ, so a read past either end would show.
            buf[offset + n] = !fill;
            if offset > 0 {
                buf[offset - 1] = !fill;
            }
            if let Some((at, delta)) = changed {
                if at < n {
                    buf[offset + at] = fill.wrapping_add(delta);
                }
            }
            let plain = buf[offset..offset + n].iter().all(|&b| b == fill);
            // SAFETY: the range lies in `buf`; the test runs only where AVX2 is.
            let vectorised = unsafe {
                if fill == 0 {
                    holds_avx2::<true>(buf.as_ptr().add(offset), n, 0)
                } else {
                    holds_avx2::<false>(buf.as_ptr().add(offset), n, fill)
                }
            };
            prop_assert_eq!(vectorised, plain);
        }
    }
}
