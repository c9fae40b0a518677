//! `retype bench mm`: the cost of one memory-manager request per policy, at
//! seed 000's 22 slabs and at many more.
//!
//! The requests are made beforehand (seed 000's uniform generator at 52 %
//! frees: a steady state well inside the 22 slabs), so only `alloc` and
//! `free` are timed. For instruction counts `bench/mm-callgrind.sh` runs it
//! under callgrind counting only inside `MemoryManager::alloc` and `::free`,
//! twice with different `--ops`, and divides the difference.

use std::time::Instant;

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use retype_core::mm::{Accounting, AllocError, AllocId, Layout, ObjDesc};
use retype_core::objects::Config;
use retype_core::workload::uniform::{Uniform, UniformParams};
use retype_core::workload::{Op, Workload};

use crate::progress::Progress;
use crate::report::chart::{self, Axes, Group};
use crate::report::table::{Cell, Table};
use crate::report::{Body, Figure, Page, Part, Section, Summary};
use crate::study::data;
use crate::study::spec::{Policies, PolicySpec};

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Time per memory-manager request, per policy and number of slabs.
    Mm(MmArgs),
}

#[derive(ClapArgs, Debug)]
pub struct MmArgs {
    /// Policies, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    policy: Policies,
    /// Numbers of slabs, comma-separated; seed 000's 22 slab sizes repeated.
    #[arg(long, default_value = "22,100000")]
    slabs: String,
    /// Requests generated (allocations and frees).
    #[arg(long, default_value_t = 200_000)]
    ops: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML page: ns per request per policy and slab count.
    #[arg(long, value_name = "FILE.html")]
    report: Option<std::path::PathBuf>,
}

pub fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Mm(args) => mm(args),
    }
}

/// A request made in advance: allocate one descriptor as `id`, or free `id`.
enum Request {
    Alloc(u32, ObjDesc),
    Free(u32),
}

fn requests(seed: u64, ops: u32) -> Vec<Request> {
    let mut w = Uniform::new(UniformParams {
        seed,
        ops,
        free_percent: 52,
    });
    std::iter::from_fn(|| w.next_op())
        .flat_map(|op| match op {
            Op::Alloc { id, request } => vec![Request::Alloc(id, request[0])],
            Op::Free { ids } => ids.into_iter().map(Request::Free).collect(),
        })
        .collect()
}

fn mm(args: MmArgs) -> anyhow::Result<()> {
    let policies = &args.policy.0;
    let counts: Vec<usize> = args
        .slabs
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .with_context(|| format!("--slabs: {s:?} is not a positive number"))
        })
        .collect::<anyhow::Result<_>>()?;
    let reqs = requests(args.seed, args.ops);
    let mut per_op = vec![vec![0.0; counts.len()]; policies.len()];
    let mut progress = Progress::new((counts.len() * policies.len()) as u64, "bench mm");
    for (c, &n) in counts.iter().enumerate() {
        let layout = Layout::cantrip_repeated(n);
        for (k, &p) in policies.iter().enumerate() {
            progress.step(&format!("{p} at {n} slabs"));
            let (ns, served, ooms) = time(p, &layout, &reqs);
            let per_op_ns = ns as f64 / reqs.len() as f64;
            per_op[k][c] = per_op_ns;
            let per_op = per_op_ns;
            if args.json {
                outln!(
                    "{}",
                    serde_json::json!({"policy": p.to_string(), "slabs": n, "requests": reqs.len(), "served": served, "ooms": ooms, "ns_per_op": per_op})
                );
            } else {
                outln!(
                    "{:<22} {:>7} slabs  {:>9} requests  {:>8.1} ns/request  ({ooms} OOMs)",
                    p.to_string(),
                    n,
                    reqs.len(),
                    per_op
                );
            }
        }
    }
    if let Some(path) = &args.report {
        let groups: Vec<Group> = policies
            .iter()
            .zip(per_op)
            .enumerate()
            .map(|(k, (p, values))| Group {
                name: p.to_string(),
                color: chart::color(k),
                values,
            })
            .collect();
        let labels: Vec<String> = counts.iter().map(|n| format!("{n} slabs")).collect();
        let figure = Figure {
            title: "time per request".into(),
            body: Body::Chart(chart::grouped_bars(&Axes { x: "slabs", y: "ns per request", log_y: false }, &labels, &groups)),
            caption: format!("{} requests of seed 000's uniform generator (seed {}, 52 % frees) per policy and number of slabs.", reqs.len(), args.seed),
        };
        let mut head = vec![Cell::new("policy (ns per request)")];
        head.extend(labels.iter().map(|l| Cell::new(l.clone())));
        let rows = groups
            .iter()
            .map(|g| {
                let mut row = vec![Cell::new(g.name.clone())];
                row.extend(g.values.iter().map(|v| Cell::new(format!("{v:.1}"))));
                row
            })
            .collect();
        let part = Part {
            id: "mm-cost".into(),
            title: "Memory-manager request cost".into(),
            summary: vec![Summary::Table(Table { head, rows })],
            sections: vec![Section {
                title: "Time per request".into(),
                notes: Vec::new(),
                figures: vec![figure],
            }],
        };
        let page = Page {
            title: "retype bench mm",
            intro: "Time per memory-manager request.",
            parts: vec![part],
        };
        std::fs::write(path, page.html())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Runs the requests on a fresh manager: elapsed ns, requests served, OOMs.
fn time(policy: PolicySpec, layout: &Layout, reqs: &[Request]) -> (u128, usize, u64) {
    let mut mm = data::manager(Config::CANTRIP, layout, policy, Accounting::THESIS);
    let mut ids: Vec<Option<AllocId>> = Vec::new();
    let mut served = 0;
    let start = Instant::now();
    for r in reqs {
        match *r {
            Request::Alloc(id, desc) => {
                let got = match mm.alloc(&[desc]) {
                    Ok(a) => Some(a),
                    Err(AllocError::OutOfMemory { .. }) => None,
                    Err(e) => panic!("generated request refused: {e}"),
                };
                served += got.is_some() as usize;
                let i = id as usize;
                if ids.len() <= i {
                    ids.resize(i + 1, None);
                }
                ids[i] = got;
            }
            Request::Free(id) => {
                if let Some(a) = ids[id as usize].take() {
                    mm.free(a).expect("live allocation");
                    served += 1;
                }
            }
        }
    }
    (start.elapsed().as_nanos(), served, mm.stats().ooms)
}
