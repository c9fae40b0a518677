//! The memory that ever crossed this node's boundary.
//!
//! Barrelfish caches per capability whether copies, descendants or
//! ancestors may exist on other cores (§4.5.4). We keep the regions of every
//! capability this node sent or received instead: a capability has a
//! relation on another node only if some capability overlapping it crossed
//! this node's boundary (its copies, descendants and ancestors all overlap
//! it, and each reached the other node by a transfer from or to here, or by
//! a retype of something that did). A region is forgotten when no
//! capability here overlaps it any more: a capability that later overlaps
//! it here either arrives by a transfer, which adds its own region, or is
//! made from one that does. So the answer may be a stale "maybe" and never
//! a wrong "no", and the set holds no more than the node's capabilities.

use alloc::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Exported {
    /// Exact regions, as (base, end).
    exact: BTreeSet<(u64, u64)>,
    /// The same regions merged: start -> end, disjoint and not adjacent.
    cover: BTreeMap<u64, u64>,
}

impl Exported {
    pub fn add(&mut self, base: u64, size: u64) {
        let (mut lo, mut hi) = (base, base + size);
        if !self.exact.insert((lo, hi)) {
            return;
        }
        if let Some((&s, &e)) = self.cover.range(..=lo).next_back() {
            if e >= lo {
                lo = s;
                hi = hi.max(e);
            }
        }
        while let Some((&s, &e)) = self.cover.range(lo..=hi).next() {
            hi = hi.max(e);
            self.cover.remove(&s);
        }
        self.cover.insert(lo, hi);
    }

    /// Keeps the regions `keep` takes.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, u64) -> bool) {
        let before = self.exact.len();
        self.exact.retain(|&(b, e)| keep(b, e - b));
        if self.exact.len() == before {
            return;
        }
        let exact = core::mem::take(&mut self.exact);
        self.cover.clear();
        for (b, e) in exact {
            self.add(b, e - b);
        }
    }

    /// A capability with exactly this region crossed: copies may be elsewhere.
    pub fn contains(&self, base: u64, size: u64) -> bool {
        self.exact.contains(&(base, base + size))
    }

    /// Something over part of this region crossed: relations may be elsewhere.
    pub fn overlaps(&self, base: u64, size: u64) -> bool {
        let end = base + size;
        self.cover
            .range(..end)
            .next_back()
            .is_some_and(|(_, &e)| e > base)
    }

    /// Something strictly inside this region crossed.
    pub fn inside(&self, base: u64, size: u64) -> bool {
        let end = base + size;
        self.exact
            .range((base, 0)..(end, 0))
            .any(|&(b, e)| e <= end && (b, e) != (base, end))
    }

    /// Something strictly around this region crossed.
    pub fn around(&self, base: u64, size: u64) -> bool {
        let end = base + size;
        self.exact
            .range(..=(base, u64::MAX))
            .any(|&(b, e)| e >= end && (b, e) != (base, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_answers_like_a_list_of_regions() {
        let regions = [
            (0x1000, 0x1000),
            (0x3000, 0x2000),
            (0x2000, 0x1000),
            (0x8000, 0x100),
        ];
        let mut x = Exported::default();
        for &(b, s) in &regions {
            x.add(b, s);
        }
        x.add(0x1000, 0x1000);
        assert_eq!(x.cover.len(), 2, "{:?}", x.cover);
        for base in (0..0x9000).step_by(0x80) {
            for size in [0x80u64, 0x1000, 0x3000] {
                let over = regions
                    .iter()
                    .any(|&(b, s)| b < base + size && base < b + s);
                assert_eq!(x.overlaps(base, size), over, "{base:#x}+{size:#x}");
                let exact = regions.contains(&(base, size));
                assert_eq!(x.contains(base, size), exact);
                let inside = regions
                    .iter()
                    .any(|&(b, s)| b >= base && b + s <= base + size && (b, s) != (base, size));
                assert_eq!(x.inside(base, size), inside);
                let around = regions
                    .iter()
                    .any(|&(b, s)| b <= base && b + s >= base + size && (b, s) != (base, size));
                assert_eq!(x.around(base, size), around);
            }
        }
    }
}
