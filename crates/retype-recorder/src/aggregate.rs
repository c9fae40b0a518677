//! An aggregate recording (`RETYPE_AGGREGATE`): instead of events, counters
//! per call stack, written when the segment ends, and a snapshot of the live
//! bytes of the top stacks every `RETYPE_SNAPSHOT_MS`; the file's size
//! depends on the distinct stacks and the snapshots, not on the calls.
//!
//! The counters follow the `retype_trace::heap` model, call by call, so that
//! they equal what the analyses count from a full recording: a realloc frees
//! its old block and allocates a new one at its own stack, a block handed out
//! at an address still followed replaces the old one, a block is temporary if
//! it is freed before its thread allocates anything else. The blocks are
//! followed in [`blocks`]; a free of a block allocated while nothing was
//! recorded is not counted.
//!
//! Each call is counted into its thread's own [`tally`]; the one figure all
//! threads share is the process's live bytes (an atomic add), whose peak is
//! numbered (its epoch) so that each stack's share of it is kept without a
//! pass over the stacks at each new peak (see [`tally`]). Only an allocation
//! that raises them adds to them: a free cannot make a peak, so a thread
//! keeps the bytes it frees in its tally ([`Tally::defer`]) and takes them
//! out with its next rise, one add for both, or takes a rise they cover out
//! of them while the live bytes are not above the peak ([`Tally::offset`]:
//! then no add, and no peak missed, since all deferred frees are still in
//! the live bytes); when the sum passes the peak,
//! the other threads' deferred bytes are taken out of it before it is
//! compared (a rare pass over the tallies). Exact in a single thread, and
//! with threads whose calls near the peak are ordered (by a lock, a join:
//! the later thread then sees the earlier one's deferred bytes and adds);
//! else as exact as the order of their updates (the process's peak itself is
//! a moment only up to that order). An exact peak needs that one order:
//! counts kept per thread and summed at snapshots would give each thread's
//! peak, whose sum is only a bound of the process's.
//!
//! A call's time is its thread's [`coarse`] clock's: read exactly for a
//! tally's first call and a new peak; snapshots are checked at its reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use retype_trace::codec::{self, MAX_COUNTERS_RECORD};
use retype_trace::{Event, Op};

use crate::blocks::{self, Entry};
use crate::coarse::{self, Clock};
use crate::tally::{self, Tally};
use crate::{output, settings, stack_table, sys};

/// Threads whose last allocations are kept apart (by tid; higher tids share).
const TIDS: usize = 1 << 22;
/// Stacks a snapshot names.
const TOP: usize = 16;
/// The longest time between two reads of a thread's coarse clock, in ns.
const MOST_SPAN_NS: u64 = 1_000_000;

/// The address of each thread's last allocation, at its [`slot`] (written
/// by that thread only): a block is temporary if it is still its thread's
/// last when freed. Exact without a serial number in the block: while a
/// block is followed no other allocation is handed its address (one that is
/// replaces it, [`unseen_free`]), so its thread's last is its address only
/// until that thread allocates again. A static, not mapped on first use:
/// zero pages the loader maps as they are touched, at an address the code
/// holds, so that a call neither loads nor checks a pointer to them.
static LAST: [AtomicU64; TIDS] = [const { AtomicU64::new(0) }; TIDS];
/// Bytes live, and the most live so far.
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
/// When the latest peak was reached, in clock ticks (0: none yet).
static PEAK_AT: AtomicU64 = AtomicU64::new(0);
/// When the next snapshot is due and the interval, in clock ticks (0: no
/// snapshots), and the snapshot being taken.
static NEXT_SNAPSHOT: AtomicU64 = AtomicU64::new(0);
static INTERVAL: AtomicU64 = AtomicU64::new(0);
static SNAPPING: AtomicBool = AtomicBool::new(false);

