//! `retype study`: memory-manager workloads under placement policies, as
//! seed 000's tables; `retype study cantrip` regenerates the thesis's tables
//! from its own logs with the published figures beside ours.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use retype_core::cheri::Format;
use retype_core::mm::{Layout, PolicyKind};
use retype_core::objects::{Arch, Config};

use crate::names;
use crate::progress::Progress;
use crate::report::study::StudyPart;
use crate::report::{Page, Part};
use crate::study::cantrip::{self, Headline, LogMatch};
use crate::study::data::Prepared;
use crate::study::run::{self, Run, Workload};
use crate::study::spec::{parse_layout, Policies, PolicySpec, Workloads};
use crate::study::summary::kib;
use crate::study::tables;
use crate::study::{latency, series};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// Tables 4.3–4.5 of seed 000 from its own logs, the thesis's figures beside ours.
    Cantrip,
}

/// Experiments of other seeds, each with its own flags.
#[derive(Subcommand, Debug)]
pub enum Experiment {
    /// Seed 003's real-time experiment (TLM): per-thread user, kernel and
    /// wait time, system calls and call latencies under glibc, jemalloc,
    /// mimalloc, tcmalloc and retype-malloc
    Tlm(crate::cmd::tlm::Args),
    /// Seed 004 in capability terms: exact bounds per workload and size
    /// range in each CHERI format, the seed's huge-page regions, and what
    /// retype-malloc's layout would pad on Morello
    Cheri(crate::cmd::cheri_study::Args),
}

#[derive(ClapArgs, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    experiment: Option<Experiment>,
    /// `cantrip`: regenerate seed 000's tables from its logs.
    preset: Option<Preset>,
    /// Policies, comma-separated: blind-next-fit, next-fit, first-fit, best-fit,
    /// worst-fit, class-fit, or `all`; append `:lifted` to lift the watermark rule.
    #[arg(long, default_value = "all")]
    policy: Policies,
    /// Workloads, comma-separated: uniform:seed=S,ops=N,free=F, app:NAME, seq:1|2|3,
    /// log:PATH (a CantripOS log), script:PATH.
    #[arg(long, default_value = "uniform:seed=42,ops=1000,free=48")]
    workload: Workloads,
    /// Slabs: `cantrip` (seed 000's 22 slabs), `cantrip*K`, or sizes in bytes.
    #[arg(long, default_value = "cantrip", value_parser = parse_layout)]
    layout: Layout,
    /// Object sizes of this architecture: riscv32 (with MCS, as CantripOS), riscv64, x86_64, aarch64.
    #[arg(long, default_value = "riscv32", value_parser = |s: &str| names::one_of::<Arch>("architecture", s))]
    arch: Arch,
    /// Print one JSON object per line per (workload, policy) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the per-op series of every run to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write a self-contained HTML report with seed 000's figures.
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Where the CantripOS logs are (default: traces/ of the repository).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// `cantrip`: after the summary, every table in full with its recovery
    /// notes and how well each log is matched.
    #[arg(long)]
    verbose: bool,
    /// Also size every object, slab and request of each run as a capability
    /// with exact bounds in this CHERI format: padding, rounding,
    /// realignment, and the fragmentation so counted beside the plain run's
    /// (see docs/cheri.md).
    #[arg(long, value_name = "morello|rv64|rv32", value_parser = crate::cmd::cheri::format_parser())]
    cheri: Option<Format>,
    /// Print nothing (when `retype report` gathers the figures).
    #[arg(skip)]
    quiet: bool,
}

/// The report being assembled, one section per workload.
type Report = Option<StudyPart>;

