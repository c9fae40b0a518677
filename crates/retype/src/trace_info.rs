//! A trace's summary under the JSON keys of `retype trace info --json`,
//! which the Python module returns too.

use std::path::Path;

use retype_trace::phase::{phases, Phase};
use retype_trace::recorded::windows;
use retype_trace::sites::SiteStats;
use retype_trace::summary::{Log2Histogram, Summary};
use retype_trace::{Kind, MapOp, Op, Trace};
use serde_json::{json, Value};

fn histogram_json(h: &Log2Histogram) -> Value {
    h.nonempty()
        .map(|(le, count)| json!({"le": le as u64, "count": count}))
        .collect()
}

/// The program's mapping calls by op name (outside the heap: not in `ops`).
pub fn mapping_calls(t: &Trace) -> serde_json::Map<String, Value> {
    [MapOp::Mmap, MapOp::Munmap, MapOp::Mremap, MapOp::Brk]
        .into_iter()
        .map(|op| {
            let n = t.mappings.iter().filter(|m| m.op == op).count();
            (op.name().to_string(), json!(n))
        })
        .collect()
}

/// `retype trace info --json FILE`: the trace `t` read from `file`, and its
/// summary `s`.
pub fn json(file: &Path, t: &Trace, s: &Summary) -> Value {
    let ops: serde_json::Map<String, Value> = Op::ALL
        .iter()
        .map(|op| {
            (
                op.name().to_string(),
                json!(s.ops.get(op).copied().unwrap_or(0)),
            )
        })
        .collect();
    let threads: Vec<Value> = s
        .threads
        .iter()
        .map(|t| {
            let mut v = json!({"thread": t.thread, "events": t.events});
            if let Some(m) = t.summary {
                v["lifetime_ns"] = json!(m.lifetime_ns());
                v["user_ns"] = json!(m.user_ns);
                v["system_ns"] = json!(m.system_ns);
                v["wait_ns"] = json!(m.wait_ns());
                v["voluntary_switches"] = json!(m.voluntary_switches);
                v["involuntary_switches"] = json!(m.involuntary_switches);
            }
            v
        })
        .collect();
    let meta: Vec<Value> = t.meta.iter().map(|(k, v)| json!([k, v])).collect();
    let mut v = json!({
        "file": file,
        "recording": s.kind.name(),
        "meta": meta,
        "events": s.events,
        "duration_ns": s.duration_ns,
        "segments": s.segments,
        "ops": ops,
        "threads": threads,
        "bytes_requested": s.bytes_requested,
        "size_histogram": histogram_json(&s.sizes),
        "lifetime_histogram_ns": histogram_json(&s.lifetimes_ns),
        "lifetime_histogram_events": histogram_json(&s.lifetimes_events),
        "latency_measured_calls": s.latency_measured,
        "latency_total_ns": s.latency_total_ns,
        "latency_histogram_ns": histogram_json(&s.latencies_ns),
        "latency_max_ns": s.latency_max_ns,
        "latency_max_running_ns": s.latency_max_running_ns,
        "descheduled_calls": s.descheduled,
        "peak_live_bytes": s.peak_live_bytes,
        "peak_live_blocks": s.peak_live_blocks,
        "peak_event": s.peak_event,
        "peak_time_ns": s.peak_time_ns,
        "live_at_end_blocks": s.live_at_end_blocks,
        "live_at_end_bytes": s.live_at_end_bytes,
        "failed_allocations": s.failed_allocations,
        "free_null": s.free_null,
        "unknown_pointers": s.unknown_pointers,
        "reallocs_moved": s.reallocs_moved,
        "reallocs_in_place": s.reallocs_in_place,
        "temporary_allocations": s.temporary_allocations,
        "stacks": t.stacks.len(),
        "events_with_stack": t.events.iter().filter(|e| e.stack != 0).count(),
        "modules": t.modules.len(),
        "cut_short": t.cut_short.map(|c| json!({"at_byte": c.at_byte, "events": c.events})),
        "windows": windows(t).iter().map(|w| json!({
            "start_ns": w.start_ns,
            "stop_ns": w.stop_ns,
            "opened_by": w.opened_by,
            "closed_by": w.closed_by,
            "events": w.events,
        })).collect::<Vec<_>>(),
        "phases": phases(t).iter().map(|p| json!({
            "name": p.name,
            "start_ns": p.start_ns,
            "end_ns": p.end_ns,
            "events": p.events,
        })).collect::<Vec<_>>(),
    });
    v["sample_bytes"] = json!(s.kind.sample_bytes());
    if s.kind == Kind::Aggregate {
        let sum = |f: fn(&retype_trace::Counters) -> u64| -> u64 {
            t.counters.iter().map(|c| f(&c.counters)).sum()
        };
        v["counted"] = json!({
            "allocations": sum(|c| c.calls),
            "failed": sum(|c| c.failed),
            "frees": sum(|c| c.frees),
            "snapshots": t.snapshots.len(),
        });
    }
    v["rss_samples"] = json!(t.rss.len());
    v["rss_max_bytes"] = json!(t.rss.iter().map(|r| r.rss_bytes).max());
    v["mapping_calls"] = json!(mapping_calls(t));
    v
}

/// `retype trace info --phase NAME --json`'s `phase`: the phase `p` and its figures `f`.
pub fn phase_json(p: &Phase, f: &SiteStats) -> Value {
    json!({
        "name": p.name,
        "start_ns": p.start_ns,
        "end_ns": p.end_ns,
        "events": p.events,
        "calls": f.calls,
        "bytes": f.bytes,
        "failed": f.failed,
        "peak_bytes": f.peak_bytes,
        "peak_blocks": f.peak_blocks,
        "leaked_bytes": f.leaked_bytes,
        "leaked_blocks": f.leaked_blocks,
    })
}
