//! Scoring a program on a heap as mdriver does: utilization is the peak of live
//! requested bytes over the heap's high-water mark (`max_total_size /
//! mem_heapsize()`); fragmentation #4 is (high-water − peak live) ÷ peak live
//! (Johnstone & Wilson); throughput is ops over the fastest of several timed
//! runs, each a fresh heap plus every request, on an arena whose pages are
//! already touched (mdriver's `mem_reset_brk`); the performance index is
//! 100 × (0.6 × utilization + 0.4 × min(1, Kops/s ÷ 600)).

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use retype_core::heap::{Arena, Heap, HeapKind};

use super::check::{run, Quiet, Validator};
use super::placement::Placement;
use super::program::Program;

/// mdriver's weight of utilization in the performance index.
const UTIL_WEIGHT: f64 = 0.60;
/// mdriver's `AVG_LIBC_THRUPUT`: throughput credit is capped at 600 Kops/s.
const LIBC_KOPS: f64 = 600.0;

/// How a program is validated and timed.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Walk the heap's invariants after every request of the validating run.
    pub check: bool,
    /// Time at least this many runs (the fastest counts)…
    pub runs: u32,
    /// …and keep timing (up to 1,000 runs) until this much time is spent.
    pub min_time: Duration,
}

impl Timing {
    /// The command line's: three runs, at least 100 ms, no checks.
    pub const DEFAULT: Timing = Timing {
        check: false,
        runs: 3,
        min_time: Duration::from_millis(100),
    };
}

/// The score of one trace on one heap.
pub struct Score {
    pub ops: usize,
    pub util: f64,
    /// `None` when nothing was ever live: the ratio has no meaning then.
    pub frag4: Option<f64>,
    pub secs: f64,
    pub heap_size: usize,
    pub placement: Placement,
}

impl Score {
    pub fn kops(&self) -> f64 {
        kops(self.ops, self.secs)
    }

    pub fn perf_index(&self) -> f64 {
        perf_index(self.util, self.kops())
    }
}

/// Thousands of operations a second.
pub fn kops(ops: usize, secs: f64) -> f64 {
    ops as f64 / secs / 1000.0
}

/// mdriver's performance index from an average utilization and a throughput.
pub fn perf_index(util: f64, kops: f64) -> f64 {
    100.0 * (UTIL_WEIGHT * util + (1.0 - UTIL_WEIGHT) * (kops / LIBC_KOPS).min(1.0))
}

/// Utilization and fragmentation #4 of a heap of `heap_size` bytes whose live
/// requested bytes peaked at `peak`.
pub fn utilization(peak: u64, heap_size: usize) -> (f64, Option<f64>) {
    let (peak, size) = (peak as f64, heap_size as f64);
    let util = if heap_size == 0 { 0.0 } else { peak / size };
    let frag4 = (peak > 0.0).then(|| (size - peak) / peak);
    (util, frag4)
}

/// Validates `prog` on heap `kind` once, then times it.
pub fn score(arena: &mut Arena, kind: HeapKind, prog: &Program, timing: Timing) -> Result<Score> {
    let fail = |(i, msg): (usize, String)| {
        anyhow!("{}:{}: {kind}: {msg}", prog.path, prog.requests.lines[i])
    };
    // The arena is reset outside the timed part: its pages stay touched.
    arena.reset();
    let mut h = build(kind, arena)?;
    let mut validator = Validator::new(timing.check, prog.peak_live);
    run(&mut *h, prog, &mut validator).map_err(fail)?;
    let heap_size = h.heap_size();
    drop(h);
    let (mut best, mut spent, mut runs) = (Duration::MAX, Duration::ZERO, 0);
    while runs < timing.runs || (spent < timing.min_time && runs < 1000) {
        arena.reset();
        let start = Instant::now();
        let mut h = build(kind, arena)?;
        run(&mut *h, prog, &mut Quiet).map_err(fail)?;
        drop(h);
        let t = start.elapsed();
        best = best.min(t);
        spent += t;
        runs += 1;
    }
    let (util, frag4) = utilization(prog.peak_live, heap_size);
    Ok(Score {
        ops: prog.requests.requests.len(),
        util,
        frag4,
        secs: best.as_secs_f64().max(1e-9),
        heap_size,
        placement: validator.placement(),
    })
}

/// A fresh heap `kind` over `arena`.
fn build(kind: HeapKind, arena: &mut Arena) -> Result<Box<dyn Heap + '_>> {
    kind.build(arena)
        .ok_or_else(|| anyhow!("heap {kind}: the arena is too small"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_peak_has_no_fragmentation_ratio() {
        assert_eq!(utilization(0, 0), (0.0, None));
        assert_eq!(utilization(0, 4096), (0.0, None));
        let (util, frag4) = utilization(1024, 4096);
        assert_eq!(util, 0.25);
        assert_eq!(frag4, Some(3.0));
    }
}
