//! What a log's per-slab dumps say about the requests before them.
//!
//! A dump after request `k` fixes every slab's watermark and fragmentations
//! there. Under the kept rule a slab's three figures only grow between two
//! of its resets, by at most what can still be placed in it (its room above
//! the watermark) and freed (that and its live bytes). So a branch whose slab
//! is already past a dump's figures, or short of them by more than that, has
//! that slab reset before the dump; and a slab that resets must grow back to
//! the dump's watermark from nothing, with the bytes the log allocates after
//! the reset (an object's alignment adds less than its size, so a watermark
//! grows by at most twice the bytes placed). The log says when its resets happen and how much it allocates,
//! so a branch that needs more resets than are left, or a reset too late to
//! grow back from, cannot reach the dump: it dies at once, not at the dump.
//! Likewise what a slab's watermarking still lacks must be made of frees the
//! log makes before the dump: some of their objects, or none.

use alloc::vec::Vec;

use retype_core::mm::slab::Slab;
use retype_core::mm::MemoryManager;

use crate::log::{delta, Checkpoint, LoggedOp, SlabCounters};

/// One log's dumps, with the facts of the log that [`Dumps::reachable`] uses.
pub(crate) struct Dumps {
    dumps: Vec<Checkpoint>,
    /// Bytes the log's requests `0..k` allocated, at index `k`.
    grown: Vec<u64>,
    /// The requests after which the log counts more slab resets, and how many more.
    resets: Vec<(usize, u64)>,
    /// At index `i`: which of `sums` holds the sums, in 16-byte units, of
    /// some objects of each free the log makes after request `i` up to the
    /// next dump (see [`Sums`]). Requests between two frees share one.
    sums_at: Vec<u32>,
    sums: Vec<Sums>,
}

/// A set of byte counts in 16-byte units (the smallest object), below a bound.
#[derive(Clone)]
pub(crate) struct Sums(Vec<u64>);

impl Sums {
    /// `{0}`, for sums below `bound` units.
    pub fn zero(bound: usize) -> Sums {
        let mut words = alloc::vec![0u64; bound.div_ceil(64).max(1)];
        words[0] = 1;
        Sums(words)
    }

    pub fn contains(&self, units: u64) -> bool {
        let (w, b) = ((units / 64) as usize, units % 64);
        self.0.get(w).is_some_and(|word| word >> b & 1 == 1)
    }

    /// The sums with `0..=count` more objects of `size` units each added:
    /// by chunks of 1, 2, 4, ... objects (any count up to `count` is a sum of
    /// some of them), so a count read from a log costs its logarithm, and
    /// only as many objects as fit below the bound.
    pub fn add(&self, size: u64, count: u64) -> Sums {
        let mut out = self.clone();
        if size == 0 {
            return out;
        }
        let mut left = count.min(self.0.len() as u64 * 64 / size);
        let mut chunk = 1;
        while left > 0 {
            let c = chunk.min(left);
            let shifted = out.shifted((size * c) as usize);
            out.0.iter_mut().zip(&shifted.0).for_each(|(o, s)| *o |= s);
            left -= c;
            chunk *= 2;
        }
        out
    }

    fn shifted(&self, by: usize) -> Sums {
        let (words, bits) = (by / 64, by % 64);
        let n = self.0.len();
        let mut out = alloc::vec![0u64; n];
        for k in (words..n).rev() {
            let lo = self.0[k - words];
            out[k] = lo << bits;
            if bits > 0 && k > words {
                out[k] |= self.0[k - words - 1] >> (64 - bits);
            }
        }
        Sums(out)
    }
}

impl Dumps {
    /// `mm` is the manager the log is replayed on: what a dump can still
    /// lack is at most its largest slab.
    pub fn new(log: &[LoggedOp], dumps: Vec<Checkpoint>, mm: &MemoryManager) -> Dumps {
        let mut grown = Vec::with_capacity(log.len() + 1);
        grown.push(0);
        let mut resets = Vec::new();
        for (k, op) in log.iter().enumerate() {
            let (bytes, _, _) = delta(log, k).expect("request in range");
            grown.push(grown[k] + bytes.max(0) as u64);
            let before = k.checked_sub(1).map_or(0, |p| log[p].after.slab_resets);
            if op.after.slab_resets > before {
                resets.push((k, op.after.slab_resets - before));
            }
        }
        let largest = mm.slabs().iter().map(Slab::size).max().unwrap_or(0);
        let (sums_at, sums) = Self::sums(log, &dumps, largest);
        Dumps {
            dumps,
            grown,
            resets,
            sums_at,
            sums,
        }
    }

