//! `retype caps`: the capability system's benchmarks.
//!
//! `retype caps bench` rebuilds the mapping-database benchmark of seed 001
//! §4.5: databases of 4096 to 65536 capabilities from the thesis's generator,
//! the median latency of each low-level operation on the augmented AA tree
//! and on the seL4-style list, in the same run, and the weighted scores of the
//! boot and process-management mixes, in TSC cycles and nanoseconds.
//!
//! `retype caps protocol-bench` times the decentralized protocol's
//! operations with every node on a thread of its own (§4.7; the study is
//! in `protocol::latency`).

use std::collections::BTreeMap;
use std::hint::black_box;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use retype_core::caps::bench::{self, Op, SplitMix, BOOT, PROCMGMT};
use retype_core::caps::cap::Key;
use retype_core::caps::mdb::{AaTree, CapId, List, Mdb};

use crate::protocol::cases;
use crate::protocol::check;
use crate::protocol::latency::Study;
use crate::timing::{median, ticks, ticks_per_ns, timer_overhead};

#[derive(Args)]
pub struct CapsArgs {
    #[command(subcommand)]
    command: CapsCommand,
}

#[derive(Subcommand)]
enum CapsCommand {
    /// Mapping database latencies and workload scores, tree and list.
    Bench(BenchArgs),
    /// Latency of the cross-core protocol's operations, nodes on threads (§4.7).
    ProtocolBench(ProtocolArgs),
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

#[derive(Args)]
struct ProtocolArgs {
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

#[derive(Args)]
struct BenchArgs {
    /// One JSON object per implementation and size.
    #[arg(long)]
    json: bool,
    /// Database sizes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4096,8192,16384,32768,65536"
    )]
    caps: Vec<usize>,
    /// Measurements per operation and implementation (the thesis: 1000).
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Seed of the capability generator and of the target choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// log2 of the memory the capabilities cover.
    #[arg(long, default_value_t = 32)]
    mem_bits: u32,
}

