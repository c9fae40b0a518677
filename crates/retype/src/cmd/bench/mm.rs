//! `retype bench mm`: the cost of one memory-manager request per policy, at
//! seed 000's 22 slabs and at many more (`crate::bench::mm`), as text,
//! JSON lines or a page.

use anyhow::Context;
use clap::Args as ClapArgs;
use retype_core::mm::Layout;

use crate::bench::mm;
use crate::progress::Progress;
use crate::report::{self, Page};
use crate::study::spec::Policies;

#[derive(ClapArgs, Debug)]
pub struct Args {
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let policies = &args.policy.0;
    let counts: Vec<usize> = args
        .slabs
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .ok()
                .filter(|&n| n > 0 && n <= Layout::MAX_SLABS)
                .with_context(|| {
                    format!(
                        "--slabs: {s:?} is not a number of slabs from 1 to {}",
                        Layout::MAX_SLABS
                    )
                })
        })
        .collect::<anyhow::Result<_>>()?;
    let reqs = mm::requests(args.seed, args.ops);
    let mut per_op = vec![vec![0.0; counts.len()]; policies.len()];
    let mut progress = Progress::new((counts.len() * policies.len()) as u64, "bench mm");
    for (c, &n) in counts.iter().enumerate() {
        let layout = Layout::cantrip_repeated(n);
        for (k, &p) in policies.iter().enumerate() {
            progress.step(&format!("{p} at {n} slabs"));
            let (ns, served, ooms) = mm::time(p, &layout, &reqs);
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
        let page = Page {
            title: "retype bench mm",
            intro: "Time per memory-manager request.",
            parts: vec![report::mm::part(
                policies,
                &counts,
                per_op,
                reqs.len(),
                args.seed,
            )],
        };
        std::fs::write(path, page.html())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