    /// [`Dumps::sums_at`] and the sums it indexes, built backwards from each
    /// dump; none past `largest` bytes, which no slab can lack (a dump that
    /// claims more is one no run reaches, found so by [`Dumps::reachable`]).
    fn sums(log: &[LoggedOp], dumps: &[Checkpoint], largest: u64) -> (Vec<u32>, Vec<Sums>) {
        let mut sums = alloc::vec![Sums::zero(1)];
        let mut at = alloc::vec![0; log.len()];
        let mut start = 0;
        for d in dumps {
            let bound = d
                .slabs
                .iter()
                .map(|s| s.frag_watermark.min(largest) / 16 + 1)
                .max()
                .unwrap_or(1);
            sums.push(Sums::zero(bound as usize));
            for i in (start..d.op).rev() {
                let (bytes, objs, refused) = delta(log, i + 1).expect("request in range");
                if bytes < 0 && !refused && objs < 0 {
                    let size = (-bytes / -objs) as u64;
                    let more = sums[sums.len() - 1].add(size / 16, (-objs) as u64);
                    sums.push(more);
                }
                at[i] = (sums.len() - 1) as u32;
            }
            start = d.op;
        }
        (at, sums)
    }

    /// The dump after request `i`, if there is one.
    pub fn at(&self, i: usize) -> Option<&Checkpoint> {
        self.dumps
            .binary_search_by_key(&i, |c| c.op)
            .ok()
            .map(|k| &self.dumps[k])
    }

    /// The first dump after a request later than `i`.
    pub fn next(&self, i: usize) -> Option<&Checkpoint> {
        self.dumps.get(self.dumps.partition_point(|c| c.op <= i))
    }

    /// Whether slabs `slabs`, after request `i`, can still read as the next
    /// dump says (see the module's comment).
    pub fn reachable(&self, slabs: &[&Slab], i: usize) -> bool {
        let Some(dump) = self.next(i) else {
            return true;
        };
        // The slabs that must reset before the dump, by the watermark each
        // must grow back to.
        let mut regrow: Vec<u64> = slabs
            .iter()
            .zip(&dump.slabs)
            .filter(|(s, d)| {
                let now = SlabCounters::of(s);
                let room = s.available();
                now.watermark > d.watermark
                    || now.frag_watermark > d.frag_watermark
                    || now.frag_alignment > d.frag_alignment
                    || d.watermark - now.watermark > room
                    || d.frag_alignment - now.frag_alignment > room
                    || d.frag_watermark - now.frag_watermark > room + s.live_bytes()
                    || !self.sums[self.sums_at[i] as usize]
                        .contains((d.frag_watermark - now.frag_watermark) / 16)
            })
            .map(|(_, d)| d.watermark)
            .collect();
        if regrow.is_empty() {
            return true;
        }
        // The resets left, each with the bytes allocated after it until the
        // dump, earliest (most bytes) first: the slabs needing the most take
        // the earliest resets.
        let mut left = self
            .resets
            .iter()
            .filter(|(r, _)| (i + 1..=dump.op).contains(r))
            .flat_map(|&(r, n)| {
                core::iter::repeat_n(self.grown[dump.op + 1] - self.grown[r + 1], n as usize)
            });
        regrow.sort_unstable_by(|a, b| b.cmp(a));
        regrow
            .into_iter()
            .all(|need| left.next().is_some_and(|bytes| 2 * bytes >= need))
    }
}

#[cfg(test)]
mod tests {
    use super::Sums;
    use alloc::collections::BTreeSet;
    use proptest::prelude::*;

    proptest! {
        /// `add` against the sums themselves: every `start + k * size` below
        /// the bound, for `k` up to `count`, and nothing else.
        #[test]
        fn add_is_every_count_of_objects(
            bound in 1usize..400,
            start in proptest::collection::vec(0u64..400, 0..4),
            adds in proptest::collection::vec((0u64..50, 0u64..40), 0..4),
        ) {
            let mut model: BTreeSet<u64> = [0].into();
            let mut sums = Sums::zero(bound);
            for &s in &start {
                sums = sums.add(s, 1);
                model = model.iter().flat_map(|&m| [m, m + s]).collect();
            }
            for &(size, count) in &adds {
                sums = sums.add(size, count);
                model = model.iter().flat_map(|&m| (0..=count).map(move |k| m + k * size)).collect();
            }
            let width = bound.div_ceil(64).max(1) as u64 * 64;
            for units in 0..width + 64 {
                prop_assert_eq!(sums.contains(units), units < width && model.contains(&units), "{}", units);
            }
        }
    }

    /// A count read from a log may be anything: it costs its logarithm.
    #[test]
    fn add_takes_any_count() {
        let sums = Sums::zero(1 << 16).add(3, u64::MAX);
        assert!(sums.contains(3 * 1000) && !sums.contains(3 * 1000 + 1));
    }
}
