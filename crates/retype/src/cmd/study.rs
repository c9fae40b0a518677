//! `retype study`: memory-manager workloads under placement policies, as
//! seed 000's tables; `retype study cantrip` regenerates the thesis's tables
//! from its own logs with the published figures beside ours.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use retype_core::mm::slab::WatermarkRule;
use retype_core::mm::{Accounting, Layout, MemoryManager, PolicyKind};
use retype_core::objects::{Arch, Config};
use retype_core::workload::{drive, Step};
use retype_recovery::{Checkpoint, Death, LoggedOp, Resolved};

use crate::names;
use crate::progress::Progress;
use crate::report::study::{snapshot_points, PolicyRun, SlabShot, StudyPart};
use crate::report::{Page, Part};
use crate::study::data::{self, LogRun, Prepared};
use crate::study::logcheck::Agreement;
use crate::study::series;
use crate::study::spec::{App, Policies, PolicySpec, Workloads};
use crate::study::summary::{kib, Summary};
use crate::study::tables::{self, Column};
use crate::study::thesis::{self, Allocator, Published};

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
    /// Print nothing (when `retype report` gathers the figures).
    #[arg(skip)]
    quiet: bool,
}

/// One run: a workload under a policy.
pub(crate) struct Run {
    workload: String,
    policy: PolicySpec,
    pub(crate) steps: Vec<Step>,
    summary: Summary,
    agreement: Option<Agreement>,
    /// Per-slab states at 25, 50, 75 and 100 % of the run (for reports).
    snapshots: Vec<Vec<SlabShot>>,
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
    if let Some(Experiment::Tlm(a)) = args.experiment {
        return crate::cmd::tlm::run(a);
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

pub(crate) fn parse_layout(s: &str) -> anyhow::Result<Layout> {
    Layout::parse(s).map_err(|e| anyhow::anyhow!("{e}"))
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
        quiet: true,
    };
    let part = execute(&args)?.expect("a report was asked for");
    Ok(part.part(summary_line(&args)))
}

/// Runs the study; returns the report's sections when one was asked for.
fn execute(args: &Args) -> anyhow::Result<Report> {
    let config = config_for(args.arch);
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
                        run_one(w, p, config, layout, report.is_some())
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                emit(args, &w.name, &runs, &mut csv, &mut report, |_| None)?;
            }
        }
    }
    if let Some(c) = csv {
        c.finish()?;
    }
    Ok(report)
}

/// RISC-V 32 is CantripOS's kernel (with MCS); the others, their defaults.
pub(crate) fn config_for(arch: Arch) -> Config {
    match arch {
        Arch::Riscv32 => Config::CANTRIP,
        a => Config::new(a),
    }
}

/// Runs `w` under `policy`, timing each request; with `shots`, runs it again
/// (it is deterministic) to keep the slabs at 25, 50, 75 and 100 %. The
/// figures count as the thesis defines; a run compared with its log is
/// replayed once more under the log's own accounting ([`Accounting::LOGS`]).
pub(crate) fn run_one(
    w: &Prepared,
    policy: PolicySpec,
    config: Config,
    layout: &Layout,
    shots: bool,
) -> anyhow::Result<Run> {
    let mut steps = Vec::new();
    let epoch = Instant::now();
    replay(
        w,
        policy,
        config,
        layout,
        Accounting::THESIS,
        || epoch.elapsed().as_nanos() as u64,
        |s, _| steps.push(*s),
    )?;
    let agreement = match w.log.as_ref().filter(|l| l.policy == policy) {
        Some(l) => {
            let mut logged = Vec::new();
            replay(
                w,
                policy,
                config,
                layout,
                Accounting::LOGS,
                || 0,
                |s, _| logged.push(*s),
            )?;
            Some(Agreement::of(&logged, &l.ops))
        }
        None => None,
    };
    let mut snapshots = Vec::new();
    if shots {
        let points = snapshot_points(&steps);
        let mut op = 0;
        replay(
            w,
            policy,
            config,
            layout,
            Accounting::THESIS,
            || 0,
            |_, mm| {
                if points.contains(&op) {
                    snapshots.push(mm.slabs().iter().map(SlabShot::of).collect());
                }
                op += 1;
            },
        )?;
    }
    Ok(Run {
        workload: w.name.clone(),
        policy,
        summary: Summary::of(&steps),
        steps,
        agreement,
        snapshots,
    })
}

