//! Each thread's coarse clock, for an aggregate recording: the time of the
//! thread's latest clock read, read again only every N of its calls instead
//! of at each (a read, `rdtsc` in a VM, costs about as much as the rest of
//! a counted call's bookkeeping). N adapts so that N calls take about
//! [`SPAN`] at the rate the thread called before, and is at most
//! [`MOST_CALLS`].
//!
//! What needs only coarse time runs at a read: the snapshot and RSS checks
//! (so they still fire within about a span of being due), and a call's time
//! between reads is the latest read's (so the last call's time is at most
//! `MOST_CALLS - 1` of the thread's calls early). A time that is kept
//! exact (a tally's first call, a new peak) is read with [`Clock::exact`].

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// The most calls between two reads: a thread whose calls slow down all at
/// once (a burst, then calls far apart) reads its clock again within this
/// many calls, and then adapts.
pub const MOST_CALLS: u32 = 32;

/// The time, in [`sys::ticks`], that the calls between two reads should
/// take (see [`set_span`]).
static SPAN: AtomicU64 = AtomicU64::new(0);

/// A segment begins: reads should come about every `ticks`.
pub fn set_span(ticks: u64) {
    SPAN.store(ticks, Ordering::Relaxed);
}

/// A call's time from a thread's [`Clock`].
#[derive(Clone, Copy)]
pub struct Time {
    /// In [`sys::ticks`].
    pub ticks: u64,
    /// Whether the clock was read for this call (else the time is an
    /// earlier call's).
    pub fresh: bool,
}

/// One thread's coarse clock. All zeros is its state before the thread's
/// first call (see [`crate::thread::local::Local`]): its first call reads.
pub struct Clock {
    /// The latest read, in [`sys::ticks`].
    now: Cell<u64>,
    /// Calls left before the next read.
    left: Cell<u32>,
    /// Calls from one read to the next (0 before the first read).
    every: Cell<u32>,
}

impl Clock {
    /// A clock before its first read, as a new thread's state holds it.
    #[cfg(test)]
    pub const fn new() -> Clock {
        Clock {
            now: Cell::new(0),
            left: Cell::new(0),
            every: Cell::new(0),
        }
    }

    /// The time of a call, which counts down to the next read.
    #[inline(always)]
    pub fn tick(&self) -> Time {
        let left = self.left.get();
        if left != 0 {
            self.left.set(left - 1);
            return Time {
                ticks: self.now.get(),
                fresh: false,
            };
        }
        self.read()
    }

    /// Reads the clock, and sets the calls to the next read from how long
    /// the last ones took.
    #[inline(never)]
    fn read(&self) -> Time {
        let now = sys::ticks();
        let took = now.saturating_sub(self.now.get());
        self.restart(
            now,
            next_every(self.every.get(), took, SPAN.load(Ordering::Relaxed)),
        );
        Time {
            ticks: now,
            fresh: true,
        }
    }

    /// The time [`Clock::tick`] gave the call now being counted.
    #[inline(always)]
    pub fn time(&self) -> Time {
        Time {
            ticks: self.now.get(),
            fresh: self.left.get() + 1 == self.every.get(),
        }
    }

    /// The exact time of the call being counted: its own read, else the
    /// clock read now (which starts the countdown again, so that the call
    /// is [`Clock::time`]'s fresh one).
    #[inline(always)]
    pub fn exact(&self) -> u64 {
        if self.time().fresh {
            return self.now.get();
        }
        self.read_again()
    }

    #[inline(never)]
    fn read_again(&self) -> u64 {
        let now = sys::ticks();
        self.restart(now, self.every.get().max(1));
        now
    }

    /// A read at `now` starts a countdown of `every` calls (at least 1).
    #[inline(always)]
    fn restart(&self, now: u64, every: u32) {
        self.now.set(now);
        self.every.set(every);
        self.left.set(every - 1);
    }
}

/// The calls between reads after `every` calls took `took` ticks: as many as
/// would take `span` at their rate, at most twice as many as before (a burst
/// of fast calls is not a rate), at least 1 and at most [`MOST_CALLS`].
fn next_every(every: u32, took: u64, span: u64) -> u32 {
    let every = u64::from(every.max(1));
    let fit = every.saturating_mul(span) / took.max(1);
    fit.min(2 * every).clamp(1, u64::from(MOST_CALLS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The next count stays within its bounds and fits the span at the
        /// rate just seen, unless that needs fewer than one call.
        #[test]
        fn the_calls_between_reads_fit_the_span(
            every in 0u32..=MOST_CALLS,
            took in 0u64..1 << 40,
            span in 0u64..1 << 32,
        ) {
            let next = next_every(every, took, span);
            prop_assert!((1..=MOST_CALLS).contains(&next));
            prop_assert!(next <= 2 * every.max(1));
            let rate = took as f64 / f64::from(every.max(1));
            if next > 1 {
                prop_assert!(f64::from(next) * rate <= span as f64 * (1.0 + 1e-9));
            }
        }
    }

    #[test]
    fn calls_between_reads_share_the_time_of_the_read_before() {
        // A span far longer than any call (the tests set only this one): the
        // count doubles at each read.
        set_span(u64::MAX / 4);
        let c = Clock::new();
        let first = c.tick();
        assert!(first.fresh, "a thread's first call reads the clock");
        assert!(c.time().fresh);
        let mut reads = vec![];
        for call in 1..200u32 {
            let t = c.tick();
            assert_eq!(t.fresh, c.time().fresh);
            assert_eq!(t.ticks, c.time().ticks);
            if t.fresh {
                reads.push(call);
            } else {
                assert_eq!(t.ticks, c.now.get(), "between reads, the latest read");
            }
        }
        // Each count twice the one before, up to MOST_CALLS.
        let gaps: Vec<u32> = reads.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] <= 4, "{gaps:?}");
        for w in gaps.windows(2) {
            assert_eq!(w[1], (2 * w[0]).min(MOST_CALLS), "{gaps:?}");
        }
        assert_eq!(gaps.last(), Some(&MOST_CALLS));
    }

    #[test]
    fn an_exact_time_is_read_now_and_restarts_the_countdown() {
        let c = Clock::new();
        set_span(u64::MAX / 4);
        for _ in 0..100 {
            c.tick();
        }
        let at = c.tick();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let exact = c.exact();
        assert!(exact > at.ticks, "read again, later");
        assert!(c.time().fresh);
        assert_eq!(c.exact(), exact, "one read a call");
    }
}
