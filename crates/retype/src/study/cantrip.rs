//! `study cantrip`: seed 000's tables regenerated from the thesis's own
//! logs. For every run of the thesis, its best-fit and next-fit logs are
//! recovered into requests, replayed under their own policies and compared
//! op by op; the other policies replay the best-fit log's requests.

use std::path::Path;

use retype_core::cheri::Format;
use retype_core::mm::{Accounting, Layout, PolicyKind};
use retype_core::objects::Config;
use retype_recovery::{Checkpoint, Death, LoggedOp, Resolved};

use super::data::{self, LogRun, Prepared};
use super::run::{run_one, Workload};
use super::spec::{App, PolicySpec};
use super::summary::Summary;
use super::thesis::{self, Allocator};
use crate::progress::Progress;

/// How well one log is reproduced: the fraction of its operations matched
/// exactly, and the request no choice of frees got past, if any.
pub struct LogMatch {
    pub workload: String,
    pub policy: PolicySpec,
    pub exact: f64,
    pub death: Option<usize>,
}

/// Runs every workload of the thesis from its logs in `data` (the directory
/// holding `cantrip/logs`) under `policies`, handing each to `each` as it
/// is done; with `shots`, the runs keep per-slab snapshots, with `cheri`
/// their capabilities sized in that format. Returns how
/// well each log was matched.
pub fn run(
    data: Option<&Path>,
    config: Config,
    layout: &Layout,
    policies: &[PolicySpec],
    shots: bool,
    cheri: Option<Format>,
    mut each: impl FnMut(Workload) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<LogMatch>> {
    let dir = data::data_dir(data)?.join("cantrip/logs");
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
            None,
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
            Some(*app),
        ));
    }
    let best = PolicySpec::kept(PolicyKind::BestFit);
    let blind = PolicySpec::kept(PolicyKind::BlindNextFit);
    let mut matches = Vec::new();
    let mut progress = Progress::new(runs_of.len() as u64, "study cantrip");
    for (title, bf_name, nf_name, free, seq, app) in runs_of {
        progress.step(&bf_name);
        let bf_run = data::load_log(&dir.join("best_fit").join(&bf_name))?;
        let nf_run = data::load_log(&dir.join("next_fit").join(&nf_name))?;
        let notes = match app {
            Some(app) => footprint_conflict(&dir, app, &bf_run, &nf_run)?
                .into_iter()
                .collect(),
            None => Vec::new(),
        };
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
            run_one(&bf, best, config, layout, shots, cheri)?,
            run_one(&nf, blind, config, layout, shots, cheri)?,
        ];
        for &p in policies.iter().filter(|&&p| p != best && p != blind) {
            runs.push(run_one(&bf, p, config, layout, shots, cheri)?);
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
            "{title}{}\n  recovery: exact search over the frees (each free's slab left open until a reset, a dump or the end tells it, where it can; else depth first, the look-ahead's choice first); at {ambiguous} of the frees on the path it took, several sets of live allocations agreed with the logs; {unsized_sizes} refused requests had no logged size\n  {}",
            notes.iter().map(|n| format!("\n  {n}")).collect::<String>(),
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
                matches.push(LogMatch {
                    workload: r.workload.clone(),
                    policy: r.policy,
                    exact: a.exact_fraction(),
                    death: rec.death.as_ref().map(|d| d.op),
                });
            }
        }
        let published = runs.iter().map(|r| published(&r.policy)).collect();
        each(Workload {
            title,
            runs,
            published,
            notes,
        })?;
    }
    Ok(matches)
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

