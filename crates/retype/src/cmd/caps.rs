//! `retype caps check`: the cross-core protocol model-checked. `caps bench`
//! and `caps protocol-bench` are the old names of `retype bench mdb` and
//! `retype bench protocol`, kept for one release.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

use crate::cmd::bench;
use crate::protocol::check;

#[derive(Args)]
pub struct CapsArgs {
    #[command(subcommand)]
    command: CapsCommand,
}

#[derive(Subcommand)]
enum CapsCommand {
    /// The old name of `retype bench mdb` (until the next release).
    Bench(bench::mdb::Args),
    /// The old name of `retype bench protocol` (until the next release).
    ProtocolBench(bench::protocol::Args),
    /// Model-checks the cross-core protocol: every interleaving of the node code (ch. 5).
    Check(CheckArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// Nodes (cores).
    #[arg(long, default_value_t = 2)]
    nodes: u8,
    /// Bytes of physical memory; one byte is one 4 KiB page of ours.
    #[arg(long, default_value_t = 3)]
    mem: u64,
    /// Capability slots, spread over the nodes in turn; slot 0 holds all memory.
    #[arg(long, default_value_t = 3)]
    slots: u32,
    /// Operations in flight at once.
    #[arg(long, default_value_t = 2)]
    ops: u64,
    /// Retype target regions: every one, or Figure 5.1's reduced set.
    #[arg(long, value_enum, default_value = "all")]
    regions: check::Regions,
    /// Count states that differ only by how operations are numbered once.
    #[arg(long, value_enum, default_value = "on")]
    symmetry: check::Symmetry,
    /// Checker threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CapsArgs) -> Result<()> {
    match args.command {
        CapsCommand::Bench(b) => {
            bench::renamed("caps bench", "bench mdb");
            bench::mdb::run(b)
        }
        CapsCommand::ProtocolBench(p) => {
            bench::renamed("caps protocol-bench", "bench protocol");
            bench::protocol::run(p)
        }
        CapsCommand::Check(c) => check_cmd(c),
    }
}

fn check_cmd(a: CheckArgs) -> Result<()> {
    let cfg = check::Config {
        nodes: a.nodes,
        mem: a.mem,
        slots: a.slots,
        ops: a.ops,
        regions: a.regions,
        symmetry: a.symmetry,
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bar = indicatif::ProgressBar::new_spinner();
    let progress = |states, distinct, depth| {
        bar.set_message(format!(
            "{distinct} distinct states, {states} explored, depth {depth}"
        ));
        bar.tick();
    };
    let o = check::run(cfg, threads, &progress)?;
    bar.finish_and_clear();
    let regions = format!("{:?}", a.regions).to_lowercase();
    let symmetry = format!("{:?}", a.symmetry).to_lowercase();
    let live = o.livelock_check.as_ref();
    if a.json {
        let v = serde_json::json!({
            "nodes": a.nodes, "mem": a.mem, "slots": a.slots, "ops": a.ops,
            "regions": regions, "threads": threads, "symmetry": symmetry,
            "states": o.states, "distinct": o.distinct, "depth": o.depth,
            "seconds": o.time.as_secs_f64(),
            "livelock_tasks": live.map(|l| l.tasks),
            "livelock_steps": live.map(|l| l.steps),
            "livelock_seconds": live.map(|l| l.time.as_secs_f64()),
            "violations": o.violations.iter()
                .map(|(p, t)| serde_json::json!({"property": p, "counterexample": t}))
                .collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        println!(
            "{} nodes, {} bytes, {} slots, {} operations, {regions} regions: {} states explored, {} distinct, depth {}, {:.1} s",
            a.nodes, a.mem, a.slots, a.ops, o.states, o.distinct, o.depth, o.time.as_secs_f64()
        );
        if a.symmetry == check::Symmetry::On {
            println!(
                "symmetry on: states that differ only by how operations are numbered count once"
            );
        }
        if let Some(l) = live {
            println!(
                "livelock check: {} (state, running operation) pairs, {} steps that keep one running, {:.1} s",
                l.tasks, l.steps, l.time.as_secs_f64()
            );
        }
        for (p, t) in &o.violations {
            println!("\n{p} is broken:\n{t}");
        }
        if o.violations.is_empty() {
            println!("every property holds");
        }
    }
    if !o.violations.is_empty() {
        bail!(
            "{} propert{} broken",
            o.violations.len(),
            if o.violations.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(())
}
