//! Canaries (`RETYPE_MALLOC_CANARY`, part of hardened mode): bytes after the size asked for
//! hold values derived from a per-process random secret and the block's address, checked
//! when the block is freed or reallocated, so a write past the end, by one byte or by many,
//! stops the program there instead of corrupting a neighbour.
//!
//! A small or medium block keeps its last [`TAIL`] bytes for a tag: the size asked for and a
//! keyed check value, so the check needs no metadata beside the block and the tag cannot be
//! forged or shifted by an overflow without knowing the secret. All the bytes between the
//! size and the tag hold a keyed pattern, so a write anywhere past the end inside the block,
//! next to it or further on, is caught when the block is freed. A large block (whose header
//! keeps its size) has only the pattern, in all the slack of its first and last pages.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::os;
use crate::secret;

/// Bytes at the end of a small or medium block taken by the tag.
pub(crate) const TAIL: usize = 8;

/// The fill pattern of the block at `block`, eight bytes placed by address. Every byte has
/// its high bit set ([`NOT_TEXT`]), so an overflow by text (a string terminator, a
/// character) is caught whatever the secret, not with 255 chances in 256: seven random bits
/// a byte, 56 a word, are left to keep it unforgeable.
fn pattern(block: *const u8) -> u64 {
    secret::keyed(block as u64) | NOT_TEXT
}

/// The high bit of every byte: a byte with it set is neither ASCII nor zero.
const NOT_TEXT: u64 = 0x8080_8080_8080_8080;

/// The tag of a block with pattern `pat` holding `size` bytes: the size in the low half; in
/// the high half the pattern's, changed by a multiple of the size, so that an overflow which
/// rewrites the size (the tag's first bytes) breaks the high half unless it knows the
/// pattern. One multiplication, independent of the pattern, so it costs no latency. Its top
/// byte, the one an underflow of the block after it reaches first, has its high bit set, as
/// the pattern's bytes have, so that an underflow by text is always caught.
fn tag(pat: u64, size: usize) -> u64 {
    size as u64 | ((pat ^ (size as u64).wrapping_mul(SPREAD)) & !0xffff_ffff) | 1 << 63
}

/// The odd constant [`tag`] spreads sizes with (64 bits of the golden ratio): no two sizes
/// of a block, nor [`FREE`] and [`LEFT`], share the high half of their multiples (a test
/// checks it).
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// Pattern `pat` as read by an unaligned 8-byte load at `at`: the pattern is placed by
/// address, so every load at `at + 8k` reads this same word.
fn pattern_at(pat: u64, at: *const u8) -> u64 {
    pat.rotate_right(8 * (at as usize & 7) as u32)
}

/// Fills `[from, to)` with pattern `pat`: whole words, the last of them ending at
/// `to` (overlapping the one before; the pattern is placed by address, so they agree), or
/// byte by byte if the range is shorter than a word.
unsafe fn fill(pat: u64, from: *mut u8, to: *mut u8) {
    let len = to as usize - from as usize;
    // SAFETY: every write lies in `[from, to)`, writable by the caller's contract.
    unsafe {
        if len < 8 {
            return fill_bytes(pat, from, to);
        }
        let word = pattern_at(pat, from);
        for i in 0..len / 8 {
            from.add(8 * i).cast::<u64>().write_unaligned(word);
        }
        let last = to.sub(8);
        last.cast::<u64>().write_unaligned(pattern_at(pat, last));
    }
}

/// Fills `[from, to)` with pattern `pat` byte by byte.
unsafe fn fill_bytes(pat: u64, from: *mut u8, to: *mut u8) {
    let bytes = pat.to_le_bytes();
    let mut at = from;
    while at < to {
        // SAFETY: `at` lies in `[from, to)`, writable by the caller's contract.
        unsafe { at.write(bytes[at as usize & 7]) };
        at = at.wrapping_add(1);
    }
}

