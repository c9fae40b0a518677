//! Size classes: multiples of 16 bytes up to 256, then eight classes per doubling up to
//! [`MEDIUM_MAX`], so internal waste stays below 12.5 % above 128 bytes. Larger requests are
//! "large" objects mapped straight from the OS.
//!
//! A class is numbered by its block size over 16 up to 1 KiB (so numbers between two classes
//! above 256 bytes name no class), then 65 onwards. malloc's fast path indexes a heap's
//! pages by a *slot*: `(size + 15) / 16` up to 1 KiB, which needs no lookup, and the class
//! above; the slots of sizes one class serves all point at its page.

use core::ops::RangeInclusive;

use crate::consts::SLICE_SIZE;

/// Largest size served by the `(size + 15) / 16` fast lookup.
pub const SMALL_FAST_MAX: usize = 1024;
/// Largest object served from segment pages; beyond this objects are mapped on their own.
pub const MEDIUM_MAX: usize = 128 * 1024;
/// Bound on class and slot numbers; class 0 is never used (size 0 is served as class 1).
pub const CLASSES: usize = 121;

/// Bytes between the block sizes of neighbouring classes up to 1 KiB, around `size`. Fewer
/// classes above 256 bytes: with a class every 16 bytes, each of the 32 classes from 512
/// bytes to 1 KiB held a page or two that random sizes filled to different heights (`churn
/// 1 1024 50`: peak RSS 5.9 MiB, mimalloc's 4.9; 5.2 with these).
const fn small_step(size: usize) -> usize {
    if size <= 256 {
        16
    } else if size <= 512 {
        32
    } else {
        64
    }
}

/// Per slot up to 1 KiB, the class serving it (slot 0, size 0, is served as class 1).
static SMALL: [u8; SMALL_FAST_MAX / 16 + 1] = {
    let mut t = [1u8; SMALL_FAST_MAX / 16 + 1];
    let mut slot = 1;
    while slot <= SMALL_FAST_MAX / 16 {
        let size = slot * 16;
        let step = small_step(size);
        t[slot] = (size.div_ceil(step) * step / 16) as u8;
        slot += 1;
    }
    t
};

/// Whether `class` is a class (some size maps to it): class numbers between two classes
/// above 256 bytes name none.
pub fn is_class(class: usize) -> bool {
    match class {
        0 => false,
        1..=64 => SMALL[class] as usize == class,
        _ => class < CLASSES,
    }
}

/// The slots whose mallocs `class` serves: the fast path finds its page at each of them.
/// Slot 0 (size 0) is none: it takes the slow path, as zero-size blocks may be special.
pub fn slots(class: usize) -> RangeInclusive<usize> {
    if class > 64 {
        return class..=class;
    }
    (class + 1 - small_step(class * 16) / 16).max(1)..=class
}

/// The class serving `size` bytes (`size ≤ MEDIUM_MAX`), by table: above 1 KiB classes are
/// at least 128 bytes apart, so `(size + 127) / 128` names one class (`churn 1 32768 1`:
/// eight instructions fewer a malloc than the arithmetic of `medium_class_of`).
#[inline]
pub const fn class_of(size: usize) -> usize {
    if size <= SMALL_FAST_MAX {
        return SMALL[(size + 15) >> 4] as usize;
    }
    MEDIUM[(size + 127) >> 7] as usize
}

/// Per 128 bytes up to [`MEDIUM_MAX`], the class serving sizes above 1 KiB up to there.
static MEDIUM: [u8; MEDIUM_MAX / 128 + 1] = {
    let mut t = [0u8; MEDIUM_MAX / 128 + 1];
    let mut i = SMALL_FAST_MAX / 128 + 1;
    while i < t.len() {
        t[i] = medium_class_of(i * 128) as u8;
        i += 1;
    }
    t
};

/// The class serving `size` bytes, above 1 KiB: eight per doubling.
const fn medium_class_of(size: usize) -> usize {
    let x = size - 1;
    let lg = (usize::BITS - 1 - x.leading_zeros()) as usize;
    let sub = (x >> (lg - 3)) & 7;
    65 + (lg - 10) * 8 + sub
}

