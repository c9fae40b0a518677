//! `retype study tlm`: seed 003's real-time experiment (TLM) under glibc,
//! jemalloc, mimalloc, tcmalloc and retype-malloc (see `crate::tlm`).

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args as ClapArgs;
use strum::VariantArray;

use crate::preload::{Allocator, Named};
use crate::report::{self, Page};
use crate::tlm::{self, goals, row::Row, Config};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Allocators, comma-separated: glibc, jemalloc, mimalloc, tcmalloc,
    /// retype (libretype_malloc_preload.so), or paths of malloc .so files
    /// [default: all five named]
    #[arg(long, value_delimiter = ',')]
    allocators: Vec<Allocator>,
    /// Worker threads, comma-separated [default: 1,2,4,8; quick: 1,2]
    #[arg(long, value_delimiter = ',')]
    threads: Vec<u32>,
    /// Block sizes, comma-separated, in bytes or with K or M (4K = 4096)
    /// [default: 4K,16K]
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Growing rounds: round k allocates k × BLOCKS blocks [default: 8; quick: 3]
    #[arg(long)]
    rounds: Option<u32>,
    /// Steady rounds after them, each of ROUNDS × BLOCKS blocks [default: 32; quick: 4]
    #[arg(long)]
    steady: Option<u32>,
    /// Blocks per round step [default: 256; quick: 32]
    #[arg(long)]
    blocks: Option<u32>,
    /// Plain and recorded runs of each configuration, allocators alternating
    /// run by run [default: 3; quick: 1]
    #[arg(long)]
    runs: Option<u32>,
    /// A small configuration that runs in seconds
    #[arg(long)]
    quick: bool,
    /// Do not count system calls (which needs strace)
    #[arg(long)]
    no_syscalls: bool,
    /// Also run retype-malloc as a real-time program would set it up, with
    /// RETYPE_MALLOC_RESERVE of twice each configuration's peak bytes plus 32
    /// MiB, faulted in before the workers start (rows named retype-reserve)
    #[arg(long)]
    reserve: bool,
    /// Print one JSON object per allocator, thread count and size
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report with the seed's figures
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
}

/// `4096`, `4K`, `16k`, `1M`.
fn parse_size(s: &str) -> anyhow::Result<u64> {
    let (digits, unit) = match s.trim().to_ascii_uppercase() {
        t if t.ends_with('K') => (t[..t.len() - 1].to_string(), 1 << 10),
        t if t.ends_with('M') => (t[..t.len() - 1].to_string(), 1 << 20),
        t => (t, 1),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("not a size: {s:?} (bytes, or a number with K or M)"))?;
    match n.checked_mul(unit) {
        Some(v) if v > 0 => Ok(v),
        _ => bail!("a block size must be at least 1 byte and fit in 64 bits: {s:?}"),
    }
}

