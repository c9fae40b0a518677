//! Canaries (`RETYPE_MALLOC_CANARY`, part of hardened mode): the bytes between the size asked
//! for and the end of a block hold values derived from a per-process random secret and the
//! block's address, checked when the block is freed or reallocated, so a write past the end,
//! by one byte or by many, stops the program there instead of corrupting a neighbour.
//!
//! A small or medium block keeps its last [`TAIL`] bytes for a tag: the size asked for and a
//! keyed check value, so the check needs no metadata beside the block and the tag cannot be
//! forged or shifted by an overflow without knowing the secret. The bytes between the size
//! and the tag are filled with a keyed pattern. A large block (whose header keeps its size)
//! has only the pattern, in the slack of its first and last pages.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::os;

/// Bytes at the end of a small or medium block taken by the tag.
pub(crate) const TAIL: usize = 8;

/// The per-process secret the canaries are derived from.
static SECRET: AtomicU64 = AtomicU64::new(0);

/// Draws the secret (once, at start-up): from `getrandom`, or if that fails from the clock
/// and the address space layout, which still differ from run to run.
pub(crate) fn init() {
    let mut secret = 0u64;
    // SAFETY: `secret` is valid for writes of its 8 bytes.
    let got = unsafe { libc::getrandom((&raw mut secret).cast(), 8, libc::GRND_NONBLOCK) };
    if got != 8 {
        secret = mix(os::now_ms() ^ (&raw const secret as u64));
    }
    SECRET.store(secret, Ordering::Relaxed);
}

/// A bijective 64-bit mixer (the splitmix64 finaliser).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fill pattern of the block at `block`, eight bytes placed by address. No byte is zero,
/// so a stray string terminator is caught too.
fn pattern(block: *const u8) -> u64 {
    mix(SECRET.load(Ordering::Relaxed) ^ block as u64) | 0x0101_0101_0101_0101
}

/// The tag of the block at `block` holding `size` bytes: the size in the low half, a check
/// value keyed by the secret, the address and the size in the high half.
fn tag(block: *const u8, size: usize) -> u64 {
    size as u64 | (mix(pattern(block) ^ size as u64) & !0xffff_ffff)
}

/// Fills `[from, to)` with the pattern of `block`.
unsafe fn fill(block: *const u8, from: *mut u8, to: *mut u8) {
    let bytes = pattern(block).to_le_bytes();
    let mut at = from;
    while at < to {
        // SAFETY: `at` lies in `[from, to)`, writable by the caller's contract.
        unsafe {
            at.write(bytes[at as usize & 7]);
            at = at.add(1);
        }
    }
}

/// The first byte of `[from, to)` that does not hold the pattern of `block`, if any.
unsafe fn first_broken(block: *const u8, from: *const u8, to: *const u8) -> Option<*const u8> {
    let bytes = pattern(block).to_le_bytes();
    let mut at = from;
    while at < to {
        // SAFETY: `at` lies in `[from, to)`, readable by the caller's contract.
        unsafe {
            if at.read() != bytes[at as usize & 7] {
                return Some(at);
            }
            at = at.add(1);
        }
    }
    None
}

/// Seals the small or medium block at `block` of `block_size` bytes, which holds `size`
/// bytes (at most `block_size - TAIL`): pattern after them, tag at the end.
pub(crate) unsafe fn seal(block: *mut u8, block_size: usize, size: usize) {
    // SAFETY: the block is the caller's, `block_size` bytes long; the tag is 8-aligned
    // because blocks and their sizes are multiples of 16.
    unsafe {
        let tail = block.add(block_size - TAIL);
        fill(block, block.add(size), tail);
        tail.cast::<u64>().write(tag(block, size));
    }
}

/// The size held by the sealed block at `block` of `block_size` bytes; aborts if anything
/// after that size was overwritten.
pub(crate) unsafe fn size(block: *const u8, block_size: usize) -> usize {
    // SAFETY: the caller's contract.
    match unsafe { intact(block, block_size) } {
        Some(size) => size,
        None => os::die("heap overflow (canary)", block, Some(block_size)),
    }
}

/// The size held by the sealed block at `block` of `block_size` bytes, or None if anything
/// after that size was overwritten.
pub(crate) unsafe fn intact(block: *const u8, block_size: usize) -> Option<usize> {
    // SAFETY: the block was sealed and is `block_size` bytes long.
    unsafe {
        let tail = block.add(block_size - TAIL);
        let word = tail.cast::<u64>().read();
        let size = (word & 0xffff_ffff) as usize;
        let sound = size <= block_size - TAIL
            && word == tag(block, size)
            && first_broken(block, block.add(size), tail).is_none();
        sound.then_some(size)
    }
}
/// Fills the freed block at `block`, `size` bytes (a multiple of 8), with its pattern, a word
/// at a time.
pub(crate) unsafe fn fill_words(block: *mut u8, size: usize) {
    let word = pattern(block);
    // SAFETY: the block is 8-aligned and `size` bytes long, the caller's to write.
    unsafe { core::slice::from_raw_parts_mut(block.cast::<u64>(), size / 8).fill(word) }
}

/// Whether the block filled by [`fill_words`] still holds its pattern.
pub(crate) unsafe fn words_intact(block: *const u8, size: usize) -> bool {
    let word = pattern(block);
    // SAFETY: as for `fill_words`; the block is read only.
    unsafe { core::slice::from_raw_parts(block.cast::<u64>(), size / 8) }
        .iter()
        .all(|&w| w == word)
}

/// Fills the slack `[from, to)` around the large block at `block` with its pattern.
pub(crate) unsafe fn fill_slack(block: *const u8, from: *mut u8, to: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { fill(block, from, to) }
}

/// Aborts if the slack `[from, to)` around the large block at `block` of `size` bytes lost
/// its pattern, naming an underflow if the broken byte lies before the block.
pub(crate) unsafe fn check_slack(block: *const u8, size: usize, from: *const u8, to: *const u8) {
    // SAFETY: the caller's contract.
    if let Some(at) = unsafe { first_broken(block, from, to) } {
        let what = if at < block {
            "heap underflow (canary)"
        } else {
            "heap overflow (canary)"
        };
        os::die(what, block, Some(size));
    }
}
