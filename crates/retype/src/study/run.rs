//! One run of the study: a workload driven through a fresh memory manager
//! under one policy, timed request by request, with the figures the thesis
//! defines, its agreement with the workload's log, and per-slab snapshots
//! for the report's figures.

use std::time::Instant;

use anyhow::Context;
use retype_core::cheri::Format;
use retype_core::mm::slab::{Slab, WatermarkRule};
use retype_core::mm::{Accounting, Layout, MemoryManager};
use retype_core::objects::{Arch, Config};
use retype_core::workload::{drive, Outcome, Step};

use super::cheri::{self, CheriFigures};
use super::data::{self, Prepared};
use super::logcheck::Agreement;
use super::spec::PolicySpec;
use super::summary::{kib, Summary};
use super::tables::{Column, LOGS_COUNT};
use super::thesis::Published;

/// One run: a workload under a policy.
pub struct Run {
    pub workload: String,
    pub policy: PolicySpec,
    pub steps: Vec<Step>,
    pub summary: Summary,
    /// How well it reproduces its log, when it has one.
    pub agreement: Option<Agreement>,
    /// The same figures counted as the logs count them
    /// ([`Accounting::LOGS`]), when the run has its log.
    pub logs_summary: Option<Summary>,
    /// Per-slab states at 25, 50, 75 and 100 % of the run (for reports).
    pub snapshots: Vec<Vec<SlabShot>>,
    /// Its capabilities sized in a CHERI format, when one was asked for.
    pub cheri: Option<CheriFigures>,
}

/// One workload's runs under each policy, as one table of the study.
pub struct Workload {
    /// Its name on the first line, notes on the others.
    pub title: String,
    pub runs: Vec<Run>,
    /// The thesis's figures for each run's policy, where it has them.
    pub published: Vec<Option<Published>>,
    /// What the summary must flag about the workload's data.
    pub notes: Vec<String>,
}

impl Workload {
    /// The columns of its table: each run's figures, then the same run
    /// counted as its log counts where that differs, and the thesis's
    /// figures where it has them.
    pub fn columns(&self) -> Vec<Column> {
        let mut columns = Vec::new();
        for (r, published) in self.runs.iter().zip(&self.published) {
            columns.push(Column {
                label: r.policy.to_string(),
                ours: Some(r.summary.clone()),
                published: None,
            });
            if let Some(logs) = r.logs_count_differs() {
                columns.push(Column {
                    label: LOGS_COUNT.into(),
                    ours: Some(logs.clone()),
                    published: None,
                });
            }
            if let Some(p) = published {
                columns.push(Column {
                    label: "(thesis)".into(),
                    ours: None,
                    published: Some(*p),
                });
            }
        }
        columns
    }
}

/// RISC-V 32 is CantripOS's kernel (with MCS); the others, their defaults.
pub fn config_for(arch: Arch) -> Config {
    match arch {
        Arch::Riscv32 => Config::CANTRIP,
        a => Config::new(a),
    }
}

/// Runs `w` under `policy`, timing each request; with `shots`, runs it again
/// (it is deterministic) to keep the slabs at 25, 50, 75 and 100 %. The
/// figures count as the thesis defines; a run compared with its log is
/// replayed once more under the log's own accounting ([`Accounting::LOGS`]);
/// with `cheri`, once more to size its capabilities in that format.
pub fn run_one(
    w: &Prepared,
    policy: PolicySpec,
    config: Config,
    layout: &Layout,
    shots: bool,
    cheri: Option<Format>,
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
    let (agreement, logs_summary) = match w.log.as_ref().filter(|l| l.policy == policy) {
        Some(l) => {
            let mut logged = Vec::new();
            let epoch = Instant::now();
            replay(
                w,
                policy,
                config,
                layout,
                Accounting::LOGS,
                || epoch.elapsed().as_nanos() as u64,
                |s, _| logged.push(*s),
            )?;
            (
                Some(Agreement::of(&logged, &l.ops)),
                Some(Summary::of(&logged)),
            )
        }
        None => (None, None),
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
    let cheri = cheri
        .map(|f| cheri::measure(w, policy, config, layout, f))
        .transpose()?;
    Ok(Run {
        workload: w.name.clone(),
        policy,
        summary: Summary::of(&steps),
        steps,
        agreement,
        logs_summary,
        snapshots,
        cheri,
    })
}

impl Run {
    /// Its figures as the logs count them, where any differs from the
    /// thesis's definition (time aside: each replay is timed on its own).
    pub fn logs_count_differs(&self) -> Option<&Summary> {
        self.logs_summary.as_ref().filter(|l| {
            let untimed = |s: &Summary| Summary {
                total_ns: 0,
                max_ns: 0,
                ..s.clone()
            };
            untimed(l) != untimed(&self.summary)
        })
    }
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

/// The run as one JSON object of `retype study --json`.
pub fn json(r: &Run) -> serde_json::Value {
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
        "max_ns_per_op": s.max_ns,
    });
    if let Some(l) = r.logs_count_differs() {
        v["logs_count"] = serde_json::json!({
            "peak_frag_total_kib": kib(l.peak_frag_total as f64),
            "avg_frag_total_kib": kib(l.avg_frag_total),
            "peak_frag_watermark_kib": kib(l.peak_frag_watermark as f64),
            "avg_frag_watermark_kib": kib(l.avg_frag_watermark),
        });
    }
    if let Some(c) = &r.cheri {
        v["cheri"] = cheri::json(c);
    }
    if let Some(a) = &r.agreement {
        v["log_exact_fraction"] = serde_json::json!(a.exact_fraction());
    }
    v
}

/// One slab at one moment.
#[derive(Clone, Copy, Debug)]
pub struct SlabShot {
    pub size: u64,
    pub live: u64,
    pub frag_watermark: u64,
    pub frag_alignment: u64,
}

impl SlabShot {
    pub fn of(s: &Slab) -> SlabShot {
        SlabShot {
            size: s.size(),
            live: s.live_bytes(),
            frag_watermark: s.frag_watermark(),
            frag_alignment: s.frag_alignment(),
        }
    }
}

/// The requests after which the thesis shows per-slab snapshots: 25, 50, 75
/// and 100 % of the run up to its last allocation (the frees that end a run
/// would leave every slab empty).
pub fn snapshot_points(steps: &[Step]) -> [usize; 4] {
    let ops = steps
        .iter()
        .rposition(|s| s.outcome != Outcome::Free)
        .map_or(steps.len(), |i| i + 1);
    [1, 2, 3, 4].map(|q| (ops * q).div_ceil(4).saturating_sub(1))
}
