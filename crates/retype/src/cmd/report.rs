//! `retype report`: one page with everything retype measures: seed 000's
//! study from its logs, the heaps on the shipped malloc-lab traces, and the
//! allocator benchmarks when `bench/run.sh` has been run.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args as ClapArgs;

use crate::report::{self, bench::Results};

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
    let mut sections = crate::cmd::study::report_sections(&[
        "cantrip",
        "--policy",
        "best-fit,blind-next-fit,class-fit",
    ])?;
    let traces: Vec<String> = if args.traces.is_empty() {
        let mut t: Vec<String> = std::fs::read_dir("traces/malloclab")
            .context("cannot list traces/malloclab: run from the repository root or pass --traces")?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rep"))
            .map(|p| p.display().to_string())
            .collect();
        t.sort();
        t
    } else {
        args.traces
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    };
    let mut argv: Vec<&str> = traces.iter().map(String::as_str).collect();
    argv.extend([
        "--heap",
        "best-fit,indexed-best-fit,segregated,tlsf,buddy",
        "--runs",
        "1",
        "--min-time-ms",
        "0",
    ]);
    sections.extend(crate::cmd::replay::report_sections(&argv)?);
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