/// The block size of class `class`.
#[inline]
pub const fn block_size(class: usize) -> usize {
    if class <= 64 {
        return class * 16;
    }
    let g = (class - 65) / 8;
    let sub = (class - 65) % 8;
    (9 + sub) << (7 + g)
}

/// Per class, `2^64 / block_size + 1` (0 for class 0), the multiplier [`index_of`] divides by
/// (`ceil(2^64 / block_size)`, as [`divides`] needs it: block sizes are no powers of two but
/// 16 to 1 KiB, whose multiplier is exact anyway).
static RECIPROCALS: [u64; CLASSES] = {
    let mut r = [0; CLASSES];
    let mut class = 1;
    while class < CLASSES {
        r[class] = u64::MAX / block_size(class) as u64 + 1;
        class += 1;
    }
    r
};

/// `offset / block_size(class)` by a multiplication instead of a division (which takes
/// tens of cycles; hardened mode needs one on every malloc and free). Exact for offsets
/// below 2^40: the multiplier exceeds `2^64 / block_size` by less than 1, so the error
/// `offset * (that excess) / 2^64` stays below one block's share of a unit.
#[inline]
pub fn index_of(offset: usize, class: usize) -> usize {
    debug_assert!(offset < 1 << 40 && (1..CLASSES).contains(&class));
    ((offset as u128 * RECIPROCALS[class] as u128) >> 64) as usize
}

/// The multiplier of `class` (`ceil(2^64 / block_size)`) that [`divides`] takes; 0 for a
/// number that is no class.
#[inline]
pub fn reciprocal(class: usize) -> u64 {
    RECIPROCALS.get(class).map_or(0, |&c| c)
}

/// Whether `offset` (below 2^32) is a multiple of the block size whose [`reciprocal`] is `c`:
/// the low 64 bits of `offset * c`, `c = ceil(2^64 / block_size)`, are below `c` exactly then
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019): one
/// multiplication and a compare, where [`index_of`] takes a wide multiplication and a
/// multiplication back. False for every offset when `c` is 0.
#[inline(always)]
pub fn divides(offset: usize, c: u64) -> bool {
    debug_assert!(offset < 1 << 32);
    (offset as u64).wrapping_mul(c) < c
}

/// Pages of a class a heap holds from which its next page is a larger one.
pub const BUSY_PAGES: u32 = 8;
/// Pages of a class of 257 bytes to 1 KiB a heap holds from which its next page spans two
/// slices.
pub const SMALL_BUSY_PAGES: u32 = 4;