/// The first byte of `[from, to)` that does not hold pattern `pat`, if any. Words
/// are compared 64 bytes at a time, with no early exit inside a run, so the compiler can
/// vectorise the common case: nothing broken; the last word ends at `to`, as in [`fill`].
/// Only a word that differs, or a range shorter than a word, is searched byte by byte.
unsafe fn first_broken(pat: u64, from: *const u8, to: *const u8) -> Option<*const u8> {
    let len = to as usize - from as usize;
    if len < 8 {
        // SAFETY: the caller's contract.
        return unsafe { first_broken_byte(pat, from, to) };
    }
    let expect = pattern_at(pat, from);
    let words = len / 8;
    // SAFETY: every read lies in `[from, to)`, readable by the caller's contract.
    let word = |i: usize| unsafe { from.add(8 * i).cast::<u64>().read_unaligned() };
    let mut i = 0;
    while i + 8 <= words && (i..i + 8).fold(0, |acc, k| acc | (word(k) ^ expect)) == 0 {
        i += 8;
    }
    while i < words && word(i) == expect {
        i += 1;
    }
    let at = if i < words {
        from.wrapping_add(8 * i)
    } else {
        to.wrapping_sub(8)
    };
    // SAFETY: `[at, at + 8)` lies in `[from, to)`.
    if i == words && unsafe { at.cast::<u64>().read_unaligned() } == pattern_at(pat, at) {
        return None;
    }
    // SAFETY: as above.
    unsafe { first_broken_byte(pat, at, at.add(8)) }
}

/// The first byte of `[from, to)` that does not hold pattern `pat`, byte by byte.
unsafe fn first_broken_byte(pat: u64, from: *const u8, to: *const u8) -> Option<*const u8> {
    let bytes = pat.to_le_bytes();
    let mut at = from;
    while at < to {
        // SAFETY: `at` lies in `[from, to)`, readable by the caller's contract.
        if unsafe { at.read() } != bytes[at as usize & 7] {
            return Some(at);
        }
        at = at.wrapping_add(1);
    }
    None
}

/// Hands out the free block at `block` of `block_size` bytes to hold `size` bytes (at most
/// `block_size - TAIL`): aborts unless it still has a free tag (an underflow of the block
/// after it, or a write after free into it, shows there; unless `tag_checked`, where the
/// caller's check of the block's fill read the tag), then seals it: pattern after the size,
/// live tag at the end.
pub(crate) unsafe fn seal(block: *mut u8, block_size: usize, size: usize, tag_checked: bool) {
    let pat = pattern(block);
    // SAFETY: the block is the caller's, `block_size` bytes long; the tag is 8-aligned
    // because blocks and their sizes are multiples of 16.
    unsafe {
        let tail = tail_word(block, block_size);
        if !tag_checked
            && !matches!(
                decode(tail.load(Ordering::Relaxed), pat, block_size),
                Tag::Free(_)
            )
        {
            os::die(
                "heap underflow or write after free (canary of a free block)",
                block,
                Some(block_size),
            );
        }
        fill(pat, block.add(size), block.add(block_size - TAIL));
        tail.store(tag(pat, size), Ordering::Relaxed);
    }
}

/// Checks the sealed block at `block` of `block_size` bytes, being freed, and tags it free:
/// aborts if it was free already (the tag is the block's liveness: swapped, so two threads
/// freeing it at once are caught too) or if anything after its size was overwritten.
pub(crate) unsafe fn unseal(block: *mut u8, block_size: usize) {
    let pat = pattern(block);
    // SAFETY: the caller's contract: the block is one of ours and `block_size` bytes long.
    unsafe {
        let old = tail_word(block, block_size).swap(tag(pat, FREE), Ordering::AcqRel);
        match decode(old, pat, block_size) {
            Tag::Live(_, size) if guard_intact(pat, block, block_size, size) => {}
            Tag::Free(_) => os::die("double free", block, None),
            _ => os::die("heap overflow (canary)", block, Some(block_size)),
        }
    }
}

