//! What `retype trace info` reports about a trace: ops by kind, threads, the
//! size histogram, block lifetimes, and the peak of live bytes.

use std::collections::{BTreeMap, HashMap};

use crate::event::{Event, Op, ThreadSummary};
use crate::heap::Heap;
use crate::kind::Kind;
use crate::sites::{per_stack, SiteStats};
use crate::trace::Trace;
use crate::window::Window;

/// Counts by powers of two: bucket `k` holds values `v` with `2^(k-1) < v <= 2^k`
/// (bucket 0 holds 0 and 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log2Histogram {
    pub buckets: Vec<u64>,
}

impl Log2Histogram {
    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    /// Counts `v` `n` times.
    pub fn add_n(&mut self, v: u64, n: u64) {
        let k = if v <= 1 {
            0
        } else {
            64 - (v - 1).leading_zeros() as usize
        };
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, 0);
        }
        self.buckets[k] += n;
    }

    /// `(upper bound, count)` of every non-empty bucket.
    pub fn nonempty(&self) -> impl Iterator<Item = (u128, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(k, &c)| (1u128 << k, c))
    }

    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// Per-thread figures: events seen in the trace, and the summary the recorder
/// wrote when the thread exited (if it did).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    pub thread: u32,
    pub events: u64,
    pub summary: Option<ThreadSummary>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub events: u64,
    pub ops: BTreeMap<Op, u64>,
    pub threads: Vec<ThreadInfo>,
    /// Requested sizes of every allocating call (including realloc).
    pub sizes: Log2Histogram,
    pub bytes_requested: u64,
    /// ns from allocation to free, for blocks freed in the trace.
    pub lifetimes_ns: Log2Histogram,
    /// Events from allocation to free (the trace's own clock, independent of time).
    pub lifetimes_events: Log2Histogram,
    pub peak_live_bytes: u64,
    pub peak_live_blocks: u64,
    /// Index (in time order) of the event that reached the peak, and its time since the first event.
    pub peak_event: u64,
    pub peak_time_ns: u64,
    /// Blocks and bytes still live at the end.
    pub live_at_end_blocks: u64,
    pub live_at_end_bytes: u64,
    pub failed_allocations: u64,
    pub free_null: u64,
    /// Frees and reallocs of addresses the trace never returned.
    pub unknown_pointers: u64,
    pub reallocs_moved: u64,
    pub reallocs_in_place: u64,
    pub duration_ns: u64,
    /// Program images (segments) in the trace.
    pub segments: u64,
    /// Calls whose latency was measured (not 0): all of them, or a sample
    /// (the recorder's `latency_every`, 64 by default).
    pub latency_measured: u64,
    /// Time inside the allocator: the measured latencies' sum, scaled to
    /// all the events when only a sample was measured (an estimate then).
    pub latency_total_ns: u64,
    /// The measured latencies.
    pub latencies_ns: Log2Histogram,
    /// The longest measured call, and the longest whose thread was not
    /// descheduled during it (the allocator's own worst case, when the trace
    /// tells: meta `descheduling`).
    pub latency_max_ns: u64,
    pub latency_max_running_ns: u64,
    /// Measured calls during which the thread was descheduled.
    pub descheduled: u64,
    /// Allocations freed before their thread allocated anything else
    /// (heaptrack's temporaries, see [`heap`](crate::heap)).
    pub temporary_allocations: u64,
    /// The kind of recording: in a sampled one the bytes, blocks, sizes,
    /// failures and temporaries are estimates (events and ops count the
    /// recorded calls); an aggregate one has no events, and gives only its
    /// counters' figures.
    pub kind: Kind,
}

struct Live {
    /// Bytes and calls it stands for ([`Kind::weigh`]).
    size: u64,
    calls: u64,
    born_ns: u64,
    born_index: u64,
}

