//! What the report shows of a trace apart from the heaps: its request sizes,
//! lifetimes (in requests), and for a recording its live bytes over time and
//! its threads' CPU and wait time.

use std::collections::HashMap;

use retype_trace::summary::Log2Histogram;

use super::program::{Program, Step};
use crate::report::replay::{ThreadTimes, TraceFigures};

pub fn trace_figures(prog: &Program) -> TraceFigures {
    let mut born = vec![0usize; prog.slots];
    let (mut sizes, mut lifetimes) = (Log2Histogram::default(), Log2Histogram::default());
    for (i, step) in prog.steps.iter().enumerate() {
        match *step {
            Step::Alloc { slot, size, .. } => {
                sizes.add(size as u64);
                born[slot] = i;
            }
            Step::Realloc { size, .. } => sizes.add(size as u64),
            Step::Free { slot } => lifetimes.add((i - born[slot]) as u64),
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