/// Drives a fresh manager through `w` ([`drive`]).
fn replay(
    w: &Prepared,
    policy: PolicySpec,
    config: Config,
    layout: &Layout,
    accounting: Accounting,
    clock: impl FnMut() -> u64,
    each: impl FnMut(&Step, &MemoryManager),
) -> anyhow::Result<()> {
    let mut mm = data::manager(config, layout, policy, accounting);
    drive(&mut mm, w.workload().as_mut(), clock, each)
        .with_context(|| format!("workload {}", w.name))
}

/// Prints the runs of one workload as a table (or JSON lines) and appends
/// their series to the CSV file. `published` gives the thesis's column to
/// print after a policy's, if any.
fn emit(
    args: &Args,
    title: &str,
    runs: &[Run],
    csv: &mut Option<CsvOut>,
    report: &mut Report,
    published: impl Fn(&PolicySpec) -> Option<Published>,
) -> anyhow::Result<()> {
    if let Some(c) = csv {
        for r in runs {
            c.series(r)?;
        }
    }
    let mut columns = Vec::new();
    for r in runs {
        columns.push(Column {
            label: r.policy.to_string(),
            ours: Some(r.summary.clone()),
            published: None,
        });
        if let Some(p) = published(&r.policy) {
            columns.push(Column {
                label: "(thesis)".into(),
                ours: None,
                published: Some(p),
            });
        }
    }
    let table = tables::render(title, &columns);
    if let Some(part) = report {
        let agreements: Vec<(String, f64)> = runs
            .iter()
            .filter_map(|r| Some((r.policy.to_string(), r.agreement.as_ref()?.exact_fraction())))
            .collect();
        let policy_runs: Vec<PolicyRun> = runs
            .iter()
            .map(|r| PolicyRun {
                label: r.policy.to_string(),
                steps: &r.steps,
                snapshots: &r.snapshots,
            })
            .collect();
        part.add(title, &columns, &policy_runs, &agreements);
    }
    if args.quiet {
        return Ok(());
    }
    if args.json {
        for r in runs {
            outln!("{}", json(r));
        }
        return Ok(());
    }
    outln!("{table}");
    for r in runs {
        if let Some(a) = &r.agreement {
            outln!("{}", tables::agreement_line(&r.policy.to_string(), a));
        }
    }
    outln!();
    Ok(())
}

pub(crate) fn json(r: &Run) -> serde_json::Value {
    let s = &r.summary;
    let mut v = serde_json::json!({
        "workload": r.workload,
        "policy": r.policy.kind.name(),
        "watermark": match r.policy.rule { WatermarkRule::Kept => "kept", WatermarkRule::Lifted => "lifted" },
        "ops": s.ops,
        "alloc_requests": s.alloc_requests,
        "peak_frag_total_kib": kib(s.peak_frag_total as f64),
        "avg_frag_total_kib": kib(s.avg_frag_total),
        "peak_frag_watermark_kib": kib(s.peak_frag_watermark as f64),
        "peak_frag_alignment_kib": kib(s.peak_frag_alignment as f64),
        "avg_frag_watermark_kib": kib(s.avg_frag_watermark),
        "avg_frag_alignment_kib": kib(s.avg_frag_alignment),
        "slab_resets": s.slab_resets,
        "slab_resets_per_100_allocs": s.resets_per_100_allocs(),
        "ooms": s.ooms,
        "failed_retypes": s.failed_retypes,
        "peak_bytes_in_use": s.peak_bytes_in_use,
        "bytes_requested": s.bytes_requested,
        "mean_ns_per_op": s.mean_ns(),
    });
    if let Some(a) = &r.agreement {
        v["log_exact_fraction"] = serde_json::json!(a.exact_fraction());
    }
    v
}

