//! `retype bench protocol`: the latency of the decentralized protocol's
//! operations with every node on a thread of its own (seed 001 §4.7; the
//! study is `crate::protocol::latency`), as text, JSON lines or a page.

use anyhow::Result;
use clap::Args as ClapArgs;

use crate::progress::Progress;
use crate::protocol::cases;
use crate::protocol::latency::Study;
use crate::timing::{ticks_per_ns, timer_overhead};

#[derive(ClapArgs)]
pub struct Args {
    /// One JSON object per line per (op, case, caps).
    #[arg(long)]
    json: bool,
    /// Synthetic capabilities in each node's mapping database, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "256,1024,4096,16384,65536",
        value_parser = clap::value_parser!(u32).range(256..=65536)
    )]
    caps: Vec<u32>,
    /// Measurements per case and size (the thesis: 1000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    samples: u64,
    /// Seed of the synthetic capabilities' kinds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Nodes, each on a thread of its own; cross-node cases need two.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=64))]
    nodes: u8,
    /// Also write a self-contained HTML page with the latency charts.
    #[arg(long, value_name = "FILE.html")]
    report: Option<std::path::PathBuf>,
}

pub fn run(a: Args) -> Result<()> {
    let study = Study {
        caps: a.caps,
        samples: a.samples as usize,
        seed: a.seed,
        nodes: a.nodes,
        ticks_per_ns: ticks_per_ns(),
        overhead: timer_overhead(),
    };
    let cases = cases::all().len() as u64;
    let mut progress = Progress::new(study.caps.len() as u64 * cases, "protocol bench");
    let rows = study.run(&mut progress)?;
    drop(progress);
    if a.json {
        for r in &rows {
            outln!("{}", r.json());
        }
    } else {
        outln!(
            "{:<13} {:<19} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>5} {:>9} {:>17}  thesis (figure)",
            "op", "case", "caps", "median", "p90", "median ns", "local", "messages", "waiting", "msgs", "rnd trip", "goal"
        );
        for r in &rows {
            let goal = match (r.goal, r.goal_met()) {
                (Some(g), Some(met)) => format!("≤ {g:.0} {}", if met { "met" } else { "NOT met" }),
                _ => "-".into(),
            };
            let b = &r.breakdown;
            outln!(
                "{:<13} {:<19} {:>6} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>5.0} {:>9.0} {:>17}  {} ({})",
                r.op, r.case, r.caps, r.median, r.p90, r.median / r.ticks_per_ns, b.local, b.messages,
                b.waiting, r.messages, r.round_trip, goal, r.thesis, r.figure
            );
        }
        if let Some(r) = rows.first() {
            outln!(
                "cycles of the TSC ({:.3} per ns); {} nodes, {} samples, threads {}; local: inside Node::step, messages: on channels, waiting: the rest",
                r.ticks_per_ns, r.nodes, r.samples, r.wait
            );
        }
    }
    if let Some(path) = &a.report {
        let page = crate::report::Page {
            title: "retype bench protocol",
            intro: "Latency of the decentralized capability protocol's operations (seed 001 §4.7), every node on a thread of its own.",
            parts: vec![crate::report::protocol::part(&rows)],
        };
        std::fs::write(path, page.html())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