/// The size held by the sealed block at `block` of `block_size` bytes; aborts if the block
/// is free or anything after that size was overwritten.
pub(crate) unsafe fn size(block: *const u8, block_size: usize) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        match read_tag(block, block_size) {
            Tag::Live(pat, size) if guard_intact(pat, block, block_size, size) => size,
            Tag::Free(_) => os::die("use after free", block, None),
            _ => os::die("heap overflow (canary)", block, Some(block_size)),
        }
    }
}

/// Whether the pattern after `size` bytes of the block at `block` of `block_size` bytes
/// (pattern `pat`), up to its tag, is intact: a pattern of up to 16 bytes, as the small
/// classes' is, by one or two words compared here (under 8 bytes, the word that ends at the
/// tag, its bytes before the pattern left out; else two, overlapping as its length asks); a
/// longer one by [`first_broken`].
#[inline(always)]
unsafe fn guard_intact(pat: u64, block: *const u8, block_size: usize, size: usize) -> bool {
    let (from, to) = (
        block.wrapping_add(size),
        block.wrapping_add(block_size - TAIL),
    );
    let len = to as usize - from as usize;
    // SAFETY: the caller's contract: the block is `block_size` bytes long and holds `size`;
    // the words lie in `[from, to)`, or for a short pattern in `[to - 8, to)`, inside the
    // block (16 bytes at least, its tag's 8 after `to`).
    unsafe {
        let word = |at: *const u8| at.cast::<u64>().read_unaligned() ^ pattern_at(pat, at);
        let last = to.sub(8);
        if len < 8 {
            // Little-endian: the pattern's `len` bytes are the word's high ones.
            return len == 0 || word(last) >> (8 * (8 - len)) == 0;
        }
        if len <= 16 {
            return word(from) | word(last) == 0;
        }
        first_broken(pat, from, to).is_none()
    }
}

/// What the tail of a block holds.
enum Tag {
    /// A live block's tag: its pattern and the size asked for.
    Live(u64, usize),
    /// A free block's tag: true for a block that left the quarantine unchecked but for its
    /// first word ([`LEFT`]).
    Free(bool),
    /// Neither: something overwrote it.
    Broken,
}

/// The size field of a free block's tag: no block holds that many bytes.
const FREE: usize = 0xffff_ffff;

/// The size field of the tag of a free block that left the quarantine with only its first
/// word checked: the rest of its fill is checked later, and a write found there is one made
/// while it was quarantined, or since (see `freed`).
const LEFT: usize = 0xffff_fffe;

/// The tag of the block at `block` of `block_size` bytes, its tail read once (another thread
/// may turn a free tag into a live one, or back, at any time; each store is whole).
unsafe fn read_tag(block: *const u8, block_size: usize) -> Tag {
    // SAFETY: the caller's contract.
    let word = unsafe { tail_word(block, block_size) }.load(Ordering::Relaxed);
    decode(word, pattern(block), block_size)
}

/// What `word`, the tail of a block of `block_size` bytes with pattern `pat`, holds.
fn decode(word: u64, pat: u64, block_size: usize) -> Tag {
    let size = (word & 0xffff_ffff) as usize;
    // `word == tag(pat, size)`, whose low halves agree by construction, by the high halves
    // alone; `LEFT` and `FREE` are the two largest sizes a tag holds.
    if (word ^ tag(pat, size)) >> 32 != 0 {
        Tag::Broken
    } else if size >= LEFT {
        Tag::Free(size == LEFT)
    } else if size <= block_size - TAIL {
        Tag::Live(pat, size)
    } else {
        Tag::Broken
    }
}

/// Tags the block at `block` of `block_size` bytes free as it is carved, so that the tail of
/// every block holds a sound tag, live or free, whatever the block's state: an underflow of
/// the block after it is caught either way.
pub(crate) unsafe fn seal_free(block: *const u8, block_size: usize) {
    // SAFETY: the caller's contract: the block is carved and not live.
    let tail = unsafe { tail_word(block, block_size) };
    tail.store(tag(pattern(block), FREE), Ordering::Relaxed);
}

