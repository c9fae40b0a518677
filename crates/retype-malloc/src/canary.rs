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

/// Fills `[from, to)` with the pattern of `block`: bytes up to a word boundary, then whole
/// words, then the bytes left.
unsafe fn fill(block: *const u8, from: *mut u8, to: *mut u8) {
    let word = pattern(block);
    let bytes = word.to_le_bytes();
    let mut at = from;
    // SAFETY: every write lies in `[from, to)`, writable by the caller's contract; the words
    // written are 8-aligned.
    unsafe {
        while at < to && !(at as usize).is_multiple_of(8) {
            at.write(bytes[at as usize & 7]);
            at = at.add(1);
        }
        if at < to {
            let words = (to as usize - at as usize) / 8;
            core::slice::from_raw_parts_mut(at.cast::<u64>(), words).fill(word);
            at = at.add(words * 8);
        }
        while at < to {
            at.write(bytes[at as usize & 7]);
            at = at.add(1);
        }
    }
}

/// The first byte of `[from, to)` that does not hold the pattern of `block`, if any. Words
/// are compared 64 bytes at a time, with no early exit inside a run, so the compiler can
/// vectorise the common case: nothing broken.
unsafe fn first_broken(block: *const u8, from: *const u8, to: *const u8) -> Option<*const u8> {
    let word = pattern(block);
    let bytes = word.to_le_bytes();
    let byte_at = |at: *const u8| bytes[at as usize & 7];
    let mut at = from;
    // SAFETY: every read lies in `[from, to)`, readable by the caller's contract; the words
    // read are 8-aligned.
    unsafe {
        while at < to && !(at as usize).is_multiple_of(8) {
            if at.read() != byte_at(at) {
                return Some(at);
            }
            at = at.add(1);
        }
        if at < to {
            let words = at.cast::<u64>();
            let n = (to as usize - at as usize) / 8;
            let mut i = 0;
            while i + 8 <= n {
                let run = &*words.add(i).cast::<[u64; 8]>();
                if run.iter().fold(0, |acc, &w| acc | (w ^ word)) != 0 {
                    break;
                }
                i += 8;
            }
            while i < n && *words.add(i) == word {
                i += 1;
            }
            // The byte loop below finds the broken byte, if any, or checks the bytes left.
            at = at.add(i * 8);
        }
        while at < to {
            if at.read() != byte_at(at) {
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
/// Fills the freed block at `block`, `size` bytes, with its pattern.
pub(crate) unsafe fn fill_block(block: *mut u8, size: usize) {
    // SAFETY: the block is the caller's to write.
    unsafe { fill(block, block, block.add(size)) }
}

/// Whether the block filled by [`fill_block`] still holds its pattern.
pub(crate) unsafe fn block_intact(block: *const u8, size: usize) -> bool {
    // SAFETY: the block is the caller's to read.
    unsafe { first_broken(block, block, block.add(size)).is_none() }
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

#[cfg(test)]
mod tests {
    use super::{fill, first_broken};

    /// Filling and checking at any alignment and length find exactly the byte overwritten.
    #[test]
    fn the_check_finds_any_broken_byte() {
        let mut buf = [0u64; 40];
        let base = buf.as_mut_ptr().cast::<u8>();
        let block = base.wrapping_add(64);
        for (from, to) in [(0, 320), (3, 150), (5, 13), (8, 9), (1, 1), (7, 300)] {
            // SAFETY: every range lies inside `buf`.
            unsafe {
                let (f, t) = (base.add(from), base.add(to));
                fill(block, f, t);
                assert_eq!(first_broken(block, f, t), None, "{from}..{to}");
                for i in from..to {
                    let at = base.add(i);
                    let old = at.read();
                    at.write(!old);
                    assert_eq!(first_broken(block, f, t), Some(at.cast_const()), "{i}");
                    at.write(old);
                }
            }
        }
    }
}
