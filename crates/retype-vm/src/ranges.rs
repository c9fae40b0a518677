//! A set of window offsets kept as sorted, disjoint, merged ranges: which
//! parts of the window are registered for minor faults, so that a range is
//! registered once, not at every protection change.

use std::ops::Range;

#[derive(Debug, Default)]
pub struct Ranges {
    runs: Vec<Range<u64>>,
}

impl Ranges {
    /// Whether every offset of `r` is in the set.
    pub fn covers(&self, r: &Range<u64>) -> bool {
        let i = self.runs.partition_point(|x| x.end <= r.start);
        self.runs
            .get(i)
            .is_some_and(|x| x.start <= r.start && r.end <= x.end)
    }

    /// Whether some offset of `r` is in the set.
    pub fn intersects(&self, r: &Range<u64>) -> bool {
        let i = self.runs.partition_point(|x| x.end <= r.start);
        !r.is_empty() && self.runs.get(i).is_some_and(|x| x.start < r.end)
    }

    /// Adds `r`, merging it with the runs it touches.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let i = self.runs.partition_point(|x| x.end < r.start);
        let j = self.runs.partition_point(|x| x.start <= r.end);
        let (mut start, mut end) = (r.start, r.end);
        if i < j {
            start = start.min(self.runs[i].start);
            end = end.max(self.runs[j - 1].end);
        }
        self.runs.splice(i..j, std::iter::once(start..end));
    }

    /// Removes `r`, cutting the runs it overlaps.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let i = self.runs.partition_point(|x| x.end <= r.start);
        let j = self.runs.partition_point(|x| x.start < r.end);
        if i >= j {
            return;
        }
        let (first, last) = (self.runs[i].clone(), self.runs[j - 1].clone());
        let kept = [first.start..r.start, r.end..last.end];
        self.runs
            .splice(i..j, kept.into_iter().filter(|k| k.start < k.end));
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Against a set of single offsets: the same membership after any
        /// sequence, and runs that stay sorted, disjoint and merged.
        #[test]
        fn ranges_agree_with_a_set_of_offsets(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u64..40, 0u64..12), 1..40),
        ) {
            let mut set = Ranges::default();
            let mut model = [false; 64];
            for (add, start, len) in ops {
                let r = start..start + len;
                if add {
                    set.insert(r.clone());
                } else {
                    set.remove(r.clone());
                }
                r.clone().for_each(|o| model[o as usize] = add);
                let covered = (r.start..r.end).all(|o| model[o as usize]);
                proptest::prop_assert!(len == 0 || set.covers(&r) == covered);
                let some = (r.start..r.end).any(|o| model[o as usize]);
                proptest::prop_assert_eq!(set.intersects(&r), some);
                for o in 0..64u64 {
                    proptest::prop_assert_eq!(set.covers(&(o..o + 1)), model[o as usize]);
                }
                proptest::prop_assert!(set.runs.windows(2).all(|w| w[0].end < w[1].start));
                proptest::prop_assert!(set.runs.iter().all(|x| x.start < x.end));
            }
        }
    }
}