/// The slot of thread `tid`'s last allocation. Each thread writes it on
/// every allocation, so threads made one after another
/// (consecutive tids) get slots in different cache lines (a line's eight
/// lie `TIDS / 8` apart): in one line, two threads that allocate at once
/// would pass it between their cores at every call.
pub fn slot(tid: u32) -> usize {
    let t = tid as usize % TIDS;
    (t % 8) * (TIDS / 8) + t / 8
}

/// Counts allocation `e` (a realloc's old block already counted as freed,
/// [`count_free`]) of the thread whose last allocation is at [`slot`]
/// `count_at`, made at the time of its coarse clock `clock`, into its tally
/// `mine` (`None`: a thread that gave its buffer back, counted as retired).
#[inline(always)]
pub fn count(mine: Option<&'static Tally>, count_at: u32, e: &Event, clock: &Clock) {
    match mine {
        Some(t) => count_in(t, count_at, e, None, clock),
        None => retired(count_at, *e, None, clock),
    }
}

/// [`count`] or [`count_free`] into the retired tally: apart, so that the
/// hot path passes the event's fields in registers rather than the event in
/// memory.
#[cold]
#[inline(never)]
fn retired(count_at: u32, e: Event, old: Option<Entry>, clock: &Clock) {
    tally::with_retired(|t| count_in(t, count_at, &e, old, clock));
}

/// [`count`] into tally `t`, or a free of block `old`.
#[inline(always)]
fn count_in(t: &'static Tally, count_at: u32, e: &Event, old: Option<Entry>, clock: &Clock) {
    let epoch = tally::epoch();
    let mut delta = match old {
        Some(b) => freed(t, epoch, e.ptr, b, true),
        None => 0,
    };
    match (e.op, e.ret) {
        (Op::Free, _) => {}
        (_, 0) => {
            if let Some(c) = t.counter(e.stack) {
                c.failed();
            }
        }
        _ => {
            LAST[count_at as usize % TIDS].store(e.ret, Ordering::Relaxed);
            let block = Entry {
                size: e.size,
                stack: e.stack,
                count_at,
            };
            let (replaced, followed) = blocks::insert::<false>(e.ret, block);
            if let Some(r) = replaced {
                delta = delta.wrapping_add(unseen_free(t, epoch, r));
            }
            if let Some(c) = t.counter(e.stack) {
                c.allocated(epoch, e.size, followed);
            }
            // A block that could not be followed would never be freed: not counted live.
            if followed {
                delta = delta.wrapping_add(e.size);
            }
        }
    }
    if (delta as i64) > 0 {
        // A rise its thread's deferred frees cover is held back with them
        // while the live bytes (which still count all deferred frees) are not
        // above the peak: the true live bytes then stay at most that, so this
        // call makes no peak, and the locked add waits for a rise they do not cover.
        let below = || LIVE.load(Ordering::Relaxed) as i64 <= PEAK.load(Ordering::Relaxed) as i64;
        if !t.offset(delta, below) {
            rise(t, delta, clock);
        }
    } else if delta != 0 {
        t.defer(delta.wrapping_neg());
    }
    counted(t, clock);
}

/// A rise of the live bytes by `delta`, counted into tally `t` at the time
/// of its thread's clock `clock`: the thread's deferred frees go in with it.
#[inline(always)]
fn rise(t: &'static Tally, delta: u64, clock: &Clock) {
    let delta = delta.wrapping_sub(t.take_deferred());
    let live = LIVE.fetch_add(delta, Ordering::Relaxed).wrapping_add(delta);
    if (live as i64) > PEAK.load(Ordering::Relaxed) as i64 {
        // Other threads' deferred frees are not out of `live` yet.
        let live = live.wrapping_sub(tally::deferred());
        if (live as i64) > PEAK.load(Ordering::Relaxed) as i64
            && PEAK.fetch_max(live, Ordering::Relaxed) < live
        {
            tally::new_peak();
            PEAK_AT.store(clock.exact(), Ordering::Relaxed);
        }
    }
}

