//! The replay's results as typed rows: one per trace and heap, and one per heap totalling
//! the traces. Their fields are the keys of `retype replay --json`, and what the Python
//! module returns: the command line and the API serialize the same rows.

use serde::Serialize;

use super::cheri::CheriRun;
use super::program::Program;
use super::score::{perf_index, Score};

/// A row of results.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Row {
    Score(Box<ScoreRow>),
    Total(TotalRow),
}

/// One trace replayed on one heap.
#[derive(Clone, Debug, Serialize)]
pub struct ScoreRow {
    /// The trace's path.
    pub trace: String,
    /// How a table names the trace (its file name, unless another trace shares it).
    #[serde(skip)]
    pub name: String,
    pub heap: &'static str,
    pub ops: usize,
    /// Utilization: peak live requested bytes over the heap's high-water mark.
    pub util: f64,
    /// Fragmentation #4; `None` when nothing was ever live.
    pub frag4: Option<f64>,
    pub kops: f64,
    pub perfidx: f64,
    pub peak_live: u64,
    pub heap_size: usize,
    pub secs: f64,
    pub holes_at_peak: u64,
    pub hole_bytes_at_peak: u64,
    pub largest_hole_at_peak: u64,
    /// Holes at the peak by size: `count` holes of at most `le` bytes, per power of two.
    pub hole_histogram: Vec<Holes>,
    pub reallocs_moved: u64,
    pub reallocs_in_place: u64,
    /// With `--cheri`: the same trace on the same heap in CHERI mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cheri: Option<CheriRun>,
}

/// A bucket of the hole histogram.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Holes {
    pub le: u64,
    pub count: u64,
}

/// A heap's results over every trace of the run.
#[derive(Clone, Debug, Serialize)]
pub struct TotalRow {
    /// Always `TOTAL`, where a score row names its trace.
    pub trace: &'static str,
    pub heap: &'static str,
    pub traces: usize,
    pub ops: usize,
    /// The mean of the traces' utilizations.
    pub util: f64,
    /// Throughput over all the traces' requests.
    pub kops: f64,
    pub perfidx: f64,
}

impl ScoreRow {
    /// The row of `prog` scored `s` on the heap named `heap` (and `cheri` in CHERI mode).
    pub fn new(prog: &Program, heap: &'static str, s: &Score, cheri: Option<CheriRun>) -> ScoreRow {
        let p = &s.placement;
        ScoreRow {
            trace: prog.path.clone(),
            name: prog.name.clone(),
            heap,
            ops: s.ops,
            util: s.util,
            frag4: s.frag4,
            kops: s.kops(),
            perfidx: s.perf_index(),
            peak_live: prog.peak_live,
            heap_size: s.heap_size,
            secs: s.secs,
            holes_at_peak: p.holes.as_ref().map_or(0, |h| h.total()),
            hole_bytes_at_peak: p.hole_bytes,
            largest_hole_at_peak: p.largest_hole,
            hole_histogram: p
                .holes
                .iter()
                .flat_map(|h| h.nonempty())
                .map(|(le, count)| Holes {
                    le: le as u64,
                    count,
                })
                .collect(),
            reallocs_moved: p.reallocs_moved,
            reallocs_in_place: p.reallocs_in_place,
            cheri,
        }
    }
}

impl TotalRow {
    /// The total of the heap named `heap` over `traces` traces.
    pub fn new(heap: &'static str, traces: usize, ops: usize, util: f64, kops: f64) -> TotalRow {
        TotalRow {
            trace: "TOTAL",
            heap,
            traces,
            ops,
            util,
            kops,
            perfidx: perf_index(util, kops),
        }
    }
}
