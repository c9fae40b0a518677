//! Timing of short operations: the time-stamp counter, its rate and the
//! cost of reading it, and the order statistics the benchmarks report.
//! Shared by `bench mdb` and `bench protocol`, whose node threads
//! stamp events with the same counter.

use std::time::{Duration, Instant};

/// Reads the time-stamp counter (cycles at the TSC's constant rate). The
/// fences keep the read from passing, or being passed by, the loads of the
/// operation measured: without them a cache miss can escape the interval.
#[cfg(target_arch = "x86_64")]
pub fn ticks() -> u64 {
    use core::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: LFENCE and RDTSC exist on every x86_64 CPU and have no side
    // effects.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// Without a TSC, nanoseconds from a monotonic clock stand in for cycles.
#[cfg(not(target_arch = "x86_64"))]
pub fn ticks() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Ticks per nanosecond, measured against the monotonic clock.
pub fn ticks_per_ns() -> f64 {
    let (t0, c0) = (Instant::now(), ticks());
    while t0.elapsed() < Duration::from_millis(100) {}
    let (dt, dc) = (t0.elapsed(), ticks() - c0);
    dc as f64 / dt.as_nanos() as f64
}

/// The cost of reading the clock twice, subtracted from every measurement.
pub fn timer_overhead() -> u64 {
    let mut v: Vec<u64> = (0..10_000)
        .map(|_| {
            let t0 = ticks();
            let t1 = ticks();
            t1 - t0
        })
        .collect();
    median(&mut v) as u64
}

pub fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

/// The standard deviation of the samples about their mean, over all of them
/// (numpy's `std`); 0 for none.
pub fn stddev(v: &[u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    var.sqrt()
}

/// The `p`-th percentile (0 < p ≤ 100) by the nearest-rank method: the
/// smallest sample that at least `p` % of the samples do not exceed.
pub fn percentile(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3, 1, 2]), 2.0);
        assert_eq!(median(&mut [4, 1, 2, 3]), 2.5);
    }

    #[test]
    fn standard_deviation_over_all_samples() {
        assert_eq!(stddev(&[2, 4, 4, 4, 5, 5, 7, 9]), 2.0);
        assert_eq!(stddev(&[5, 5, 5]), 0.0);
        assert_eq!(stddev(&[]), 0.0);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<u64> = (1..=10).rev().collect();
        assert_eq!(percentile(&mut v, 90.0), 9);
        assert_eq!(percentile(&mut v, 100.0), 10);
        assert_eq!(percentile(&mut [7], 90.0), 7);
    }
}
