//! RSS samples: the process's resident set size (`/proc/self/statm`, read
//! with plain system calls into a stack buffer) written into the trace at an
//! interval (`RETYPE_RSS_MS`, 10 ms unless set; 0: none).
//!
//! The samples ride on the program's own calls: a hook checks, with the
//! call's own clock read and one comparison, whether the interval has
//! passed since the last sample (a call that is not recorded reads the
//! clock for it only while samples are taken; an aggregate recording's
//! calls check only when they read their thread's [`crate::coarse`]
//! clock), and if so takes one before it forwards the call (so a sample
//! sees the memory the program built since its last call, the peak before a
//! `free`). Another sample is taken as each recording window opens and
//! closes, and as the segment ends. We chose this over a sampler thread: the
//! program keeps exactly its own threads (one that counts them, or calls
//! `unshare`, which a second thread makes fail, sees no change), nothing must
//! be restarted in a fork child (its first call samples its own RSS) or
//! stopped at exit or exec, and no lock is shared between a sampler and the
//! hooks. The price: a program that makes no call for a while (it computes,
//! or sleeps) is not sampled then, and its RSS line steps from the sample
//! before to the one after. Paused, nothing is sampled: a paused recorder
//! writes nothing but its window records, so every sample falls in a
//! recorded window (the first at its start, the last at its end).

use std::sync::atomic::{AtomicU64, Ordering};

use retype_trace::codec;
use retype_trace::RssSample;

use crate::sys::{self, StackStr};
use crate::{gate, output, recording, settings};

/// The interval in [`sys::ticks`] (0: no samples).
static INTERVAL: AtomicU64 = AtomicU64::new(0);
/// The [`sys::ticks`] at or after which the next call samples.
static NEXT: AtomicU64 = AtomicU64::new(u64::MAX);

/// A segment begins (the clock is calibrated): the interval in ticks, and
/// the page size and interval in its meta records.
pub fn restart() {
    let ms = settings::get().rss_ms();
    let ticks = if ms == 0 {
        0
    } else {
        sys::TickScale::now().ticks_in(ms.saturating_mul(1_000_000))
    };
    INTERVAL.store(ticks, Ordering::Relaxed);
    NEXT.store(if ticks == 0 { u64::MAX } else { 0 }, Ordering::Relaxed);
    let mut num = StackStr::<32>::new();
    num.push_num(page_size());
    output::meta(b"page_size", num.as_bytes());
    let mut num = StackStr::<32>::new();
    num.push_num(ms);
    output::meta(b"rss_interval_ms", num.as_bytes());
}

/// Samples if the interval has passed at `now` (in [`sys::ticks`]; a hook
/// calls this with its call's own time, recording on); returns the time the
/// call starts: `now`, or the clock read again after a sample, so that the
/// sample's cost is no part of the call's latency.
#[inline(always)]
pub fn tick(now: u64) -> u64 {
    let next = NEXT.load(Ordering::Relaxed);
    if now < next {
        return now;
    }
    take(next, now)
}

/// [`tick`] for a call that is not recorded: reads the clock only if
/// samples are taken.
#[inline(always)]
pub fn poll() {
    if NEXT.load(Ordering::Relaxed) != u64::MAX {
        tick(sys::ticks());
    }
}

/// Takes the sample due at `now` (`next` was due), unless another thread took it.
#[cold]
fn take(next: u64, now: u64) -> u64 {
    let after = now.saturating_add(INTERVAL.load(Ordering::Relaxed));
    if NEXT
        .compare_exchange(next, after, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return now;
    }
    write(now);
    sys::ticks()
}

/// Samples now if recording (a window opens or closes) and sampling is on.
pub fn sample() {
    if recording::is_on() && INTERVAL.load(Ordering::Relaxed) != 0 {
        write(sys::ticks());
    }
}

/// The segment ends: a last sample if it was recording (`on`).
pub fn last(on: bool) {
    if on && INTERVAL.load(Ordering::Relaxed) != 0 {
        write(sys::ticks());
    }
}

/// Writes a sample taken at [`sys::ticks`] `at`.
fn write(at: u64) {
    let Some(rss_bytes) = resident_bytes() else {
        return;
    };
    let sample = RssSample {
        time_ns: sys::TickScale::now().time_ns(at),
        rss_bytes,
        segment: 0,
    };
    let mut rec = [0u8; codec::MAX_VARINT_RECORD];
    if let Some(n) = codec::varint_record(&mut rec, codec::TAG_RSS, &codec::rss_fields(&sample)) {
        gate::write(&rec[..n]);
    }
}

/// The resident set size: statm's second field, in pages.
fn resident_bytes() -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = sys::read_file(b"/proc/self/statm\0", &mut buf);
    let text = &buf[..n];
    let second = text.iter().position(|&c| c == b' ')? + 1;
    Some(sys::parse_num(&text[second..])?.saturating_mul(page_size()))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; glibc answers from the auxiliary vector.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096)
}