pub fn run(args: CapsArgs) -> Result<()> {
    match args.command {
        CapsCommand::Bench(b) => bench_cmd(b),
        CapsCommand::ProtocolBench(p) => protocol_cmd(p),
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

/// Times `samples` runs of `op` on random entries of `mdb`.
fn measure<M: Mdb>(
    mdb: &mut M,
    keys: &[Key],
    op: Op,
    targets: &[CapId],
    overhead: u64,
) -> Vec<u64> {
    targets
        .iter()
        .map(|&id| {
            let k = keys[id as usize];
            bench::prepare(mdb, op, id);
            let t0 = ticks();
            let r = bench::run(mdb, op, id, &k);
            let t1 = ticks();
            black_box(r);
            bench::restore(mdb, op, id, &k);
            (t1 - t0).saturating_sub(overhead)
        })
        .collect()
}

/// Measures every operation on `mdb` after one untimed walk through it.
fn block<M: Mdb>(
    mdb: &mut M,
    keys: &[Key],
    targets: &[Vec<CapId>],
    overhead: u64,
    out: &mut BTreeMap<&'static str, Vec<u64>>,
) {
    let mut n = mdb.first();
    while let Some(id) = n {
        n = black_box(mdb.successor(id));
    }
    for (&op, t) in Op::ALL.iter().zip(targets) {
        let v = measure(mdb, keys, op, t, overhead);
        out.entry(op.name()).or_default().extend(v);
    }
}

/// Builds the list front-first (descending order), so that building is
/// O(n); the tree takes the capabilities in generation order.
fn build<M: Mdb>(keys: &[Key]) -> M {
    let mut m = M::new();
    let mut order: Vec<CapId> = (0..keys.len() as CapId).collect();
    if m.name() == "list" {
        order.sort_by(|&a, &b| (keys[b as usize], b).cmp(&(keys[a as usize], a)));
    }
    for id in order {
        m.insert(id, keys[id as usize]).expect("fresh ids");
    }
    m
}

struct Row {
    name: &'static str,
    caps: usize,
    medians: BTreeMap<&'static str, f64>,
    boot: f64,
    procmgmt: f64,
}

fn bench_cmd(a: BenchArgs) -> Result<()> {
    if a.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if a.caps.iter().any(|&n| n < 2) {
        bail!("--caps: each size must be at least 2");
    }
    if !(8..=48).contains(&a.mem_bits) {
        bail!("--mem-bits must be in 8..=48");
    }
    let tpn = ticks_per_ns();
    let overhead = timer_overhead();
    let mut rows = Vec::new();
    let mut progress = crate::progress::Progress::new(a.caps.len() as u64, "caps bench");
    for &n in &a.caps {
        progress.step(&format!("{n} capabilities"));
        let keys = bench::generate(n, a.mem_bits, a.seed);
        let mut tree: AaTree = build(&keys);
        let mut list: List = build(&keys);
        let mut rng = SplitMix::new(a.seed ^ n as u64);
        let mut samples: [BTreeMap<&'static str, Vec<u64>>; 2] = Default::default();
        // Two rounds of a tree block then a list block (A B A B), so that
        // drift in the machine's speed hits both alike. Within a block the
        // database stays in cache, as in the thesis, where each measurement
        // followed a fresh fill; the list's long walks would otherwise evict
        // the tree between operations.
        for round in 0..2 {
            let count = a.samples / 2 + (round == 0) as usize * (a.samples % 2);
            let targets: Vec<Vec<CapId>> = Op::ALL
                .iter()
                .map(|_| (0..count).map(|_| rng.below(n as u64) as CapId).collect())
                .collect();
            block(&mut tree, &keys, &targets, overhead, &mut samples[0]);
            block(&mut list, &keys, &targets, overhead, &mut samples[1]);
        }
        for (name, s) in ["tree", "list"].into_iter().zip(samples) {
            let medians: BTreeMap<&'static str, f64> = s
                .into_iter()
                .map(|(k, mut v)| (k, median(&mut v)))
                .collect();
            let boot = bench::score(&BOOT, |op| medians[op.name()]);
            let procmgmt = bench::score(&PROCMGMT, |op| medians[op.name()]);
            rows.push(Row {
                name,
                caps: n,
                medians,
                boot,
                procmgmt,
            });
        }
    }
    for r in &rows {
        if a.json {
            let ns = |m: &BTreeMap<&str, f64>| -> serde_json::Value {
                m.iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::from(v / tpn)))
                    .collect()
            };
            let line = serde_json::json!({
                "impl": r.name,
                "caps": r.caps,
                "score_boot_cycles": r.boot,
                "score_procmgmt_cycles": r.procmgmt,
                "score_boot_ns": r.boot / tpn,
                "score_procmgmt_ns": r.procmgmt / tpn,
                "median_cycles": r.medians,
                "median_ns": ns(&r.medians),
                "samples": a.samples,
                "seed": a.seed,
                "ticks_per_ns": tpn,
                "timer_overhead_cycles": overhead,
            });
            outln!("{line}");
        } else {
            let ops: Vec<String> = Op::ALL
                .iter()
                .map(|op| format!("{}={:.0}", op.name(), r.medians[op.name()]))
                .collect();
            outln!(
                "{:<4} caps={:<6} boot={:>8.0} cycles ({:>7.0} ns)  procmgmt={:>8.0} cycles ({:>7.0} ns)  {}",
                r.name,
                r.caps,
                r.boot,
                r.boot / tpn,
                r.procmgmt,
                r.procmgmt / tpn,
                ops.join(" ")
            );
        }
    }
    Ok(())
}

fn protocol_cmd(a: ProtocolArgs) -> Result<()> {
    let study = Study {
        caps: a.caps,
        samples: a.samples as usize,
        seed: a.seed,
        nodes: a.nodes,
        ticks_per_ns: ticks_per_ns(),
        overhead: timer_overhead(),
    };
    let cases = cases::all().len() as u64;
    let mut progress =
        crate::progress::Progress::new(study.caps.len() as u64 * cases, "protocol bench");
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
            title: "retype caps protocol-bench",
            intro: "Latency of the decentralized capability protocol's operations (seed 001 §4.7), every node on a thread of its own.",
            parts: vec![crate::report::protocol::part(&rows)],
        };
        std::fs::write(path, page.html())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