impl Args {
    /// The configuration: what was given, else the quick or full default.
    fn config(&self) -> anyhow::Result<Config> {
        let or = |given: &[u32], quick: &[u32], full: &[u32]| {
            if !given.is_empty() {
                given.to_vec()
            } else if self.quick {
                quick.to_vec()
            } else {
                full.to_vec()
            }
        };
        let pick = |given: Option<u32>, quick: u32, full: u32| {
            given.unwrap_or(if self.quick { quick } else { full })
        };
        let c = Config {
            allocators: if self.allocators.is_empty() {
                Named::VARIANTS
                    .iter()
                    .map(|&n| Allocator::Named(n))
                    .collect()
            } else {
                self.allocators.clone()
            },
            threads: or(&self.threads, &[1, 2], &[1, 2, 4, 8]),
            sizes: if self.sizes.is_empty() {
                vec![4 << 10, 16 << 10]
            } else {
                self.sizes.clone()
            },
            rounds: pick(self.rounds, 3, 8),
            steady: pick(self.steady, 4, 32),
            blocks: pick(self.blocks, 32, 256),
            runs: pick(self.runs, 1, 3),
            syscalls: !self.no_syscalls,
            reserve: self.reserve,
        };
        if c.threads.contains(&0) || c.rounds == 0 || c.steady == 0 || c.blocks == 0 || c.runs == 0
        {
            bail!("--threads, --rounds, --steady, --blocks and --runs must be at least 1 (latencies are taken in the steady rounds)");
        }
        Ok(c)
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    let rows = tlm::run(&config)?;
    if args.json {
        for r in &rows {
            outln!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_tables(&rows)?;
    }
    if let Some(path) = &args.report {
        let page = Page {
            title: "retype study tlm",
            intro: "Seed 003's real-time experiment (TLM): per-thread user, kernel and wait time as the work grows, the kernel/user ratio, the system calls that map or return memory, and the latency of every call in steady state, for each allocator.",
            parts: vec![report::tlm::part(&rows)],
        };
        std::fs::write(path, page.html())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn ms(ns: f64) -> String {
    format!("{:.1}", ns / 1e6)
}

/// A table per thread count, then the goals.
fn print_tables(rows: &[Row]) -> anyhow::Result<()> {
    outln!("Seed 003 (TLM): per worker thread, mean over the workers of the median run; latencies of the steady rounds' calls (ns); system calls that map or return memory, all workers, from one run under strace; sw/ms: switches to kernel mode per worker (its page faults and its share of those calls) per ms of its CPU time. Hoard, the seed's first allocator, is not packaged in Debian 12: bench/peers/hoard.sh builds it, and --allocators takes its library's path.");
    let mut threads: Vec<u32> = rows.iter().map(|r| r.threads).collect();
    threads.dedup();
    for t in threads {
        outln!("\n{t} thread(s)");
        outln!(
            "{:<14} {:>7} {:>9} {:>9} {:>9} {:>8} {:>7} {:>8} {:>8} {:>6} {:>7} {:>8} {:>9} {:>10} {:>10}",
            "allocator",
            "size",
            "user ms",
            "kernel ms",
            "wait ms",
            "k/u",
            "sw/ms",
            "syscalls",
            "steady",
            "p50",
            "p99",
            "p99.9",
            "p99.99",
            "max",
            "max run"
        );
        for r in rows.iter().filter(|r| r.threads == t) {
            let (all, steady) = match &r.syscalls {
                Some(s) => (s.rounds.total.to_string(), s.steady.total.to_string()),
                None => ("-".into(), "-".into()),
            };
            let l = &r.latency;
            outln!(
                "{:<14} {:>7} {:>9} {:>9} {:>9} {:>8} {:>7} {:>8} {:>8} {:>6} {:>7} {:>8} {:>9} {:>10} {:>10}",
                r.allocator,
                r.size,
                ms(r.mean(|x| x.user_ns)),
                ms(r.mean(|x| x.kernel_ns)),
                ms(r.mean(|x| x.wait_ns)),
                r.kernel_user_ratio
                    .map_or("-".into(), |v| format!("{v:.3}")),
                r.mode_switches_per_cpu_ms
                    .map_or("-".into(), |v| format!("{v:.1}")),
                all,
                steady,
                l.p50_ns,
                l.p99_ns,
                l.p999_ns,
                l.p9999_ns,
                l.max_ns,
                r.max_running_ns.map_or("-".into(), |v| v.to_string())
            );
        }
    }
    print_space(rows)?;
    let verdicts = goals::verdicts(rows);
    if !verdicts.is_empty() {
        outln!("\nGoals: retype-malloc lowest of all the allocators compared (with a reserve too, if it ran: against the others but retype-malloc)");
        for v in &verdicts {
            let best = v
                .best_other
                .as_ref()
                .map_or("no other allocator".into(), |(a, b)| {
                    format!("best other {a} {b:.3}")
                });
            outln!(
                "  {} threads, {} B, {}: {} {} vs {best}: {}",
                v.threads,
                v.size,
                v.metric,
                v.allocator,
                v.ours.map_or("-".into(), |o| format!("{o:.3}")),
                if v.met() { "met" } else { "NOT met" }
            );
        }
    }
    Ok(())
}

fn mib(bytes: i64) -> String {
    format!("{:.2}", bytes as f64 / f64::from(1 << 20))
}

/// The allocators' address space at the peak (`crate::tlm::space`).
fn print_space(rows: &[Row]) -> anyhow::Result<()> {
    outln!("\nAddress space at the peak (from /proc/PID/smaps: the anonymous mappings but the program's own tables and stacks; MiB): live = the workers' blocks, overhead = resident - live (bookkeeping and free memory kept resident), holes = mapped - resident");
    outln!(
        "{:<14} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "allocator",
        "threads",
        "size",
        "live",
        "mapped",
        "resident",
        "overhead",
        "holes"
    );
    for r in rows {
        let Some(s) = &r.space else { continue };
        outln!(
            "{:<14} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.allocator,
            r.threads,
            r.size,
            mib(s.live_bytes as i64),
            mib(s.mapped_bytes),
            mib(s.resident_bytes),
            mib(s.overhead_bytes),
            mib(s.hole_bytes)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_bytes_or_units() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("16k").unwrap(), 16384);
        assert_eq!(parse_size("6000").unwrap(), 6000);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert!(parse_size("0").is_err());
        assert!(parse_size("4G").is_err());
        assert!(parse_size("K").is_err());
    }
}
