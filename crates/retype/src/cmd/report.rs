//! `retype report`: one page with everything retype measures: seed 000's
//! study from its logs, the heaps on the shipped malloc-lab traces, the
//! allocator benchmarks when `bench/run.sh` has been run, the capability
//! protocol's latencies when `bench protocol --json` has been saved,
//! seed 003's real-time experiment when `study tlm --json` has been
//! saved, and the heaps in CHERI mode with `--cheri FORMAT`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;
use retype_core::cheri::Format;
use retype_core::heap::HeapKind;
use retype_core::mm::PolicyKind;

use crate::replay::rows::Row;
use crate::replay::score::Timing;
use crate::replay::Replay;
use crate::report::{self, bench::Results, Page};
use crate::sites::Analysis;
use crate::study::data::data_dir;
use crate::study::spec::PolicySpec;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    /// `bench/run.sh`'s results (default: target/bench/results.csv of the
    /// working directory or of the workspace, when it exists).
    #[arg(long, value_name = "CSV")]
    benchmarks: Option<PathBuf>,
    /// `retype bench protocol --json`'s output (default:
    /// target/bench/protocol.jsonl of the working directory or of the
    /// workspace, when it exists).
    #[arg(long, value_name = "JSONL")]
    protocol: Option<PathBuf>,
    /// `retype study tlm --json`'s output (default: target/bench/tlm.jsonl
    /// of the working directory or of the workspace, when it exists).
    #[arg(long, value_name = "JSONL")]
    tlm: Option<PathBuf>,
    /// The data directory (holding cantrip/logs and malloclab, as traces/
    /// does), or malloc-lab and recorded traces to replay, or directories of
    /// `.rep` traces (default: the shipped traces/, found from the working
    /// directory, $RETYPE_DATA or the binary's workspace).
    #[arg(long, value_name = "DIR|TRACE", num_args = 1..)]
    traces: Vec<PathBuf>,
    /// Also replay every trace in this CHERI format (as `retype replay
    /// --cheri`) and draw what exact bounds cost each heap.
    #[arg(long, value_parser = crate::cmd::cheri::format_parser())]
    cheri: Option<Format>,
}

/// Where the report's data comes from.
struct Sources {
    /// The directory holding `cantrip/logs`.
    data: PathBuf,
    /// The traces to replay.
    traces: Vec<PathBuf>,
}

/// The `.rep` files of `dir`, sorted.
fn rep_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut t: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rep"))
        .collect();
    t.sort();
    Ok(t)
}

/// A data directory given in `--traces` supplies the study's logs and its
/// `malloclab` traces; other directories their `.rep` traces; files are
/// traces. Without a data directory, the shipped one.
fn sources(given: &[PathBuf]) -> anyhow::Result<Sources> {
    let is_data = |p: &PathBuf| p.join("cantrip/logs").is_dir();
    let data = match given.iter().find(|p| is_data(p)) {
        Some(d) => d.clone(),
        None => data_dir(None).context("pass --traces DIR (a copy of the repository's traces/)")?,
    };
    let mut traces = Vec::new();
    for p in given {
        match p {
            d if is_data(d) => traces.extend(rep_files(&d.join("malloclab"))?),
            d if d.is_dir() => traces.extend(rep_files(d)?),
            f => traces.push(f.clone()),
        }
    }
    if given.is_empty() {
        traces = rep_files(&data.join("malloclab"))?;
    }
    Ok(Sources { data, traces })
}

/// The recordings among `traces` that have call stacks, analysed for the
/// sites part.
fn recordings(traces: &[PathBuf]) -> anyhow::Result<Vec<(String, Analysis)>> {
    let mut found = Vec::new();
    for path in traces {
        let head =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        if !head.starts_with(&retype_trace::codec::MAGIC) {
            continue;
        }
        let trace =
            retype_trace::Trace::read(&head[..]).with_context(|| format!("{}", path.display()))?;
        if !trace.stacks.is_empty() {
            found.push((path.display().to_string(), Analysis::of(&trace)));
        }
    }
    Ok(found)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut src = sources(&args.traces)?;
    src.data = std::fs::canonicalize(&src.data).unwrap_or(src.data);
    eprintln!(
        "retype: study logs from {}, {} traces replayed{}",
        src.data.join("cantrip/logs").display(),
        src.traces.len(),
        if args.traces.is_empty() {
            format!(" from {}", src.data.join("malloclab").display())
        } else {
            String::new()
        }
    );
    let policies = [
        PolicyKind::BestFit,
        PolicyKind::BlindNextFit,
        PolicyKind::ClassFit,
    ];
    let policies: Vec<PolicySpec> = policies.into_iter().map(PolicySpec::kept).collect();
    let mut parts = vec![crate::cmd::study::cantrip_part(
        &policies,
        Some(src.data.clone()),
    )?];
    let recorded = recordings(&src.traces)?;
    let replay = Replay {
        traces: src.traces,
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
        cheri: args.cheri,
    };
    let mut rows = Vec::new();
    let outcome = replay.run(&mut |row| {
        if let Row::Score(r) = row {
            rows.push(r);
        }
        Ok(())
    })?;
    parts.push(report::replay::part(&outcome.figures));
    if let Some(format) = args.cheri {
        let rows: Vec<_> = rows.iter().map(|r| r.as_ref()).collect();
        parts.push(report::cheri::part(format.name(), &rows));
    }
    if !recorded.is_empty() {
        eprintln!(
            "retype: allocation sites of {} recording(s) with call stacks",
            recorded.len()
        );
        parts.push(report::sites::part(&recorded));
    }
    // Benchmark results live in the workspace's target/bench: the one in the
    // working directory, or the one beside the data.
    let found = |given: &Option<PathBuf>, name: &str| {
        given.clone().or_else(|| {
            [Path::new("."), src.data.parent().unwrap_or(Path::new("."))]
                .iter()
                .map(|w| w.join("target/bench").join(name))
                .find(|p| p.exists())
        })
    };
    if let Some(path) = found(&args.benchmarks, "results.csv") {
        eprintln!("retype: benchmarks from {}", path.display());
        parts.push(report::bench::part(&Results::read(&path)?));
    }
    if let Some(path) = found(&args.protocol, "protocol.jsonl") {
        eprintln!("retype: protocol latencies from {}", path.display());
        parts.push(report::protocol::part(&report::protocol::read(&path)?));
    }
    if let Some(path) = found(&args.tlm, "tlm.jsonl") {
        eprintln!(
            "retype: seed 003's real-time experiment from {}",
            path.display()
        );
        parts.push(report::tlm::part(&report::tlm::read(&path)?));
    }
    let page = Page {
        title: "retype report",
        intro: "Everything retype measures, drawn: seed 000's memory-manager study from its own logs (best fit, CantripOS's original next fit, and our class fit), the heap allocators on malloc-lab traces, the allocator benchmarks against mimalloc when bench/run.sh has been run, the capability protocol's latencies when bench protocol has been run, and seed 003's real-time experiment when study tlm has been run.",
        parts,
    };
    std::fs::write(&args.output, page.html())
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!("retype: wrote {}", args.output.display());
    Ok(())
}
