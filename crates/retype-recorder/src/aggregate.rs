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
//! Each stack's share of the process's peak is kept without a pass over the
//! stacks at each new peak: the peak has a number (its epoch), bumped when
//! the live bytes pass it; a stack about to change that has not changed since
//! the current peak first saves its live figures as its peak figures. So a
//! stack's figures at the peak are its saved ones if it changed since, else
//! its live ones. Exact in a single thread; with threads, as exact as the
//! order of their atomic updates (the process's peak itself is a moment only
//! up to that order).
//!
//! The counters are atomics in one array mapped here, indexed by stack id
//! (the stack table gives out fewer ids than it has slots): threads share a
//! cache line only when they allocate from one stack.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use retype_trace::codec::{self, MAX_COUNTERS_RECORD};
use retype_trace::{Counters, Event, Op};

use crate::blocks::{self, Entry};
use crate::{output, stack_table, sys};

/// Stacks counted (ids above are counted as none).
const STACKS: usize = 1 << 18;
/// Threads whose allocation counts are kept apart (by tid; higher tids share).
const TIDS: usize = 1 << 22;
/// Stacks a snapshot names.
const TOP: usize = 16;

/// One stack's counters.
#[derive(Default)]
#[repr(C)]
struct Counter {
    calls: AtomicU64,
    bytes: AtomicU64,
    failed: AtomicU64,
    frees: AtomicU64,
    live_bytes: AtomicU64,
    live_blocks: AtomicU64,
    /// Its live figures at the peak of epoch `epoch`, if it changed since.
    peak_bytes: AtomicU64,
    peak_blocks: AtomicU64,
    epoch: AtomicU64,
    temporary: AtomicU64,
}

static COUNTERS: AtomicPtr<Counter> = AtomicPtr::new(null_mut());
/// Each thread's count of allocations, by tid.
static ALLOCS: AtomicPtr<AtomicU64> = AtomicPtr::new(null_mut());
static MAPPING: AtomicBool = AtomicBool::new(false);
/// The highest stack id counted this segment.
static HIGHEST: AtomicU32 = AtomicU32::new(0);
/// Bytes live, the most live so far, and the number of that peak.
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The first and last call counted, and the peak's, in clock ticks (0: none yet).
static FIRST: AtomicU64 = AtomicU64::new(0);
static LAST: AtomicU64 = AtomicU64::new(0);
static PEAK_AT: AtomicU64 = AtomicU64::new(0);
/// When the next snapshot is due (ns), the interval (ns, 0: none), and the
/// snapshot being taken.
static NEXT_SNAPSHOT: AtomicU64 = AtomicU64::new(0);
static INTERVAL: AtomicU64 = AtomicU64::new(0);
static SNAPPING: AtomicBool = AtomicBool::new(false);

/// The counters and the threads' allocation counts, mapped on first use.
fn arrays() -> Option<(&'static [Counter], &'static [AtomicU64])> {
    let mut c = COUNTERS.load(Ordering::Acquire);
    if c.is_null() {
        if MAPPING.swap(true, Ordering::AcqRel) {
            return None;
        }
        let a = sys::map(TIDS * 8).cast::<AtomicU64>();
        c = sys::map(STACKS * std::mem::size_of::<Counter>()).cast::<Counter>();
        if a.is_null() || c.is_null() {
            return None;
        }
        ALLOCS.store(a, Ordering::Release);
        COUNTERS.store(c, Ordering::Release);
    }
    let a = ALLOCS.load(Ordering::Acquire);
    // SAFETY: both mappings are zeroed (valid atomics), never unmapped, of these lengths.
    unsafe {
        Some((
            std::slice::from_raw_parts(c, STACKS),
            std::slice::from_raw_parts(a, TIDS),
        ))
    }
}

