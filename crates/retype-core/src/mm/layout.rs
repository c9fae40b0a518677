//! The slabs a memory manager starts with.

use alloc::vec::Vec;
use core::fmt;

/// The slab sizes (log2 bytes) in the order the manager numbers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    bits: Vec<u32>,
}

/// Why a layout description was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError(pub alloc::string::String);

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl core::error::Error for LayoutError {}

impl Layout {
    /// The most slabs a layout has: far beyond any study, small enough to
    /// hold in memory, and every layout of so many slabs of at most 2^40
    /// bytes is placed below 2^64 by [`Layout::regions`].
    pub const MAX_SLABS: usize = 1 << 20;

    /// The evaluation's layout (seed 000, recovered from its logs): 22 slabs,
    /// 2,723,328 bytes, sorted by descending size as CantripOS sorts them.
    /// CantripOS also holds a 256-byte slab for static objects, not used here.
    pub fn cantrip() -> Layout {
        Layout {
            bits: alloc::vec![
                19, 19, 18, 18, 18, 17, 17, 17, 17, 16, 16, 16, 16, 15, 15, 14, 13, 12, 12, 11, 10,
                9
            ],
        }
    }

    /// `n` slabs: the evaluation's 22 sizes repeated, for scaling studies.
    pub fn cantrip_repeated(n: usize) -> Layout {
        let one = Layout::cantrip().bits;
        Layout {
            bits: one.iter().copied().cycle().take(n).collect(),
        }
    }

    /// Slabs of the given sizes in log2 bytes, kept in this order.
    pub fn from_bits(bits: Vec<u32>) -> Result<Layout, LayoutError> {
        if bits.is_empty() {
            return Err(LayoutError("a layout needs at least one slab".into()));
        }
        if bits.len() > Layout::MAX_SLABS {
            return Err(LayoutError(alloc::format!(
                "{} slabs are more than a layout holds ({})",
                bits.len(),
                Layout::MAX_SLABS
            )));
        }
        if let Some(b) = bits.iter().find(|&&b| !(4..=40).contains(&b)) {
            return Err(LayoutError(alloc::format!(
                "slab size 2^{b} is outside 2^4..=2^40 bytes"
            )));
        }
        Ok(Layout { bits })
    }

    /// Parses `cantrip`, `cantrip*K` (the layout repeated K times) or a
    /// comma-separated list of slab sizes in bytes, each a power of two.
    pub fn parse(s: &str) -> Result<Layout, LayoutError> {
        if s == "cantrip" {
            return Ok(Layout::cantrip());
        }
        if let Some(k) = s.strip_prefix("cantrip*") {
            let k: usize = k
                .parse()
                .ok()
                .filter(|&k| k >= 1)
                .ok_or_else(|| LayoutError(alloc::format!("bad repeat count in {s:?}")))?;
            let one = Layout::cantrip().bits;
            let n = one.len().checked_mul(k).filter(|&n| n <= Layout::MAX_SLABS);
            return n.map(Layout::cantrip_repeated).ok_or_else(|| {
                LayoutError(alloc::format!(
                    "{s:?} is more than {} slabs, the most a layout holds",
                    Layout::MAX_SLABS
                ))
            });
        }
        let bits = s
            .split(',')
            .map(|t| {
                let t = t.trim();
                match t.parse::<u64>() {
                    Ok(b) if b.is_power_of_two() => Ok(b.trailing_zeros()),
                    _ => Err(LayoutError(alloc::format!(
                        "slab size {t:?} is not a power of two in bytes"
                    ))),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Layout::from_bits(bits)
    }

    pub fn len(&self) -> usize {
        self.bits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    pub fn total_bytes(&self) -> u64 {
        self.bits.iter().map(|&b| 1u64 << b).sum()
    }

    /// `(base, bits)` of each slab: placed one after another from a base
    /// aligned to the largest, each aligned to its own size, as boot carves
    /// untypeds.
    pub fn regions(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let largest = self.bits.iter().copied().max().unwrap_or(0);
        let mut next = 1u64 << largest.max(28);
        self.bits.iter().map(move |&b| {
            let base = crate::untyped::align_up(next, b);
            next = base + (1u64 << b);
            (base, b)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cantrip_layout_has_the_evaluations_bytes() {
        let l = Layout::cantrip();
        assert_eq!((l.len(), l.total_bytes()), (22, 2_723_328));
        for (base, bits) in l.regions() {
            assert_eq!(base % (1 << bits), 0);
        }
        assert_eq!(Layout::parse("cantrip*3").unwrap().len(), 66);
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert!(Layout::parse("4096,3000").is_err());
        assert!(Layout::parse("").is_err());
        assert!(Layout::parse("cantrip*0").is_err());
        assert!(Layout::parse("8").is_err());
        assert_eq!(
            Layout::parse("4096, 512").unwrap(),
            Layout::from_bits(alloc::vec![12, 9]).unwrap()
        );
    }
}