/// If the block at `block` of `block_size` bytes has a free tag: whether it is [`LEFT`]'s.
pub(crate) unsafe fn free_tag(block: *const u8, block_size: usize) -> Option<bool> {
    // SAFETY: the caller's contract.
    match unsafe { read_tag(block, block_size) } {
        Tag::Free(left) => Some(left),
        _ => None,
    }
}

/// Tags the free block at `block` of `block_size` bytes, out of the quarantine with only its
/// first word checked, [`LEFT`]; false, and left as it is, if its tag was not [`FREE`]'s.
pub(crate) unsafe fn tag_left(block: *const u8, block_size: usize) -> bool {
    let pat = pattern(block);
    // SAFETY: the caller's contract: the block is free and ours.
    let tail = unsafe { tail_word(block, block_size) };
    let free = tail.load(Ordering::Relaxed) == tag(pat, FREE);
    if free {
        tail.store(tag(pat, LEFT), Ordering::Relaxed);
    }
    free
}

/// Whether the tail of the block at `block` of `block_size` bytes holds a sound tag, live or
/// free.
pub(crate) unsafe fn tag_sound(block: *const u8, block_size: usize) -> bool {
    // SAFETY: the caller's contract.
    !matches!(unsafe { read_tag(block, block_size) }, Tag::Broken)
}

/// The last word of the block at `block` of `block_size` bytes (a multiple of 16), where its
/// tag lives; atomic, because the owner reads the tag of a neighbour another thread frees.
unsafe fn tail_word<'a>(block: *const u8, block_size: usize) -> &'a AtomicU64 {
    let word = block
        .wrapping_add(block_size - TAIL)
        .cast::<u64>()
        .cast_mut();
    // SAFETY: the word is 8-aligned and in memory of ours that outlives the caller's use (a
    // page's first block has a tag before it, in a gap kept for it: see `page::gap`).
    unsafe { AtomicU64::from_ptr(word) }
}

/// Fills the slack `[from, to)` around the large block at `block` with its pattern.
pub(crate) unsafe fn fill_slack(block: *const u8, from: *mut u8, to: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { fill(pattern(block), from, to) }
}