/// `study cantrip`: for every run of the thesis, its best-fit and next-fit
/// logs are replayed under their own policies and compared op by op; the
/// other policies replay the best-fit log's requests.
fn cantrip(
    args: &Args,
    config: Config,
    layout: &Layout,
    policies: &[PolicySpec],
    csv: &mut Option<CsvOut>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let shots = report.is_some();
    let dir = data::data_dir(args.data.as_deref())?.join("cantrip/logs");
    let mut runs_of = Vec::new();
    for f in [16, 32, 48, 64] {
        let name =
            |p: &str| format!("random_uniform_{p}_seed_42_count_1000_dealloc_chance_{f}.log");
        runs_of.push((
            format!("Table 4.3/4.4: uniform, seed 42, 1000 requests, {f} % frees"),
            name("best_fit"),
            name("next_fit"),
            Some(f),
            None,
        ));
    }
    for n in 1..=3 {
        let name = |p: &str| format!("apps_sequential_{p}_sequence_{n}.log");
        runs_of.push((
            format!("Table 4.5: application sequence {n}"),
            name("best_fit"),
            name("next_fit"),
            None,
            Some(n),
        ));
    }
    for app in <App as strum::VariantArray>::VARIANTS {
        let name = |p: &str| format!("apps_standalone_{p}_app_name_{app}.log");
        runs_of.push((
            format!("Standalone application {app} (Figures 4.2-4.5)"),
            name("best_fit"),
            name("next_fit"),
            None,
            None,
        ));
    }
    let best = PolicySpec::kept(PolicyKind::BestFit);
    let blind = PolicySpec::kept(PolicyKind::BlindNextFit);
    let mut lines = Vec::new();
    let mut progress = Progress::new(runs_of.len() as u64, "study cantrip");
    for (title, bf_name, nf_name, free, seq) in runs_of {
        progress.step(&bf_name);
        let bf_run = data::load_log(&dir.join("best_fit").join(&bf_name))?;
        let nf_run = data::load_log(&dir.join("next_fit").join(&nf_name))?;
        // Runs without OOMs got the same requests under both policies; then one
        // recovery must agree with both logs.
        let joint = data::resolve(&[&bf_run, &nf_run], config, layout).ok();
        let same = joint.is_some();
        let recovered = match joint {
            Some(r) => vec![r],
            None => vec![
                data::resolve(&[&bf_run], config, layout)?,
                data::resolve(&[&nf_run], config, layout)?,
            ],
        };
        let ambiguous: usize = recovered.iter().map(|r| r.ambiguous_frees).sum();
        let unsized_sizes: usize = recovered.iter().map(|r| r.unsized_refusals).sum();
        let bf_script = recovered[0].script.clone();
        let nf_script = recovered[recovered.len() - 1].script.clone();
        let label = |r: &LogRun| format!("log:{}", r.path.display());
        let bf = Prepared::script(label(&bf_run), bf_script, Some(bf_run));
        let nf = Prepared::script(label(&nf_run), nf_script, Some(nf_run));
        let mut runs = vec![
            run_one(&bf, best, config, layout, shots)?,
            run_one(&nf, blind, config, layout, shots)?,
        ];
        for &p in policies.iter().filter(|&&p| p != best && p != blind) {
            runs.push(run_one(&bf, p, config, layout, shots)?);
        }
        let published = |p: &PolicySpec| {
            let a = match *p {
                p if p == best => Allocator::Best,
                p if p == blind => Allocator::Next,
                _ => return None,
            };
            free.and_then(|f| thesis::uniform(f, a))
                .or_else(|| seq.and_then(|n| thesis::sequence(n, a)))
        };
        let title = if same {
            format!("{title}\n  both logs got the same requests, recovered from {bf_name} and {nf_name} together")
        } else {
            format!("{title}\n  the logs got different requests (OOMs changed the run): best-fit and the other policies replay {bf_name}, blind-next-fit replays {nf_name}")
        };
        let mut title = format!(
            "{title}\n  recovery: exact search over the frees (each free's slab left open until a reset, a dump or the end tells it, where it can; else depth first, the look-ahead's choice first); at {ambiguous} of the frees on the path it took, several sets of live allocations agreed with the logs; {unsized_sizes} refused requests had no logged size\n  {}",
            accounting_line()
        );
        // Each log with the recovery that replays it, and its place there.
        let fates = [
            (&bf, &recovered[0], 0),
            (&nf, &recovered[recovered.len() - 1], same as usize),
        ];
        for (r, (w, rec, m)) in runs.iter().zip(&fates) {
            let log = w.log.as_ref().expect("a log run");
            title.push_str(&format!(
                "\n  {}: {}",
                r.policy,
                fate(rec, *m, &log.ops, &log.checkpoints)
            ));
            if let Some(a) = &r.agreement {
                lines.push((
                    r.workload.clone(),
                    r.policy,
                    a.exact_fraction(),
                    rec.death.as_ref().map(|d| d.op),
                ));
            }
        }
        emit(args, &title, &runs, csv, report, published)?;
    }
    if !args.json && !args.quiet {
        let own = policies
            .iter()
            .any(|&p| p == PolicySpec::kept(PolicyKind::ClassFit));
        outln!("Exact per-op agreement with the logs (bytes in use, slab resets, both fragmentations):");
        for (w, p, f, death) in &lines {
            let why = death.map_or_else(String::new, |op| {
                format!("  (no choice of frees agrees past request {op})")
            });
            outln!("  {:>5.1} %  {p:<15} {w}{why}", 100.0 * f);
        }
        if own {
            outln!("\n(class-fit is retype's own policy; see docs/reproduction-000.md for its goal against best fit.)");
        }
    }
    Ok(())
}

