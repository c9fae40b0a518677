//! `retype report`: one page with everything retype measures: seed 000's
//! study from its logs, the heaps on the shipped malloc-lab traces, and the
//! allocator benchmarks when `bench/run.sh` has been run.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;
use retype_core::heap::HeapKind;
use retype_core::mm::PolicyKind;

use crate::replay::score::Timing;
use crate::replay::Replay;
use crate::report::{self, bench::Results};
use crate::study::data::data_dir;
use crate::study::spec::PolicySpec;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    /// `bench/run.sh`'s results (default: target/bench/results.csv when it exists).
    #[arg(long, value_name = "CSV")]
    benchmarks: Option<PathBuf>,
    /// Malloc-lab or recorded traces to replay (default: traces/malloclab/*.rep).
    #[arg(long, value_name = "TRACE", num_args = 1..)]
    traces: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let policies = [
        PolicyKind::BestFit,
        PolicyKind::BlindNextFit,
        PolicyKind::ClassFit,
    ];
    let policies: Vec<PolicySpec> = policies.into_iter().map(PolicySpec::kept).collect();
    let mut sections = crate::cmd::study::cantrip_sections(&policies, None)?;
    let traces = if args.traces.is_empty() {
        let dir = data_dir(None)?.join("malloclab");
        let mut t: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}: pass --traces", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rep"))
            .collect();
        t.sort();
        t
    } else {
        args.traces.clone()
    };
    let replay = Replay {
        traces,
        heaps: vec![
            HeapKind::BestFit,
            HeapKind::IndexedBestFit,
            HeapKind::Segregated,
            HeapKind::Tlsf,
            HeapKind::Buddy,
        ],
        timing: Timing {
            check: false,
            runs: 1,
            min_time: Duration::ZERO,
        },
        json: false,
    };
    let figures = replay.run(&mut std::io::sink())?;
    sections.extend(report::replay::sections(&figures));
    let bench = args.benchmarks.clone().or_else(|| {
        let default = PathBuf::from("target/bench/results.csv");
        default.exists().then_some(default)
    });
    if let Some(path) = bench {
        sections.push(report::bench::section(&Results::read(&path)?));
    }
    let intro = "Everything retype measures, drawn: seed 000's memory-manager study from its own logs (best fit, CantripOS's original next fit, and our class fit), the heap allocators on malloc-lab traces, and the allocator benchmarks against mimalloc when bench/run.sh has been run.";
    std::fs::write(
        &args.output,
        report::html("retype report", intro, &sections),
    )
    .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!("retype: wrote {}", args.output.display());
    Ok(())
}
