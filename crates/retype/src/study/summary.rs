//! The figures of one (workload, policy) run, as seed 000 reports them.

use retype_core::mm::Stats;
use retype_core::workload::{Outcome, Step};

/// Peak and average fragmentation, resets, OOMs, failed retypes, time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub ops: u64,
    pub alloc_requests: u64,
    pub peak_frag_watermark: u64,
    pub peak_frag_alignment: u64,
    /// Peak of the per-op sum, not the sum of the peaks (as Table 4.3).
    pub peak_frag_total: u64,
    pub avg_frag_watermark: f64,
    pub avg_frag_alignment: f64,
    pub avg_frag_total: f64,
    pub slab_resets: u64,
    pub ooms: u64,
    pub failed_retypes: u64,
    pub peak_bytes_in_use: u64,
    pub bytes_requested: u64,
    pub total_ns: u64,
    /// The slowest request's time.
    pub max_ns: u64,
}

impl Summary {
    /// Folds the steps of a run.
    pub fn of(steps: &[Step]) -> Summary {
        let mut s = Summary::default();
        let (mut sum_w, mut sum_a) = (0u128, 0u128);
        for step in steps {
            let st: &Stats = &step.stats;
            s.ops += 1;
            s.alloc_requests +=
                matches!(step.outcome, Outcome::Alloc | Outcome::OutOfMemory) as u64;
            s.peak_frag_watermark = s.peak_frag_watermark.max(st.frag_watermark);
            s.peak_frag_alignment = s.peak_frag_alignment.max(st.frag_alignment);
            s.peak_frag_total = s.peak_frag_total.max(st.frag_total());
            s.peak_bytes_in_use = s.peak_bytes_in_use.max(st.bytes_in_use);
            sum_w += u128::from(st.frag_watermark);
            sum_a += u128::from(st.frag_alignment);
            s.total_ns += step.ticks;
            s.max_ns = s.max_ns.max(step.ticks);
        }
        if let Some(last) = steps.last() {
            s.slab_resets = last.stats.slab_resets;
            s.ooms = last.stats.ooms;
            s.failed_retypes = last.stats.failed_retypes;
            s.bytes_requested = last.stats.bytes_requested;
        }
        let n = s.ops.max(1) as f64;
        s.avg_frag_watermark = sum_w as f64 / n;
        s.avg_frag_alignment = sum_a as f64 / n;
        s.avg_frag_total = (sum_w + sum_a) as f64 / n;
        s
    }

    pub fn resets_per_100_allocs(&self) -> f64 {
        100.0 * self.slab_resets as f64 / self.alloc_requests.max(1) as f64
    }

    pub fn mean_ns(&self) -> f64 {
        self.total_ns as f64 / self.ops.max(1) as f64
    }
}

/// Bytes in KiB.
pub fn kib(bytes: f64) -> f64 {
    bytes / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(outcome: Outcome, w: u64, a: u64) -> Step {
        Step {
            outcome,
            stats: Stats {
                frag_watermark: w,
                frag_alignment: a,
                ..Stats::default()
            },
            ticks: 10,
        }
    }

    #[test]
    fn total_peak_is_the_peak_of_the_sum() {
        let s = Summary::of(&[
            step(Outcome::Alloc, 100, 0),
            step(Outcome::Free, 0, 80),
            step(Outcome::OutOfMemory, 60, 60),
        ]);
        assert_eq!(
            (
                s.peak_frag_watermark,
                s.peak_frag_alignment,
                s.peak_frag_total
            ),
            (100, 80, 120)
        );
        assert_eq!(s.avg_frag_total, 100.0);
        assert_eq!(s.alloc_requests, 2);
        assert_eq!(s.mean_ns(), 10.0);
    }
}