/// How many 64 KiB slices a page of this class spans when the heap holds `held` pages of it:
/// the smallest power of two that holds eight blocks, or sixteen from [`BUSY_PAGES`] on, at
/// most 8 (1 up to 4 KiB blocks, 8 from 32 KiB, which get four to sixteen); and for a class
/// of 257 bytes to 1 KiB, two from [`SMALL_BUSY_PAGES`] on. A class used
/// by a few objects does not pin a large page, and a page of a class in heavy use does not
/// flip between full and not full on every few mallocs and frees: with four 16 KiB blocks a
/// page `churn 1 32768 10` took 0.37 s and 72 MiB, with eight 0.23 s and 35 MiB (on an AMD
/// VM); on an Intel VM eight took 0.38 s and 35 MiB, sixteen from the eighth page of a class
/// 0.32 s and 30 MiB, sixteen always 0.30 s and 27 MiB but `rptest 2 2000 1000` 17 % more
/// memory (its larger classes hold few blocks each). Eight classes per doubling from 256
/// bytes gave each of those classes more blocks than a page holds, so more pages that turn
/// full and back: with pages of two slices from the fourth, `churn 1 1024 50` 0.265 -> 0.257
/// s (tcmalloc 0.281) for 5.2 -> 5.5 MiB (seven alternated pairs). (Not below 257
/// bytes: hardened mode's liveness bitmap holds a slice's worth of 16-byte blocks a page.)
#[inline]
pub fn span_of(class: usize, held: u32) -> usize {
    let blocks = if held >= BUSY_PAGES { 16 } else { 8 };
    let span = (blocks * block_size(class))
        .div_ceil(SLICE_SIZE)
        .next_power_of_two()
        .min(8);
    if held >= SMALL_BUSY_PAGES && (257..=SMALL_FAST_MAX).contains(&block_size(class)) {
        span.max(2)
    } else {
        span
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_gets_the_smallest_fitting_class() {
        assert_eq!(block_size(CLASSES - 1), MEDIUM_MAX);
        for size in 0..=MEDIUM_MAX {
            let c = class_of(size);
            assert!(is_class(c), "size {size} class {c}");
            assert!(block_size(c) >= size.max(1), "size {size}");
            if let Some(below) = (1..c).rev().find(|&b| is_class(b)) {
                assert!(
                    block_size(below) < size,
                    "size {size} could use class {below}"
                );
            }
        }
    }

    /// A class of 257 bytes to 1 KiB gets pages of two slices once the heap holds four of
    /// it; others keep their spans until the eighth.
    #[test]
    fn busy_small_classes_get_two_slices() {
        let small = class_of(1024);
        assert_eq!(span_of(small, SMALL_BUSY_PAGES - 1), 1);
        assert_eq!(span_of(small, SMALL_BUSY_PAGES), 2);
        for size in [256, 4096] {
            let c = class_of(size);
            assert_eq!(span_of(c, SMALL_BUSY_PAGES), span_of(c, 0), "{size}");
        }
    }

    /// The fast path of a size up to 1 KiB finds its class's page at its slot.
    #[test]
    fn every_slot_belongs_to_the_class_of_its_sizes() {
        for size in 1..=SMALL_FAST_MAX {
            assert!(
                slots(class_of(size)).contains(&((size + 15) >> 4)),
                "size {size}"
            );
        }
        for c in (1..=64).filter(|&c| is_class(c)) {
            for slot in slots(c) {
                assert_eq!(class_of(slot * 16), c, "slot {slot}");
            }
        }
        assert_eq!(
            (1..CLASSES).filter(|&c| is_class(c)).count(),
            16 + 8 + 8 + 56
        );
    }

    #[test]
    fn pages_hold_at_least_four_blocks_in_at_most_eight_slices() {
        for c in 1..CLASSES {
            for held in [0, SMALL_BUSY_PAGES, BUSY_PAGES] {
                let span = span_of(c, held);
                assert!(span.is_power_of_two() && span <= 8, "class {c} span {span}");
                assert!(span * SLICE_SIZE >= 4 * block_size(c));
                assert!(span >= span_of(c, 0), "busy classes get no smaller pages");
            }
        }
    }

    /// The multiplication gives the quotient at every block boundary, either side of it, of
    /// the largest page of each class and far beyond.
    #[test]
    fn index_of_divides() {
        for c in 1..CLASSES {
            let bs = block_size(c);
            let far = (1usize << 40) / bs;
            for n in (0..=8 * SLICE_SIZE / bs + 1).chain(far - 2..far) {
                for off in [n * bs, n * bs + 1, (n + 1) * bs - 1] {
                    assert_eq!(index_of(off, c), off / bs, "class {c} offset {off}");
                }
            }
        }
    }

    /// The divisibility test agrees with the remainder at and either side of every block
    /// boundary within a segment, for each class number; a byte that is none divides nothing.
    #[test]
    fn divides_agrees_with_the_remainder() {
        for c in 0..=u8::MAX {
            let bs = (1..CLASSES)
                .contains(&(c as usize))
                .then(|| block_size(c as usize));
            let step = bs.unwrap_or(16);
            for n in 0..=(1 << 21) / step + 1 {
                for off in [n * step, n * step + 1, (n + 1) * step - 1] {
                    let want = bs.is_some_and(|bs| off % bs == 0);
                    assert_eq!(
                        divides(off, reciprocal(c as usize)),
                        want,
                        "class {c} offset {off}"
                    );
                }
            }
        }
    }

    #[test]
    fn waste_is_bounded() {
        for size in 129..=MEDIUM_MAX {
            let b = block_size(class_of(size));
            assert!((b - size) * 8 <= size, "size {size} block {b}");
            assert_eq!(b % 16, 0);
        }
    }
}