/// [`count`] for a free of block `b` at `addr`, made by the thread whose
/// last allocation is at `count_at` (counted at `b`'s stack, with no
/// event): a path of its own, since a free cannot raise the live bytes to a peak.
#[inline(always)]
pub fn count_free(mine: Option<&'static Tally>, count_at: u32, addr: u64, b: Entry, clock: &Clock) {
    let Some(t) = mine else {
        let e = Event {
            op: Op::Free,
            ptr: addr,
            ..Event::default()
        };
        return retired(count_at, e, Some(b), clock);
    };
    let delta = freed(t, tally::epoch(), addr, b, true);
    t.defer(delta.wrapping_neg());
    counted(t, clock);
}

/// After a call counted into tally `t` at the time of its thread's clock `clock`.
#[inline(always)]
fn counted(t: &'static Tally, clock: &Clock) {
    t.called_at(clock);
    let now = clock.time();
    if now.fresh {
        t.last_at(now.ticks);
        maybe_snapshot(now.ticks);
    }
}

/// Counts the end of block `b` at `addr` into tally `t` (`epoch`: the
/// latest peak's); `maybe_temporary`: a free, temporary if its thread
/// allocated nothing since. Returns the change of the live bytes.
#[inline(always)]
fn freed(t: &'static Tally, epoch: u64, addr: u64, b: Entry, maybe_temporary: bool) -> u64 {
    let temporary =
        maybe_temporary && LAST[b.count_at as usize % TIDS].load(Ordering::Relaxed) == addr;
    if let Some(c) = t.counter(b.stack) {
        c.freed(epoch, b.size, temporary);
    }
    b.size.wrapping_neg()
}

/// [`freed`] for block `b`, followed at an address the allocator handed out
/// again: its free was not seen (rare, so apart from the hot path).
#[cold]
#[inline(never)]
fn unseen_free(t: &'static Tally, epoch: u64, b: Entry) -> u64 {
    freed(t, epoch, 0, b, false)
}

/// Writes a snapshot if one is due at `ticks`, a clock read (one thread
/// takes it; the others go on).
#[inline(always)]
fn maybe_snapshot(ticks: u64) {
    let next = NEXT_SNAPSHOT.load(Ordering::Relaxed);
    if next == 0 || ticks < next || SNAPPING.swap(true, Ordering::Acquire) {
        return;
    }
    NEXT_SNAPSHOT.store(
        ticks.saturating_add(INTERVAL.load(Ordering::Relaxed)),
        Ordering::Relaxed,
    );
    snapshot(sys::TickScale::now().time_ns(ticks));
    SNAPPING.store(false, Ordering::Release);
}

/// Writes a snapshot record: the live bytes now and those of the [`TOP`]
/// stacks with the most.
fn snapshot(now_ns: u64) {
    let mut top = [(0u32, 0u64); TOP];
    let mut n = 0;
    tally::sum(|id, c| {
        // Read while other threads count, a sum may be short by a block in flight.
        let bytes = c.leaked_bytes;
        if bytes == 0 || bytes > i64::MAX as u64 || (n == TOP && bytes <= top[TOP - 1].1) {
            return;
        }
        // Insert in order, most first, dropping the last if full.
        let mut at = n.min(TOP - 1);
        while at > 0 && top[at - 1].1 < bytes {
            top[at] = top[at - 1];
            at -= 1;
        }
        top[at] = (id, bytes);
        n = (n + 1).min(TOP);
    });
    let mut rec = [0u8; (3 + 2 * TOP) * codec::MAX_VARINT + codec::MAX_RECORD_HEADER];
    let live = LIVE.load(Ordering::Relaxed).wrapping_sub(tally::deferred());
    if let Some(at) = codec::snapshot_record(&mut rec, now_ns, live, &top[..n]) {
        output::write(&rec[at]);
    }
}