/// A data conflict in `app`'s logs, if any: their peak (bytes and objects
/// in use) is not the footprint §4.1.3 states, and where another
/// application's logs carry exactly the same counters after every request,
/// under both policies, which. (The shipped fibonacci logs carry timer's.)
fn footprint_conflict(
    dir: &Path,
    app: App,
    bf: &LogRun,
    nf: &LogRun,
) -> anyhow::Result<Option<String>> {
    let peak = |r: &LogRun| {
        let bytes = r.ops.iter().map(|o| o.after.bytes_in_use).max();
        let objects = r.ops.iter().map(|o| o.after.objects_in_use).max();
        (bytes.unwrap_or(0), objects.unwrap_or(0))
    };
    let stated = thesis::app_peak(app);
    let logged = peak(bf);
    if logged == stated && peak(nf) == stated {
        return Ok(None);
    }
    let counters = |r: &LogRun| r.ops.iter().map(|o| o.after).collect::<Vec<_>>();
    let mut twins = Vec::new();
    for &other in <App as strum::VariantArray>::VARIANTS {
        if other == app {
            continue;
        }
        let load = |p: &str| {
            data::load_log(
                &dir.join(p)
                    .join(format!("apps_standalone_{p}_app_name_{other}.log")),
            )
        };
        let (obf, onf) = (load("best_fit")?, load("next_fit")?);
        if counters(&obf) == counters(bf) && counters(&onf) == counters(nf) {
            twins.push(format!(
                "; they carry exactly {other}'s counters after every request, under both policies (the trace replayed was probably {other}'s)"
            ));
        }
    }
    Ok(Some(format!(
        "data conflict: the thesis (§4.1.3) says {app} peaks at {} bytes in {} objects, but its shipped logs peak at {} bytes in {} objects{}; our {app} figures are those logs'",
        stated.0,
        stated.1,
        logged.0,
        logged.1,
        twins.concat()
    )))
}

/// Which accounting the figures and the comparison with the logs follow.
fn accounting_line() -> String {
    let quirks: Vec<&str> = Accounting::LOGS.quirks().map(|q| q.describe()).collect();
    format!(
        "accounting: the figures follow the thesis's definitions, and a column (logs' count) beside a run gives its figures counted as its log counts them where any differs; the recovery and the match with the logs count as the logs do: {}",
        quirks.join("; ")
    )
}

/// One table of the study in a line: per policy, the total fragmentation
/// (peak and average, KiB) beside the thesis's where it has them.
pub struct Headline {
    /// The table's name (the first line of its title).
    pub table: String,
    /// Best fit and the original next fit, then the other policy with the
    /// lowest average total fragmentation, if any ran.
    pub runs: Vec<HeadlineRun>,
}

/// One policy's figures in a [`Headline`].
pub struct HeadlineRun {
    pub policy: PolicySpec,
    /// Peak and average total fragmentation, KiB.
    pub ours: (f64, f64),
    /// The thesis's, where it publishes them.
    pub thesis: Option<(f64, f64)>,
    /// Ours counted as the logs count them, where that differs.
    pub logs: Option<(f64, f64)>,
}

impl Headline {
    /// The headline of workload `w` as [`run`] hands it over: its first two
    /// runs are best fit's and next fit's, the others the other policies'.
    pub fn of(w: &Workload) -> Headline {
        let kib = |s: &Summary| (s.peak_frag_total as f64 / 1024.0, s.avg_frag_total / 1024.0);
        let mut runs: Vec<HeadlineRun> = w
            .runs
            .iter()
            .zip(&w.published)
            .take(2)
            .map(|(r, p)| HeadlineRun {
                policy: r.policy,
                ours: kib(&r.summary),
                thesis: p.map(|p| (p.peak[2], p.avg[2])),
                logs: r.logs_count_differs().map(kib),
            })
            .collect();
        let lowest = w.runs[2..].iter().min_by(|a, b| {
            a.summary
                .avg_frag_total
                .total_cmp(&b.summary.avg_frag_total)
        });
        runs.extend(lowest.map(|r| HeadlineRun {
            policy: r.policy,
            ours: kib(&r.summary),
            thesis: None,
            logs: r.logs_count_differs().map(kib),
        }));
        Headline {
            table: w.title.lines().next().unwrap_or_default().to_string(),
            runs,
        }
    }
}
