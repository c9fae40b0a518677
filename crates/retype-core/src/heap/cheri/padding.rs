//! What exact bounds cost: the length and alignment CHERI Concentrate needs
//! for a request ([`exact_bounds`]) and the padding and realignment counted by
//! size range ([`Padding`]), as the CHERI heaps and `retype study cheri`
//! report them.

use crate::cheri::{representable_alignment_mask, representable_length, Format};

/// The smallest bounds that hold a request exactly in a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactBounds {
    /// CRRL of the request: at least the request, exactly representable.
    pub length: u64,
    /// The alignment a base needs for bounds of that length to be exact
    /// (from CRAM); 1 for lengths that need none.
    pub alignment: u64,
}

impl ExactBounds {
    /// Bytes added to the request.
    pub fn padding(&self, size: u64) -> u64 {
        self.length - size
    }
}

/// The bounds `size` bytes need in `format`; `None` beyond the address space.
pub fn exact_bounds(format: Format, size: u64) -> Option<ExactBounds> {
    let size = u128::from(size);
    if size > format.max_top() {
        return None;
    }
    let length = u64::try_from(representable_length(format, size)).ok()?;
    let mask = representable_alignment_mask(format, size);
    let alignment = u64::try_from((u128::from(!mask & format.max_address())) + 1).ok()?;
    Some(ExactBounds { length, alignment })
}

/// A band of request sizes, as reports group them: the bands part where the
/// formats start to round (RV32 from 64 B, RV64 from 4 KiB, Morello from 16 KiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SizeRange(usize);

/// The lower end of each band.
const LOWER: [u64; 8] = [0, 64, 256, 4 << 10, 16 << 10, 64 << 10, 1 << 20, 16 << 20];
const LABELS: [&str; 8] = [
    "0-63 B",
    "64-255 B",
    "256 B-4 KiB",
    "4-16 KiB",
    "16-64 KiB",
    "64 KiB-1 MiB",
    "1-16 MiB",
    "16 MiB+",
];

/// How many bands there are.
pub const SIZE_RANGES: usize = LOWER.len();

impl SizeRange {
    /// Every band, smallest first.
    pub fn all() -> impl Iterator<Item = SizeRange> {
        (0..SIZE_RANGES).map(SizeRange)
    }

    /// The band of `size`.
    pub fn of(size: u64) -> SizeRange {
        SizeRange(LOWER.partition_point(|&l| l <= size) - 1)
    }

    /// Position among [`SizeRange::all`].
    pub fn index(self) -> usize {
        self.0
    }

    /// The smallest size in the band.
    pub fn lower(self) -> u64 {
        LOWER[self.0]
    }

    /// How tables name the band (`256 B-4 KiB`).
    pub fn label(self) -> &'static str {
        LABELS[self.0]
    }
}

/// Requests of one band and what their exact bounds cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rounding {
    pub requests: u64,
    /// Requests whose length had to grow (CRRL above the size).
    pub rounded: u64,
    /// Requests whose base needed more alignment than they asked for.
    pub realigned: u64,
    /// Bytes requested, and bytes added to them.
    pub requested: u64,
    pub padding: u64,
}

impl Rounding {
    /// Requests held exactly without padding.
    pub fn exact(&self) -> u64 {
        self.requests - self.rounded
    }

    /// Adds another count to this one.
    pub fn add(&mut self, other: &Rounding) {
        self.requests += other.requests;
        self.rounded += other.rounded;
        self.realigned += other.realigned;
        self.requested += other.requested;
        self.padding += other.padding;
    }
}

/// Padding and realignment of every request of a run, by size range, and
/// the padding live in blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Padding {
    pub by_range: [Rounding; SIZE_RANGES],
    /// Padding in the blocks live now.
    pub live: u64,
    /// Padding live when the heap last grew: the part of the heap's size
    /// that padding explains.
    pub at_high_water: u64,
}

impl Padding {
    /// Counts `count` requests of `size` bytes aligned to `align` given `bounds`.
    pub fn record(&mut self, size: u64, align: u64, bounds: &ExactBounds, count: u64) {
        let r = &mut self.by_range[SizeRange::of(size).index()];
        let padding = bounds.padding(size);
        r.requests += count;
        r.rounded += count * u64::from(padding > 0);
        r.realigned += count * u64::from(bounds.alignment > align);
        r.requested += count * size;
        r.padding += count * padding;
    }

    /// Every band together.
    pub fn total(&self) -> Rounding {
        let mut t = Rounding::default();
        for r in &self.by_range {
            t.add(r);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_cover_every_size_once() {
        let ranges: alloc::vec::Vec<_> = SizeRange::all().collect();
        assert_eq!(ranges.len(), SIZE_RANGES);
        for r in &ranges {
            assert_eq!(SizeRange::of(r.lower()), *r);
            if r.index() > 0 {
                assert_eq!(SizeRange::of(r.lower() - 1).index(), r.index() - 1);
            }
        }
        assert_eq!(SizeRange::of(u64::MAX).index(), SIZE_RANGES - 1);
    }

    #[test]
    fn exact_bounds_agree_with_set_bounds() {
        use crate::cheri::Capability;
        for &format in Format::ALL {
            for size in [0u64, 1, 255, 4095, 4097, 16_385, 200_000, 3 << 20] {
                let b = exact_bounds(format, size).unwrap();
                assert!(b.length >= size && b.alignment.is_power_of_two());
                let base = 64 * b.alignment;
                let cap = Capability::root(format).set_address(base);
                assert!(
                    cap.set_bounds_exact(b.length.into()).is_ok(),
                    "{format}: {size} bytes as {b:?}"
                );
                if b.alignment > 1 {
                    let off = cap.set_address(base + b.alignment / 2);
                    assert!(off.set_bounds_exact(b.length.into()).is_err());
                }
            }
        }
    }
}