/// A segment begins: nothing counted yet, no block followed; snapshots every
/// `snapshot_ms` (0: none), the first at the first call. `forked`: in a fork
/// child (see [`blocks::clear`]).
pub fn begin(forked: bool, snapshot_ms: u64) {
    tally::clear(forked);
    for a in [&LIVE, &PEAK, &PEAK_AT] {
        a.store(0, Ordering::Relaxed);
    }
    if forked {
        SNAPPING.store(false, Ordering::Relaxed);
    }
    let interval = match snapshot_ms {
        0 => 0,
        ms => sys::TickScale::now().ticks_in(ms.saturating_mul(1_000_000)),
    };
    INTERVAL.store(interval, Ordering::Relaxed);
    NEXT_SNAPSHOT.store(u64::from(interval != 0), Ordering::Relaxed);
    coarse::set_span(clock_span(snapshot_ms, settings::get().rss_ms()));
    blocks::clear(forked);
}

/// The time, in ticks, between two reads of a thread's coarse clock: a
/// tenth of the shorter of the snapshot and RSS intervals (0: none), at
/// most [`MOST_SPAN_NS`], so that both are checked within a tenth of an
/// interval of being due, and the last call's time is that close.
fn clock_span(snapshot_ms: u64, rss_ms: u64) -> u64 {
    let ns = [snapshot_ms, rss_ms]
        .into_iter()
        .filter(|&ms| ms != 0)
        .map(|ms| ms.saturating_mul(1_000_000) / 10)
        .fold(MOST_SPAN_NS, u64::min);
    sys::TickScale::now().ticks_in(ns)
}

/// The segment ends: writes a last snapshot, every stack's counters (its
/// figures at the peak, and what is still live as leaked) and when the
/// first, last and peak calls were made. `in_signal`: from a signal handler.
pub fn end(in_signal: bool) {
    if INTERVAL.load(Ordering::Relaxed) != 0 && !SNAPPING.swap(true, Ordering::Acquire) {
        snapshot(sys::now_ns());
        SNAPPING.store(false, Ordering::Release);
    }
    // The stacks the counters name come first.
    stack_table::flush(in_signal);
    let mut out = [0u8; 4096];
    let mut len = 0;
    tally::sum(|id, k| {
        if len + MAX_COUNTERS_RECORD > out.len() {
            output::write(&out[..len]);
            len = 0;
        }
        len += codec::counters_record(&mut out[len..], id, k).unwrap_or(0);
    });
    output::write(&out[..len]);
    let scale = sys::TickScale::now();
    let (first, last) = tally::span();
    for (key, ticks) in [
        (&b"first_call_ns"[..], first),
        (b"last_call_ns", last),
        (b"peak_ns", PEAK_AT.load(Ordering::Relaxed)),
    ] {
        if ticks != 0 {
            let mut num = sys::StackStr::<32>::new();
            num.push_num(scale.time_ns(ticks));
            output::meta(key, num.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tid has a slot of its own (checked on runs of tids around
    /// every eighth of the table and at its ends), and eight consecutive
    /// tids have slots in eight different cache lines.
    #[test]
    fn consecutive_threads_count_in_lines_of_their_own() {
        let starts = (0..8).map(|k| k * TIDS / 8).chain([TIDS - 4096]);
        let tids: Vec<u32> = starts
            .flat_map(|s| (s.saturating_sub(2048)..s + 4096).map(|t| t as u32))
            .collect();
        let mut seen = std::collections::HashMap::new();
        for &t in &tids {
            let s = slot(t);
            assert!(s < TIDS, "tid {t}: slot {s}");
            if let Some(other) = seen.insert(s, t % TIDS as u32) {
                assert_eq!(
                    other,
                    t % TIDS as u32,
                    "tids {other} and {t} share slot {s}"
                );
            }
        }
        for t in (1..100_000u32).step_by(37) {
            let lines: std::collections::HashSet<usize> =
                (t..t + 8).map(|t| slot(t) * 8 / 64).collect();
            assert_eq!(lines.len(), 8, "tids {t}..{}", t + 8);
        }
    }
}
