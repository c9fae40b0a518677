//! Sampling by bytes, as jemalloc's and tcmalloc's profilers do: each thread
//! counts down the bytes to its next sample, a gap drawn from an exponential
//! distribution of mean N (`RETYPE_SAMPLE_BYTES`); the allocation the count
//! runs out in is sampled, and a new gap is drawn. The gaps being memoryless,
//! an allocation of `s` bytes is sampled with probability `1 - e^(-s/N)`
//! whatever came before, which the analyses invert
//! (`retype_trace::kind`) into unbiased estimates.
//!
//! The state is two words in the thread's [`Gap`] (in its thread-local
//! state): no lock, no shared line. `RETYPE_SAMPLE_SEED` makes the gaps the
//! same in every run (each thread's stream is the seed mixed with the
//! thread's rank of first use); without it they come from the clock.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// One thread's countdown to its next sample.
pub struct Gap {
    /// Bytes left before the next sample.
    left: Cell<u64>,
    /// The generator's state (SplitMix64); 0 until the thread's first call.
    rng: Cell<u64>,
}

/// Threads that have drawn a gap, to give each its own stream.
static THREADS: AtomicU64 = AtomicU64::new(0);

impl Gap {
    /// A thread's gap before its first call: all zeros, as a new thread's
    /// state holds it (see [`crate::thread::local::Local`]).
    #[cfg(test)]
    pub const fn new() -> Gap {
        Gap {
            left: Cell::new(0),
            rng: Cell::new(0),
        }
    }

    /// Whether an allocation of `size` bytes is sampled, gaps being
    /// `mean` bytes on average and seeded by `seed` (0: the clock).
    #[inline(always)]
    pub fn take(&self, size: u64, mean: u64, seed: u64) -> bool {
        if self.rng.get() == 0 {
            self.start(mean, seed);
        }
        let left = self.left.get();
        if size < left {
            self.left.set(left - size);
            return false;
        }
        let gap = self.draw(mean);
        self.left.set(gap);
        true
    }

    #[cold]
    fn start(&self, mean: u64, seed: u64) {
        let rank = THREADS.fetch_add(1, Ordering::Relaxed) + 1;
        let base = if seed == 0 { sys::now_ns() } else { seed };
        // Never 0, which means "not started".
        self.rng
            .set((base ^ rank.wrapping_mul(0x9e37_79b9_7f4a_7c15)).max(1));
        let gap = self.draw(mean);
        self.left.set(gap);
    }

    /// An exponentially distributed gap of mean `mean` bytes, at least 1.
    fn draw(&self, mean: u64) -> u64 {
        let state = self.rng.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.rng.set(state.max(1));
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // Uniform in (0, 1]: its logarithm is finite.
        let u = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * mean as f64) as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::Gap;

    /// Allocations of one size are sampled at the rate the formula gives:
    /// 1 - e^(-s/N) of them (here 1 - e^(-1/4), 200,000 draws, within 1 %).
    #[test]
    fn the_sampled_share_is_one_minus_e_to_the_minus_size_over_mean() {
        let g = Gap::new();
        let (n, size, mean) = (200_000u32, 256u64, 1024u64);
        let hits = (0..n).filter(|_| g.take(size, mean, 42)).count() as f64;
        let expect = 1.0 - (-(size as f64) / mean as f64).exp();
        let got = hits / f64::from(n);
        assert!((got - expect).abs() < 0.01 * expect, "{got} vs {expect}");
    }

    #[test]
    fn each_thread_draws_its_own_gaps_and_a_block_past_the_gap_is_always_sampled() {
        let picks = |g: &Gap| (0..1000).map(|_| g.take(100, 4096, 7)).collect::<Vec<_>>();
        let (a, b) = (Gap::new(), Gap::new());
        // Two threads' streams differ (their ranks do), one thread's is its own.
        let (pa, pb) = (picks(&a), picks(&b));
        assert!(pa.iter().any(|&x| x) && pa != pb);
        let g = Gap::new();
        assert!((0..100).all(|_| g.take(u64::MAX, 4096, 7)));
    }
}