/// Whether the recovery matched log `m` of `rec` to its end, else the request
/// no branch got past, the proof, and the counters (and, at a per-slab dump,
/// the slabs) that kept the closest branch from the log; and which dumps the
/// search went on without.
fn fate(rec: &Resolved, m: usize, log: &[LoggedOp], dumps: &[Checkpoint]) -> String {
    let aside = rec.set_aside.as_ref().map_or_else(String::new, |s| {
        let ops: Vec<String> = s.dumps.iter().map(|op| op.to_string()).collect();
        format!(
            "; the per-slab dumps after requests {} were set aside (with them, {})",
            ops.join(", "),
            died(&s.death, m, log, dumps)
        )
    });
    let Some(d) = &rec.death else {
        return format!(
            "the recovered requests agree with every counter after all {} requests{aside}",
            log.len()
        );
    };
    format!(
        "requests 0..{} agree exactly; {}{aside}",
        d.op,
        died(d, m, log, dumps)
    )
}

/// Where and how the search died against log `m`: the request no choice of
/// frees got past, the proof or bound, and the closest branch's
/// disagreements there (counters, and slabs at a per-slab dump).
fn died(d: &Death, m: usize, log: &[LoggedOp], dumps: &[Checkpoint]) -> String {
    let mut diffs: Vec<String> = d
        .differences(m, log)
        .iter()
        .map(|(c, ours, theirs)| format!("{c} ours {ours}, log {theirs}"))
        .collect();
    diffs.extend(
        d.slab_differences(m, dumps)
            .iter()
            .map(|(s, c, ours, theirs)| format!("slab {s} {c} ours {ours}, log {theirs}")),
    );
    let diffs = if diffs.is_empty() {
        "none in this log (the other log's disagree, or a later dump cannot be reached)".to_string()
    } else {
        diffs.join("; ")
    };
    let how = if d.exhaustive {
        "every branch tried (each free: one live allocation, else a run of consecutive ones): none matches"
    } else {
        "search bound reached: not a proof"
    };
    format!(
        "no choice of frees gets past request {} ({} branches died, {} requests replayed, {how}); closest there: {diffs}",
        d.op, d.branches, d.replayed
    )
}

/// Which accounting the figures and the comparison with the logs follow.
fn accounting_line() -> String {
    let quirks: Vec<&str> = Accounting::LOGS.quirks().map(|q| q.describe()).collect();
    format!(
        "accounting: the figures follow the thesis's definitions; the recovery and the match with the logs count as the logs do: {}",
        quirks.join("; ")
    )
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