impl Summary {
    pub fn of(trace: &Trace) -> Summary {
        let kind = Kind::of(trace);
        if kind == Kind::Aggregate {
            return Summary::counted(trace);
        }
        let segments = trace.serialized_segments();
        let events: Vec<Event> = segments.concat();
        let mut s = Summary {
            events: events.len() as u64,
            segments: segments.len().max(1) as u64,
            kind,
            ..Summary::default()
        };
        // Event indexes where a new program image starts (its heap starts empty), last first.
        let mut starts: Vec<usize> = segments
            .iter()
            .scan(0, |at, seg| {
                *at += seg.len();
                Some(*at)
            })
            .collect();
        starts.pop();
        starts.reverse();
        let first = events.iter().map(|e| e.time_ns).min().unwrap_or(0);
        s.duration_ns = events.iter().map(|e| e.time_ns).max().unwrap_or(0) - first;
        let mut per_thread: BTreeMap<u32, u64> = BTreeMap::new();
        let mut live: HashMap<u64, Live> = HashMap::new();
        let (mut live_bytes, mut live_blocks) = (0u64, 0u64);
        let mut heap = Heap::new(kind);
        for (i, e) in events.iter().enumerate() {
            if starts.last() == Some(&i) {
                starts.pop();
                live.clear();
                (live_bytes, live_blocks) = (0, 0);
                heap.clear();
            }
            let temporaries = heap
                .apply(e)
                .freed
                .into_iter()
                .flatten()
                .filter(|&(_, t)| t);
            s.temporary_allocations += temporaries.map(|(b, _)| b.calls).sum::<u64>();
            let w = kind.weigh(e.size);
            let i = i as u64;
            *s.ops.entry(e.op).or_default() += 1;
            *per_thread.entry(e.thread).or_default() += 1;
            if e.latency_ns > 0 {
                s.latency_measured += 1;
                s.latency_total_ns = s.latency_total_ns.saturating_add(e.latency_ns);
                s.latencies_ns.add(e.latency_ns);
                s.latency_max_ns = s.latency_max_ns.max(e.latency_ns);
                if e.descheduled {
                    s.descheduled += 1;
                } else {
                    s.latency_max_running_ns = s.latency_max_running_ns.max(e.latency_ns);
                }
            }
            if e.op.allocates() {
                s.sizes.add_n(e.size, w.calls);
                s.bytes_requested = s.bytes_requested.saturating_add(w.bytes);
            }
            let mut end =
                |s: &mut Summary, ptr: u64, live: &mut HashMap<u64, Live>, e: &Event| match live
                    .remove(&ptr)
                {
                    Some(b) => {
                        live_bytes -= b.size;
                        live_blocks -= b.calls;
                        s.lifetimes_ns
                            .add_n(e.time_ns.saturating_sub(b.born_ns), b.calls);
                        s.lifetimes_events.add_n(i - b.born_index, b.calls);
                    }
                    None => s.unknown_pointers += 1,
                };
            match e.op {
                Op::Free if e.ptr == 0 => s.free_null += 1,
                Op::Free => end(&mut s, e.ptr, &mut live, e),
                Op::Realloc if e.ptr != 0 && e.size == 0 && e.ret == 0 => {
                    end(&mut s, e.ptr, &mut live, e)
                }
                Op::Realloc if e.ptr != 0 => {
                    if e.ret == 0 {
                        s.failed_allocations += w.calls;
                        continue;
                    }
                    // The block lives on (moved or not): it keeps its birth.
                    let born = match live.remove(&e.ptr) {
                        Some(b) => {
                            live_bytes -= b.size;
                            live_blocks -= b.calls;
                            (b.born_ns, b.born_index)
                        }
                        None => {
                            s.unknown_pointers += 1;
                            (e.time_ns, i)
                        }
                    };
                    if e.ret == e.ptr {
                        s.reallocs_in_place += 1;
                    } else {
                        s.reallocs_moved += 1;
                    }
                    live_bytes = live_bytes.saturating_add(w.bytes);
                    live_blocks += w.calls;
                    // Moved onto a block still live: a free the trace missed.
                    if let Some(old) = live.insert(
                        e.ret,
                        Live {
                            size: w.bytes,
                            calls: w.calls,
                            born_ns: born.0,
                            born_index: born.1,
                        },
                    ) {
                        live_bytes -= old.size;
                        live_blocks -= old.calls;
                    }
                }
                _ if e.ret == 0 => s.failed_allocations += w.calls,
                _ => {
                    // A block at an address still live means a free the trace missed.
                    if let Some(old) = live.insert(
                        e.ret,
                        Live {
                            size: w.bytes,
                            calls: w.calls,
                            born_ns: e.time_ns,
                            born_index: i,
                        },
                    ) {
                        live_bytes -= old.size;
                        live_blocks -= old.calls;
                    }
                    live_bytes = live_bytes.saturating_add(w.bytes);
                    live_blocks += w.calls;
                }
            }
            if live_bytes > s.peak_live_bytes {
                s.peak_live_bytes = live_bytes;
                s.peak_live_blocks = live_blocks;
                s.peak_event = i;
                s.peak_time_ns = e.time_ns.saturating_sub(first);
            }
        }
        s.live_at_end_blocks = live_blocks;
        s.live_at_end_bytes = live_bytes;
        s.threads = threads(trace, per_thread);
        if s.latency_measured > 0 {
            let all = u128::from(s.latency_total_ns) * u128::from(s.events)
                / u128::from(s.latency_measured);
            s.latency_total_ns = u64::try_from(all).unwrap_or(u64::MAX);
        }
        s
    }

    /// An aggregate recording's summary: its counters' sums (the peak and
    /// the leaks as [`per_stack`] takes them) and its threads; no events, so
    /// no ops, histograms or latencies.
    fn counted(trace: &Trace) -> Summary {
        let stats = per_stack(trace, Window::ALL);
        let mut total = SiteStats::default();
        stats.iter().for_each(|st| total.add(st));
        let time = |key| trace.meta_value(key).and_then(|v| v.parse::<u64>().ok());
        let first = time("first_call_ns").unwrap_or(0);
        let segments: std::collections::BTreeSet<u32> =
            trace.counters.iter().map(|c| c.segment).collect();
        Summary {
            kind: Kind::Aggregate,
            segments: segments.len().max(1) as u64,
            bytes_requested: total.bytes,
            peak_live_bytes: total.peak_bytes,
            peak_live_blocks: total.peak_blocks,
            peak_time_ns: time("peak_ns").map_or(0, |p| p.saturating_sub(first)),
            live_at_end_blocks: total.leaked_blocks,
            live_at_end_bytes: total.leaked_bytes,
            failed_allocations: total.failed,
            temporary_allocations: total.temporary,
            duration_ns: time("last_call_ns").map_or(0, |l| l.saturating_sub(first)),
            threads: threads(trace, BTreeMap::new()),
            ..Summary::default()
        }
    }
}

/// Each thread that has events (`per_thread` counts them) or a summary record.
fn threads(trace: &Trace, mut per_thread: BTreeMap<u32, u64>) -> Vec<ThreadInfo> {
    let summaries: HashMap<u32, ThreadSummary> =
        trace.threads.iter().map(|t| (t.thread, *t)).collect();
    for t in summaries.keys() {
        per_thread.entry(*t).or_default();
    }
    per_thread
        .into_iter()
        .map(|(thread, events)| ThreadInfo {
            thread,
            events,
            summary: summaries.get(&thread).copied(),
        })
        .collect()
}