/// Saves `c`'s live figures as its peak figures if it has not changed
/// since the peak of epoch `epoch` (see the module's doc).
#[inline(always)]
fn touch(c: &Counter, epoch: u64) {
    if c.epoch.load(Ordering::Relaxed) != epoch {
        c.peak_bytes
            .store(c.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        c.peak_blocks
            .store(c.live_blocks.load(Ordering::Relaxed), Ordering::Relaxed);
        c.epoch.store(epoch, Ordering::Relaxed);
    }
}

fn counter(counters: &[Counter], stack: u32) -> &Counter {
    counters.get(stack as usize).unwrap_or(&counters[0])
}

/// Counts event `e` of thread `tid`, made at `ticks`; `old` is the block it
/// frees or moves, which the caller took out of [`blocks`] before the call.
pub fn count(tid: u32, e: &Event, old: Option<Entry>, ticks: u64) {
    let Some((counters, allocs)) = arrays() else {
        return;
    };
    let epoch = EPOCH.load(Ordering::Relaxed);
    let allocs_of = |tid: u32| &allocs[tid as usize % TIDS];
    let mut delta = 0u64;
    let mut end = |b: Entry, maybe_temporary: bool| {
        let c = counter(counters, b.stack);
        touch(c, epoch);
        c.frees.fetch_add(1, Ordering::Relaxed);
        c.live_bytes.fetch_sub(b.size, Ordering::Relaxed);
        c.live_blocks.fetch_sub(1, Ordering::Relaxed);
        if maybe_temporary && allocs_of(b.tid).load(Ordering::Relaxed) == b.serial {
            c.temporary.fetch_add(1, Ordering::Relaxed);
        }
        delta = delta.wrapping_sub(b.size);
    };
    let frees_only = e.op == Op::Free || (e.op == Op::Realloc && e.size == 0 && e.ret == 0);
    if frees_only {
        if let Some(b) = old {
            end(b, true);
        }
    } else if e.ret == 0 {
        let c = counter(counters, e.stack);
        c.failed.fetch_add(1, Ordering::Relaxed);
        // A failed realloc leaves its block as it was.
        if let Some(b) = old {
            blocks::insert(e.ptr, b);
        }
    } else {
        if let Some(b) = old {
            end(b, true);
        }
        let mine = allocs_of(tid);
        let serial = mine.load(Ordering::Relaxed) + 1;
        mine.store(serial, Ordering::Relaxed);
        let block = Entry {
            size: e.size,
            stack: e.stack,
            tid,
            serial,
        };
        let (replaced, followed) = blocks::insert(e.ret, block);
        if let Some(r) = replaced {
            end(r, false);
        }
        let c = counter(counters, e.stack);
        touch(c, epoch);
        c.calls.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(e.size, Ordering::Relaxed);
        // A block that could not be followed would never be freed: not counted live.
        if followed {
            c.live_bytes.fetch_add(e.size, Ordering::Relaxed);
            c.live_blocks.fetch_add(1, Ordering::Relaxed);
            delta = delta.wrapping_add(e.size);
        }
        HIGHEST.fetch_max(e.stack.min(STACKS as u32 - 1), Ordering::Relaxed);
    }
    let live = LIVE.fetch_add(delta, Ordering::Relaxed).wrapping_add(delta);
    if (live as i64) > PEAK.load(Ordering::Relaxed) as i64
        && PEAK.fetch_max(live, Ordering::Relaxed) < live
    {
        EPOCH.fetch_add(1, Ordering::Relaxed);
        PEAK_AT.store(ticks, Ordering::Relaxed);
    }
    let _ = FIRST.compare_exchange(0, ticks, Ordering::Relaxed, Ordering::Relaxed);
    LAST.store(ticks, Ordering::Relaxed);
    maybe_snapshot(ticks);
}

/// Writes a snapshot if one is due at `ticks` (one thread takes it; the
/// others go on).
#[inline(always)]
fn maybe_snapshot(ticks: u64) {
    let interval = INTERVAL.load(Ordering::Relaxed);
    if interval == 0 {
        return;
    }
    let now = sys::TickScale::now().time_ns(ticks);
    if now < NEXT_SNAPSHOT.load(Ordering::Relaxed) || SNAPPING.swap(true, Ordering::Acquire) {
        return;
    }
    NEXT_SNAPSHOT.store(now.saturating_add(interval), Ordering::Relaxed);
    snapshot(now);
    SNAPPING.store(false, Ordering::Release);
}

/// Writes a snapshot record: the live bytes now and those of the [`TOP`]
/// stacks with the most.
fn snapshot(now_ns: u64) {
    let Some((counters, _)) = arrays() else {
        return;
    };
    let mut top = [(0u32, 0u64); TOP];
    let mut n = 0;
    for (id, c) in counters[..=HIGHEST.load(Ordering::Relaxed) as usize]
        .iter()
        .enumerate()
    {
        let bytes = c.live_bytes.load(Ordering::Relaxed);
        if bytes == 0 || (n == TOP && bytes <= top[TOP - 1].1) {
            continue;
        }
        // Insert in order, most first, dropping the last if full.
        let mut at = n.min(TOP - 1);
        while at > 0 && top[at - 1].1 < bytes {
            top[at] = top[at - 1];
            at -= 1;
        }
        top[at] = (id as u32, bytes);
        n = (n + 1).min(TOP);
    }
    let mut rec = [0u8; (3 + 2 * TOP) * codec::MAX_VARINT + codec::MAX_RECORD_HEADER];
    let live = LIVE.load(Ordering::Relaxed);
    if let Some(at) = codec::snapshot_record(&mut rec, now_ns, live, &top[..n]) {
        output::write(&rec[at]);
    }
}

/// A segment begins: nothing counted yet, no block followed; snapshots every
/// `snapshot_ms` (0: none). `forked`: in a fork child (see [`blocks::clear`]).
pub fn begin(forked: bool, snapshot_ms: u64) {
    if let Some((counters, _)) = arrays() {
        for c in &counters[..=HIGHEST.load(Ordering::Relaxed) as usize] {
            for a in [
                &c.calls,
                &c.bytes,
                &c.failed,
                &c.frees,
                &c.live_bytes,
                &c.live_blocks,
                &c.peak_bytes,
                &c.peak_blocks,
                &c.epoch,
                &c.temporary,
            ] {
                a.store(0, Ordering::Relaxed);
            }
        }
    }
    for a in [
        &LIVE,
        &PEAK,
        &EPOCH,
        &FIRST,
        &LAST,
        &PEAK_AT,
        &NEXT_SNAPSHOT,
    ] {
        a.store(0, Ordering::Relaxed);
    }
    HIGHEST.store(0, Ordering::Relaxed);
    if forked {
        SNAPPING.store(false, Ordering::Relaxed);
    }
    INTERVAL.store(snapshot_ms.saturating_mul(1_000_000), Ordering::Relaxed);
    blocks::clear(forked);
}

/// The segment ends: writes a last snapshot, every stack's counters (its
/// figures at the peak, and what is still live as leaked) and when the
/// first, last and peak calls were made. `in_signal`: from a signal handler.
pub fn end(in_signal: bool) {
    let Some((counters, _)) = arrays() else {
        return;
    };
    if INTERVAL.load(Ordering::Relaxed) != 0 && !SNAPPING.swap(true, Ordering::Acquire) {
        snapshot(sys::now_ns());
        SNAPPING.store(false, Ordering::Release);
    }
    // The stacks the counters name come first.
    stack_table::flush(in_signal);
    let epoch = EPOCH.load(Ordering::Relaxed);
    let mut out = [0u8; 4096];
    let mut len = 0;
    for (id, c) in counters[..=HIGHEST.load(Ordering::Relaxed) as usize]
        .iter()
        .enumerate()
    {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let changed = get(&c.epoch) == epoch;
        let k = Counters {
            calls: get(&c.calls),
            bytes: get(&c.bytes),
            failed: get(&c.failed),
            frees: get(&c.frees),
            peak_blocks: get(if changed {
                &c.peak_blocks
            } else {
                &c.live_blocks
            }),
            peak_bytes: get(if changed {
                &c.peak_bytes
            } else {
                &c.live_bytes
            }),
            leaked_blocks: get(&c.live_blocks),
            leaked_bytes: get(&c.live_bytes),
            temporary: get(&c.temporary),
        };
        if k == Counters::default() {
            continue;
        }
        if len + MAX_COUNTERS_RECORD > out.len() {
            output::write(&out[..len]);
            len = 0;
        }
        len += codec::counters_record(&mut out[len..], id as u32, &k).unwrap_or(0);
    }
    output::write(&out[..len]);
    let scale = sys::TickScale::now();
    for (key, at) in [
        (&b"first_call_ns"[..], &FIRST),
        (b"last_call_ns", &LAST),
        (b"peak_ns", &PEAK_AT),
    ] {
        let ticks = at.load(Ordering::Relaxed);
        if ticks != 0 {
            let mut num = sys::StackStr::<32>::new();
            num.push_num(scale.time_ns(ticks));
            output::meta(key, num.as_bytes());
        }
    }
}