/// The study's part of a report, with its anchor and title.
fn study_part(args: &Args) -> StudyPart {
    match args.preset {
        Some(Preset::Cantrip) => StudyPart::new("study", "Seed 000: the memory-manager study"),
        None => StudyPart::new("study", "Memory-manager study"),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.experiment {
        Some(Experiment::Tlm(a)) => return crate::cmd::tlm::run(a),
        Some(Experiment::Cheri(a)) => return crate::cmd::cheri_study::run(a),
        None => {}
    }
    let part = execute(&args)?;
    if let (Some(path), Some(part)) = (&args.report, part) {
        let page = Page {
            title: "retype study",
            intro: "Seed 000's figures for every workload and policy of this study: memory profiles against cumulative bytes requested, fragmentation, per-slab snapshots and time per request.",
            parts: vec![part.part(summary_line(&args))],
        };
        std::fs::write(path, page.html())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn summary_line(args: &Args) -> &'static str {
    match args.preset {
        Some(Preset::Cantrip) => "Tables 4.3–4.5 of seed 000 regenerated from the thesis's own logs: each policy's peak total fragmentation beside the thesis's (ours marked where it differs by more than 5 %), and the share of operations that match each log exactly.",
        None => "Each workload's peak total fragmentation under each policy.",
    }
}

/// The report part of seed 000's study from its logs (`study cantrip`)
/// under `policies`, printing nothing.
pub fn cantrip_part(policies: &[PolicySpec], data: Option<PathBuf>) -> anyhow::Result<Part> {
    let args = Args {
        experiment: None,
        preset: Some(Preset::Cantrip),
        policy: Policies(policies.to_vec()),
        workload: Workloads(Vec::new()),
        layout: Layout::cantrip(),
        arch: Arch::Riscv32,
        json: false,
        csv: None,
        report: Some(PathBuf::new()),
        data,
        verbose: false,
        cheri: None,
        quiet: true,
    };
    let part = execute(&args)?.expect("a report was asked for");
    Ok(part.part(summary_line(&args)))
}

/// Runs the study; returns the report's sections when one was asked for.
fn execute(args: &Args) -> anyhow::Result<Report> {
    let config = run::config_for(args.arch);
    let layout = &args.layout;
    let policies = &args.policy.0;
    let mut csv = args.csv.as_deref().map(CsvOut::create).transpose()?;
    let mut report: Report = args.report.as_ref().map(|_| study_part(args));
    match args.preset {
        Some(Preset::Cantrip) => cantrip(args, config, layout, policies, &mut csv, &mut report)?,
        None => {
            let prepared = args
                .workload
                .0
                .iter()
                .map(|w| Prepared::from_spec(w, config, layout))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut progress = Progress::new((prepared.len() * policies.len()) as u64, "study");
            for w in &prepared {
                let runs = policies
                    .iter()
                    .map(|&p| {
                        progress.step(&format!("{} under {p}", w.name));
                        run::run_one(w, p, config, layout, report.is_some(), args.cheri)
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let published = vec![None; runs.len()];
                let w = Workload {
                    title: w.name.clone(),
                    runs,
                    published,
                    notes: Vec::new(),
                };
                emit(args, &w, &mut csv, &mut report)?;
            }
        }
    }
    if let Some(c) = csv {
        c.finish()?;
    }
    Ok(report)
}

/// Prints the runs of one workload as a table (or JSON lines), appends
/// their series to the CSV file and adds their section to the report.
fn emit(
    args: &Args,
    w: &Workload,
    csv: &mut Option<CsvOut>,
    report: &mut Report,
) -> anyhow::Result<()> {
    keep(w, csv, report)?;
    print(args, w)
}

/// Appends the runs' series to the CSV file and adds their section to the report.
fn keep(w: &Workload, csv: &mut Option<CsvOut>, report: &mut Report) -> anyhow::Result<()> {
    if let Some(c) = csv {
        for r in &w.runs {
            c.series(r)?;
        }
    }
    if let Some(part) = report {
        part.add(w);
    }
    Ok(())
}

/// Prints the runs of one workload as a table, or as JSON lines.
fn print(args: &Args, w: &Workload) -> anyhow::Result<()> {
    if args.quiet {
        return Ok(());
    }
    if args.json {
        for r in &w.runs {
            outln!("{}", run::json(r));
        }
        return Ok(());
    }
    outln!("{}", tables::render(&w.title, &w.columns()));
    for r in &w.runs {
        if let Some(a) = &r.agreement {
            outln!("{}", tables::agreement_line(&r.policy.to_string(), a));
        }
    }
    outln!();
    print_cheri(w)
}

/// The CHERI table of one workload's runs, when they were sized.
fn print_cheri(w: &Workload) -> anyhow::Result<()> {
    let Some(first) = w.runs.first().and_then(|r| r.cheri.as_ref()) else {
        return Ok(());
    };
    let title = w.title.lines().next().unwrap_or_default();
    outln!(
        "CHERI ({}), {title}: every object, slab and request as a capability with exact bounds, measured from the run's placements",
        first.format
    );
    outln!(
        "{:<16} {:>8} {:>8} {:>9} {:>8} | {:>8} {:>8} {:>9} {:>9} {:>9} | total frag KiB, peak / avg",
        "policy", "objects", "rounded", "realigned", "padding", "requests", "rounded", "realigned", "padding", "peak live"
    );
    for r in &w.runs {
        let Some(c) = &r.cheri else { continue };
        let (o, q) = (c.objects.total(), c.requests.total());
        let (plain, counted) = (&r.summary, &c.summary);
        outln!(
            "{:<16} {:>8} {:>8} {:>9} {:>8} | {:>8} {:>8} {:>9} {:>9} {:>9} | plain {:.2} / {:.2}, CHERI {:.2} / {:.2}",
            r.policy.to_string(),
            o.requests,
            o.rounded,
            o.realigned,
            o.padding,
            q.requests,
            q.rounded,
            q.realigned,
            q.padding,
            c.requests_peak_live_padding,
            kib(plain.peak_frag_total as f64),
            kib(plain.avg_frag_total),
            kib(counted.peak_frag_total as f64),
            kib(counted.avg_frag_total),
        );
    }
    let s = first.slabs.total();
    outln!(
        "slabs: {} untyped capabilities, {} rounded, {} realigned, {} bytes of padding",
        s.requests,
        s.rounded,
        s.realigned,
        s.padding
    );
    outln!("(objects: every seL4 object retyped, at the kernel's address; requests: each served request as one capability over its objects, based as its largest object; padding in bytes; the CHERI figures count the live objects' padding as alignment fragmentation.)\n");
    Ok(())
}

/// `study cantrip`: the thesis's workloads from its logs, each printed as
/// it is done, then how well each log is matched.
fn cantrip(
    args: &Args,
    config: Config,
    layout: &Layout,
    policies: &[PolicySpec],
    csv: &mut Option<CsvOut>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let shots = report.is_some();
    // Text: the summary first, so the tables are kept until the end.
    let text = !args.json && !args.quiet;
    let mut done = Vec::new();
    let matches = cantrip::run(
        args.data.as_deref(),
        config,
        layout,
        policies,
        shots,
        args.cheri,
        |w| {
            if !text {
                return emit(args, &w, csv, report);
            }
            keep(&w, csv, report)?;
            done.push(w);
            Ok(())
        },
    )?;
    if !text {
        return Ok(());
    }
    summary(&done, &matches)?;
    if !args.verbose {
        if args.cheri.is_some() {
            outln!();
            for w in &done {
                print_cheri(w)?;
            }
        }
        outln!("\nEach table in full, with the recovery notes and the match with each log: retype study cantrip --verbose");
        return Ok(());
    }
    outln!();
    for w in &done {
        print(args, w)?;
    }
    let own = policies
        .iter()
        .any(|&p| p == PolicySpec::kept(PolicyKind::ClassFit));
    outln!(
        "Exact per-op agreement with the logs (bytes in use, slab resets, both fragmentations):"
    );
    for LogMatch {
        workload: w,
        policy: p,
        exact: f,
        death,
    } in &matches
    {
        let why = death.map_or_else(String::new, |op| {
            format!("  (no choice of frees agrees past request {op})")
        });
        outln!("  {:>5.1} %  {p:<15} {w}{why}", 100.0 * f);
    }
    if own {
        outln!("\n(class-fit is retype's own policy; see docs/reproduction-000.md for its goal against best fit.)");
    }
    Ok(())
}

/// `study cantrip`'s first screen: how many logs are matched to their end,
/// and each table's total fragmentation beside the thesis's.
fn summary(done: &[Workload], matches: &[LogMatch]) -> anyhow::Result<()> {
    let whole = matches
        .iter()
        .filter(|m| m.death.is_none() && m.exact >= 1.0)
        .count();
    outln!(
        "Seed 000 from the thesis's own logs: {whole} of {} logs reproduced exactly on every request (bytes in use, slab resets, both fragmentations, failed retypes, OOMs).",
        matches.len()
    );
    outln!("Total fragmentation in KiB, peak / average: ours (the thesis's definition), in braces ours counted as the logs count where that differs, and the thesis's in brackets where it publishes them.");
    let headlines: Vec<Headline> = done.iter().map(Headline::of).collect();
    let width = headlines.iter().map(|h| h.table.len()).max().unwrap_or(0);
    for h in &headlines {
        let cells: Vec<String> = h
            .runs
            .iter()
            .map(|r| {
                let thesis = r
                    .thesis
                    .map_or_else(String::new, |(p, a)| format!(" [{p:.2} / {a:.2}]"));
                let logs = r.logs.map_or_else(String::new, |(p, a)| {
                    format!(" {{logs' count {p:.2} / {a:.2}}}")
                });
                format!(
                    "{}: {:.2} / {:.2}{logs}{thesis}",
                    r.policy, r.ours.0, r.ours.1
                )
            })
            .collect();
        outln!("  {:<width$}  {}", h.table, cells.join("; "));
    }
    let differs = headlines.iter().flat_map(|h| &h.runs).any(|r| {
        r.thesis
            .is_some_and(|(p, a)| (p - r.ours.0).abs() > 0.005 || (a - r.ours.1).abs() > 0.005)
    });
    if differs {
        outln!("Where ours and the thesis's differ, docs/reproduction-000.md says why.");
    }
    for note in done.iter().flat_map(|w| &w.notes) {
        outln!("{note}");
    }
    for line in latency::findings(done) {
        outln!("{line}");
    }
    Ok(())
}

/// The per-op series of every run, as CSV.
struct CsvOut {
    out: BufWriter<File>,
    path: PathBuf,
}

impl CsvOut {
    fn create(path: &Path) -> anyhow::Result<CsvOut> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        let names: Vec<&str> = series::columns(&[]).iter().map(|(n, _)| *n).collect();
        writeln!(out, "workload,policy,{}", names.join(","))?;
        Ok(CsvOut {
            out,
            path: path.to_path_buf(),
        })
    }

    fn series(&mut self, r: &Run) -> anyhow::Result<()> {
        let columns = series::columns(&r.steps);
        let workload = r.workload.replace('"', "\"\"");
        for i in 0..r.steps.len() {
            let cells: Vec<String> = columns.iter().map(|(_, c)| c.cell(i)).collect();
            writeln!(self.out, "\"{workload}\",{},{}", r.policy, cells.join(","))?;
        }
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.out
            .flush()
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}