/// Aborts if the slack `[from, to)` around the large block at `block` of `size` bytes lost
/// its pattern, naming an underflow if the broken byte lies before the block.
pub(crate) unsafe fn check_slack(block: *const u8, size: usize, from: *const u8, to: *const u8) {
    // SAFETY: the caller's contract.
    if let Some(at) = unsafe { first_broken(pattern(block), from, to) } {
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
    use super::{
        decode, fill, first_broken, guard_intact, pattern, tag, Tag, FREE, LEFT, SPREAD, TAIL,
    };
    use crate::size_class::MEDIUM_MAX;
    use proptest::prelude::*;

    /// What a tag holds, as a plain reading says: sound if the word is the tag of its own
    /// size; free if that size is `FREE` or `LEFT`; live if the block can hold it.
    fn plain_decode(word: u64, pat: u64, block_size: usize) -> (u8, bool, usize) {
        let size = (word & 0xffff_ffff) as usize;
        if word != tag(pat, size) {
            (0, false, 0)
        } else if size == FREE || size == LEFT {
            (1, size == LEFT, 0)
        } else if size <= block_size - TAIL {
            (2, false, size)
        } else {
            (0, false, 0)
        }
    }

    fn seen(t: Tag) -> (u8, bool, usize) {
        match t {
            Tag::Broken => (0, false, 0),
            Tag::Free(left) => (1, left, 0),
            Tag::Live(_, size) => (2, false, size),
        }
    }

    proptest! {
        /// `decode` reads every tag as the plain reading does: sound tags of any size, free
        /// or live, and the same with any bits flipped.
        #[test]
        fn decode_agrees_with_a_plain_reading(
            pat in any::<u64>(),
            blocks in 1usize..=(MEDIUM_MAX / 16),
            size in prop_oneof![Just(FREE), Just(LEFT), 0usize..=MEDIUM_MAX + 64, any::<u32>().prop_map(|s| s as usize)],
            flip in prop_oneof![Just(0u64), any::<u64>(), (0u32..64).prop_map(|b| 1u64 << b)],
        ) {
            let block_size = 16 * blocks;
            let word = tag(pat, size) ^ flip;
            prop_assert_eq!(seen(decode(word, pat, block_size)), plain_decode(word, pat, block_size));
        }
    }

    /// No two sizes a tag can hold (nor the free sizes) give the same high half, its top bit
    /// aside (the tag sets it), so a tag whose size was rewritten never reads as sound
    /// without the pattern.
    #[test]
    fn sizes_spread_apart() {
        let mut highs: Vec<u64> = (0..=MEDIUM_MAX as u64)
            .chain([FREE as u64, LEFT as u64])
            .map(|s| (s.wrapping_mul(SPREAD) >> 32) & 0x7fff_ffff)
            .collect();
        let n = highs.len();
        highs.sort_unstable();
        highs.dedup();
        assert_eq!(highs.len(), n);
    }

    /// The pattern after every size a block of the small classes holds (one or two words
    /// compared, or `first_broken`) is intact when filled, and broken by any one byte changed
    /// in it, not by one of the block's own.
    #[test]
    fn the_guard_check_finds_any_broken_byte() {
        let mut buf = [0u64; 12];
        let block = buf.as_mut_ptr().cast::<u8>();
        let pat = pattern(block);
        for block_size in [16, 32, 48, 64, 80] {
            for size in 1..=block_size - TAIL {
                // SAFETY: the block lies inside `buf`.
                unsafe {
                    let (from, to) = (block.add(size), block.add(block_size - TAIL));
                    fill(pat, from, to);
                    assert!(
                        guard_intact(pat, block, block_size, size),
                        "{block_size} {size}"
                    );
                    for at in size..block_size - TAIL {
                        let byte = block.add(at);
                        byte.write(!byte.read());
                        let broken = !guard_intact(pat, block, block_size, size);
                        byte.write(!byte.read());
                        assert!(broken, "{block_size} {size} {at}");
                    }
                    // The block's own bytes are not the pattern's.
                    for at in 0..size {
                        let byte = block.add(at);
                        byte.write(!byte.read());
                        let intact = guard_intact(pat, block, block_size, size);
                        byte.write(!byte.read());
                        assert!(intact, "{block_size} {size} {at}");
                    }
                }
            }
        }
    }

    /// A text byte (ASCII or zero) written over the first byte past the size, or over the
    /// top byte of a tag (where an underflow of the next block lands), is caught whatever the
    /// block's address: no pattern or tag byte there is text.
    #[test]
    fn an_overflow_or_underflow_by_text_is_always_caught() {
        let mut buf = [0u64; 8];
        let block = buf.as_mut_ptr().cast::<u8>();
        for shift in 0..64 {
            let pat = pattern((16usize << shift) as *const u8);
            for size in [8, 9, 12, 15] {
                let top = tag(pat, size).to_le_bytes()[7];
                assert!(top >= 0x80, "{shift} {size} {top:#x}");
                // SAFETY: the block, 32 bytes, lies inside `buf`.
                unsafe {
                    fill(pat, block.add(size), block.add(32 - TAIL));
                    for text in 0..0x80 {
                        let old = block.add(size).read();
                        block.add(size).write(text);
                        assert!(!guard_intact(pat, block, 32, size), "{shift} {size} {text}");
                        block.add(size).write(old);
                    }
                }
            }
        }
    }

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
                fill(pattern(block), f, t);
                assert_eq!(first_broken(pattern(block), f, t), None, "{from}..{to}");
                for i in from..to {
                    let at = base.add(i);
                    let old = at.read();
                    at.write(!old);
                    assert_eq!(
                        first_broken(pattern(block), f, t),
                        Some(at.cast_const()),
                        "{i}"
                    );
                    at.write(old);
                }
            }
        }
    }
}
