//! What the report shows of a trace: each heap's utilization and its blocks
//! at the peak, and apart from the heaps its request sizes, lifetimes (in
//! requests), and for a recording its live bytes over time and its threads'
//! CPU and wait time.

use std::collections::HashMap;

use retype_core::heap::HeapKind;
use retype_trace::summary::Log2Histogram;

use retype_trace::Request;

use super::program::Program;

/// One heap's replay of one trace.
pub struct HeapRun {
    pub heap: HeapKind,
    pub util: f64,
    /// Live blocks at the peak as `[start, end)` byte offsets from the lowest.
    pub map: Vec<(u64, u64)>,
}

/// A thread of a recorded trace, times in ns.
pub struct ThreadTimes {
    pub thread: u32,
    pub user: u64,
    pub system: u64,
    pub wait: u64,
}

/// What the report shows of one trace.
pub struct TraceFigures {
    pub name: String,
    /// Requested sizes.
    pub sizes: Log2Histogram,
    /// Freed blocks' lifetimes, in requests.
    pub lifetimes: Log2Histogram,
    pub heaps: Vec<HeapRun>,
    /// Recorded traces: (ms since the first event, live KiB).
    pub live_over_time: Option<Vec<(f64, f64)>>,
    pub threads: Vec<ThreadTimes>,
}

/// What the report shows of `prog` before any heap has replayed it.
pub fn trace_figures(prog: &Program) -> TraceFigures {
    let mut born = vec![0usize; prog.slots];
    let (mut sizes, mut lifetimes) = (Log2Histogram::default(), Log2Histogram::default());
    for (i, request) in prog.requests.requests.iter().enumerate() {
        let slot = request.id() as usize;
        match *request {
            Request::Alloc { size, .. } => {
                sizes.add(size);
                born[slot] = i;
            }
            Request::Realloc { size, .. } => sizes.add(size),
            Request::Free { .. } => lifetimes.add((i - born[slot]) as u64),
        }
    }
    let (mut live_over_time, mut threads) = (None, Vec::new());
    if let Some(t) = &prog.recorded {
        let events = t.serialized();
        let t0 = events.first().map_or(0, |e| e.time_ns);
        let mut live: HashMap<u64, u64> = HashMap::new();
        let mut total = 0u64;
        let mut points = Vec::new();
        for e in &events {
            if e.op.has_ptr() {
                total -= live.remove(&e.ptr).unwrap_or(0);
            }
            if e.op.allocates() && e.ret != 0 {
                total += e.size;
                live.insert(e.ret, e.size);
            }
            points.push(((e.time_ns - t0) as f64 / 1e6, total as f64 / 1024.0));
        }
        live_over_time = Some(points);
        threads = t
            .threads
            .iter()
            .map(|th| ThreadTimes {
                thread: th.thread,
                user: th.user_ns,
                system: th.system_ns,
                wait: th.wait_ns(),
            })
            .collect();
    }
    TraceFigures {
        name: prog.name.clone(),
        sizes,
        lifetimes,
        heaps: Vec::new(),
        live_over_time,
        threads,
    }
}
