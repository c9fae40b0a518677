//! `retype replay`: the command line of `crate::replay`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use retype_core::cheri::Format;
use retype_core::heap::HeapKind;

use crate::names::List;
use crate::replay::cheri::CheriRun;
use crate::replay::placement::Placement;
use crate::replay::rows::Row;
use crate::replay::score::Timing;
use crate::replay::Replay;

#[derive(Args)]
pub struct ReplayArgs {
    /// malloc-lab `.rep` trace files, or recordings and other traces `retype trace` reads.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Heaps to replay on: names separated by commas, or `all`.
    #[arg(long, value_name = "P[,P...]|all", default_value = "all")]
    heap: List<HeapKind>,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Check every invariant of the heap after every request (slow).
    #[arg(long)]
    check: bool,
    /// Time each trace on each heap for at least this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = Timing::DEFAULT.min_time.as_millis() as u64)]
    min_time_ms: u64,
    /// Time at least this many runs of each trace on each heap (the fastest counts).
    #[arg(long, value_name = "N", default_value_t = Timing::DEFAULT.runs, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Also run each trace on each heap in CHERI mode: every block a capability of this
    /// format with exactly representable bounds; padding, heap size and alignment
    /// fragmentation beside the plain run (seed 004; see docs/cheri.md).
    #[arg(long, value_name = "morello|rv64|rv32", value_parser = crate::cmd::cheri::format_parser())]
    cheri: Option<Format>,
    /// Also write a self-contained HTML report: utilization, heap maps at the
    /// peak, size and lifetime histograms, live bytes and threads of recordings.
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
}

pub fn run_cmd(args: ReplayArgs) -> Result<()> {
    let replay = Replay {
        traces: args.traces,
        heaps: args.heap.0,
        timing: Timing {
            check: args.check,
            runs: args.runs,
            min_time: Duration::from_millis(args.min_time_ms),
        },
        cheri: args.cheri,
    };
    let mut out = io::stdout().lock();
    let mut table = Table::new(&mut out, args.json)?;
    let outcome = replay.run(&mut |row| Ok(table.row(&row)?))?;
    table.placements(&outcome.placements)?;
    table.cheri()?;
    let figures = outcome.figures;
    if let Some(path) = args.report {
        let page = crate::report::Page {
            title: "retype replay",
            intro: "Heap replays: utilization per trace and heap, each heap's map at the trace's peak, request sizes and lifetimes; for recorded programs, live bytes over time and each thread's CPU and wait time.",
            parts: vec![crate::report::replay::part(&figures)],
        };
        std::fs::write(&path, page.html())
            .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes the rows to standard output as a table (with a header) or as JSON lines.
struct Table<'a, W: Write> {
    out: &'a mut W,
    json: bool,
    /// The CHERI runs seen, for their table at the end: trace, heap, plain utilization.
    cheri: Vec<(String, &'static str, f64, CheriRun)>,
}

/// The table's row format: trace, heap, ops, util, frag4, kops, perfidx.
macro_rules! table_row {
    ($out:expr, $($cell:expr),+) => {
        writeln!($out, "{:<22} {:<18} {:>7} {:>6.3} {:>8} {:>10.1} {:>8.1}", $($cell),+)
    };
}

impl<'a, W: Write> Table<'a, W> {
    fn new(out: &'a mut W, json: bool) -> io::Result<Self> {
        if !json {
            writeln!(
                out,
                "{:<22} {:<18} {:>7} {:>6} {:>8} {:>10} {:>8}",
                "trace", "heap", "ops", "util", "frag4", "kops", "perfidx"
            )?;
        }
        Ok(Table {
            out,
            json,
            cheri: Vec::new(),
        })
    }

    fn row(&mut self, row: &Row) -> io::Result<()> {
        if self.json {
            // Through a JSON value, whose keys are sorted, as they always were.
            let value = serde_json::to_value(row).map_err(io::Error::other)?;
            return writeln!(self.out, "{value}");
        }
        match row {
            Row::Score(r) => {
                if let Some(c) = &r.cheri {
                    self.cheri.push((r.name.clone(), r.heap, r.util, c.clone()));
                }
                let frag4 = r.frag4.map_or("-".to_string(), |f| format!("{f:.3}"));
                table_row!(self.out, r.name, r.heap, r.ops, r.util, frag4, r.kops, r.perfidx)
            }
            Row::Total(r) => table_row!(
                self.out,
                format!("TOTAL ({} traces)", r.traces),
                r.heap,
                r.ops,
                r.util,
                "",
                r.kops,
                r.perfidx
            ),
        }
    }

    /// The placement table of recorded traces: holes between live blocks at
    /// the peak, and reallocs that moved or grew in place (tables only: the
    /// JSON rows carry these figures already).
    fn placements(&mut self, rows: &[(String, HeapKind, Placement)]) -> io::Result<()> {
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

    /// The CHERI table (tables only: the JSON rows carry a `cheri` object): each trace and
    /// heap's utilization plain and in CHERI mode, the padding and the blocks rounded, the
    /// alignment fragmentation; then the padding by size range over every run.
    fn cheri(&mut self) -> io::Result<()> {
        let Some(format) = self.cheri.first().map(|c| c.3.format) else {
            return Ok(());
        };
        writeln!(
            self.out,
            "\nCHERI ({format}): every block a capability with exact bounds"
        )?;
        writeln!(
            self.out,
            "{:<22} {:<18} {:>6} {:>6} {:>9} {:>9} {:>12} {:>10}",
            "trace", "heap", "util", "cheri", "rounded", "realigned", "padding", "align frag"
        )?;
        for (trace, heap, util, c) in &self.cheri {
            writeln!(
                self.out,
                "{:<22} {:<18} {:>6.3} {:>6.3} {:>9} {:>9} {:>12} {:>10}",
                trace,
                heap,
                util,
                c.util,
                c.rounded,
                c.realigned,
                c.padding,
                c.alignment_fragmentation
            )?;
        }
        Ok(())
    }
}
