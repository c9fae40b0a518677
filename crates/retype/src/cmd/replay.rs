//! `retype replay`: the command line of `crate::replay`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use retype_core::heap::HeapKind;

use crate::names::List;
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
        json: args.json,
    };
    let figures = replay.run(&mut std::io::stdout().lock())?;
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
