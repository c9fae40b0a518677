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
use alloc::vec::Vec;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Exported {
    /// Exact regions, as (base, end).
    exact: BTreeSet<(u64, u64)>,
    /// The same regions merged: start -> end, disjoint and not adjacent.
    cover: BTreeMap<u64, u64>,
}

impl Exported {
    pub fn add(&mut self, base: u64, size: u64) {
        if self.exact.insert((base, base + size)) {
            self.merge(base, base + size);
        }
    }

    /// Merges `[lo, hi)` into the cover.
    fn merge(&mut self, mut lo: u64, mut hi: u64) {
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

    /// Of the regions that overlap `[base, base + size)`, keeps those
    /// `keep` takes; the others it is not asked about. A delete forgets
    /// through this, so what it visits is what overlaps the capability, not
    /// every region that ever crossed (node 0 holds one per other node's
    /// root CNode from boot on).
    pub fn retain_overlapping(
        &mut self,
        base: u64,
        size: u64,
        mut keep: impl FnMut(u64, u64) -> bool,
    ) {
        let end = base + size;
        // The merged segments that overlap the range, last first; each
        // exact region lies inside one segment.
        let segments: Vec<(u64, u64)> = self
            .cover
            .range(..end)
            .rev()
            .take_while(|&(_, &e)| e > base)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (lo, hi) in segments {
            let gone: Vec<(u64, u64)> = self
                .exact
                .range((lo, 0)..(end.min(hi), 0))
                .filter(|&&(b, e)| e > base && !keep(b, e - b))
                .copied()
                .collect();
            if gone.is_empty() {
                continue;
            }
            for r in &gone {
                self.exact.remove(r);
            }
            self.cover.remove(&lo);
            let rest: Vec<(u64, u64)> = self.exact.range((lo, 0)..(hi, 0)).copied().collect();
            for (b, e) in rest {
                self.merge(b, e);
            }
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
    use proptest::prelude::*;

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

    /// Page-aligned regions of 1 to 4 pages in the first 32 pages.
    fn region() -> impl Strategy<Value = (u64, u64)> {
        (0u64..32, 1u64..=4).prop_map(|(p, n)| (p << 12, n << 12))
    }

    proptest! {
        /// Forgetting through `retain_overlapping` leaves what a list of
        /// regions would keep, asks only about overlapping regions, and
        /// leaves the cover as merging the rest from scratch would.
        #[test]
        fn retain_overlapping_keeps_what_a_list_keeps(
            regions in proptest::collection::vec(region(), 0..12),
            (base, size) in region(),
            drop_mask: u32,
        ) {
            let mut x = Exported::default();
            for &(b, s) in &regions {
                x.add(b, s);
            }
            let mut list: Vec<(u64, u64)> = x.exact.iter().map(|&(b, e)| (b, e - b)).collect();
            // The list's i-th region goes if bit i of the mask is set.
            let dropped = |b: u64, s: u64| {
                let i = list_index(&regions, b, s);
                drop_mask >> (i % 32) & 1 == 1
            };
            let overlaps = |b: u64, s: u64| b < base + size && base < b + s;
            let overlapping = list.iter().filter(|&&(b, s)| overlaps(b, s)).count();
            let mut asked = 0;
            x.retain_overlapping(base, size, |b, s| {
                asked += 1;
                assert!(overlaps(b, s), "asked about {b:#x}+{s:#x}");
                !dropped(b, s)
            });
            list.retain(|&(b, s)| !(overlaps(b, s) && dropped(b, s)));
            prop_assert_eq!(asked, overlapping);
            let kept: Vec<(u64, u64)> = x.exact.iter().map(|&(b, e)| (b, e - b)).collect();
            prop_assert_eq!(&kept, &list);
            let mut fresh = Exported::default();
            for &(b, s) in &list {
                fresh.add(b, s);
            }
            prop_assert_eq!(&x.cover, &fresh.cover);
        }
    }

    /// The first index of `(b, s)` among `regions`.
    fn list_index(regions: &[(u64, u64)], b: u64, s: u64) -> usize {
        regions
            .iter()
            .position(|&r| r == (b, s))
            .expect("a region added")
    }

    /// Node 0 holds a region per other node's root CNode: forgetting a
    /// capability elsewhere visits none of them, whatever their number.
    #[test]
    fn forgetting_visits_only_overlapping_regions() {
        for nodes in [3u64, 16, 64] {
            let mut x = Exported::default();
            for k in 1..nodes {
                x.add(0x100_0000 + k * 0x1000, 0x1000);
            }
            let mut asked = 0;
            x.retain_overlapping(0x2000, 0x1000, |_, _| {
                asked += 1;
                false
            });
            assert_eq!(asked, 0, "{nodes} nodes, a capability outside them");
            x.retain_overlapping(0x100_1000, 0x1000, |_, _| {
                asked += 1;
                false
            });
            assert_eq!(asked, 1, "{nodes} nodes, a capability over one region");
            assert_eq!(x.exact.len() as u64, nodes - 2);
            assert!(!x.overlaps(0x100_1000, 0x1000));
            assert!(x.overlaps(0x100_2000, 0x1000));
        }
    }
}
