//! The replay's results as a table or as JSON lines, written to the output the
//! command was given (a closed pipe then ends the command quietly).

use std::io::{self, Write};

use retype_core::heap::HeapKind;

use super::placement::Placement;
use super::program::Program;
use super::score::{perf_index, Score};

/// Writes rows to `out` as a table (with a header) or as JSON lines.
pub struct Rows<'a, W: Write> {
    out: &'a mut W,
    json: bool,
}

/// A JSON number, or null for a value JSON cannot hold (NaN, infinity).
fn number(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

impl<'a, W: Write> Rows<'a, W> {
    pub fn new(out: &'a mut W, json: bool) -> io::Result<Self> {
        if !json {
            writeln!(
                out,
                "{:<22} {:<18} {:>7} {:>6} {:>8} {:>10} {:>8}",
                "trace", "heap", "ops", "util", "frag4", "kops", "perfidx"
            )?;
        }
        Ok(Rows { out, json })
    }

    /// The row of `prog` on `heap`.
    pub fn score(&mut self, prog: &Program, heap: HeapKind, s: &Score) -> io::Result<()> {
        if self.json {
            let p = &s.placement;
            let holes: Vec<_> = p
                .holes
                .iter()
                .flat_map(|h| h.nonempty())
                .map(|(le, count)| serde_json::json!({"le": le as u64, "count": count}))
                .collect();
            let row = serde_json::json!({
                "trace": prog.path, "heap": heap.name(), "ops": s.ops, "util": number(s.util),
                "frag4": s.frag4.map(number), "kops": number(s.kops()), "perfidx": number(s.perf_index()),
                "peak_live": prog.peak_live, "heap_size": s.heap_size, "secs": s.secs,
                "holes_at_peak": p.holes.as_ref().map_or(0, |h| h.total()), "hole_bytes_at_peak": p.hole_bytes,
                "largest_hole_at_peak": p.largest_hole, "hole_histogram": holes,
                "reallocs_moved": p.reallocs_moved, "reallocs_in_place": p.reallocs_in_place,
            });
            return writeln!(self.out, "{row}");
        }
        let frag4 = s.frag4.map_or("-".to_string(), |f| format!("{f:.3}"));
        writeln!(
            self.out,
            "{:<22} {:<18} {:>7} {:>6.3} {:>8} {:>10.1} {:>8.1}",
            prog.name,
            heap.name(),
            s.ops,
            s.util,
            frag4,
            s.kops(),
            s.perf_index()
        )
    }

    /// The total of `heap` over `traces` traces: mean utilization, throughput
    /// over all their ops.
    pub fn total(
        &mut self,
        heap: HeapKind,
        traces: usize,
        ops: usize,
        util: f64,
        kops: f64,
    ) -> io::Result<()> {
        if self.json {
            let row = serde_json::json!({
                "trace": "TOTAL", "heap": heap.name(), "traces": traces, "ops": ops, "util": number(util),
                "kops": number(kops), "perfidx": number(perf_index(util, kops)),
            });
            return writeln!(self.out, "{row}");
        }
        writeln!(
            self.out,
            "{:<22} {:<18} {:>7} {:>6.3} {:>8} {:>10.1} {:>8.1}",
            format!("TOTAL ({traces} traces)"),
            heap.name(),
            ops,
            util,
            "",
            kops,
            perf_index(util, kops)
        )
    }

    /// The placement table of recorded traces: holes between live blocks at
    /// the peak, and reallocs that moved or grew in place (tables only: the
    /// JSON rows carry these figures already).
    pub fn placements(&mut self, rows: &[(String, HeapKind, Placement)]) -> io::Result<()> {
        if self.json || rows.is_empty() {
            return Ok(());
        }
        writeln!(self.out)?;
        writeln!(
            self.out,
            "{:<22} {:<18} {:>9} {:>12} {:>12} {:>9} {:>9}",
            "trace", "heap", "holes", "hole bytes", "largest", "moved", "in place"
        )?;
        for (trace, heap, p) in rows {
            writeln!(
                self.out,
                "{:<22} {:<18} {:>9} {:>12} {:>12} {:>9} {:>9}",
                trace,
                heap.name(),
                p.holes.as_ref().map_or(0, |h| h.total()),
                p.hole_bytes,
                p.largest_hole,
                p.reallocs_moved,
                p.reallocs_in_place
            )?;
        }
        Ok(())
    }
}
