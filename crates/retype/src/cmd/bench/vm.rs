//! `retype bench vm`: seed 001 §3.6 on Linux (`crate::bench::vm`) as
//! tables or JSON lines. Capabilities that map real memory
//! (`crates/retype-vm`) beside raw Linux system calls, both in the same run,
//! alternated: Appel and Li's trap benchmarks (Figure 3.2), map, protect and
//! unmap of buffers (Figure 3.3), RandomAccess by page size (Table 3.1) and a
//! GCBench-like collector whose write barrier is dirty bits or protection
//! traps (Table 3.4). See docs/vm.md.

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use retype_vm::Backing;

use crate::bench::vm::appel::{appel_li, AppelRow};
use crate::bench::vm::gc::{gcbench, GcRow};
use crate::bench::vm::gups::{random_access, GupsRow};
use crate::bench::vm::mpu::{map_protect_unmap, Row};

#[derive(ClapArgs)]
pub struct Args {
    /// Experiments, comma-separated [default: all]
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Experiment>,
    /// Largest buffer (map, protect, unmap) and table (RandomAccess), MiB:
    /// sizes grow ×4 from one page (from 1 MiB for tables) up to it
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    max_mib: u64,
    /// Measurements of each figure, ours and Linux alternated; medians
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Appel and Li: protect/unprotect rounds per measurement
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Appel and Li: traps per measurement
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    traps: u32,
    /// RandomAccess: updates per measurement
    #[arg(long, default_value_t = 1 << 22, value_parser = clap::value_parser!(u64).range(1..))]
    updates: u64,
    /// GCBench: configurations C1 up to this one (1 to 5; the heap grows with each)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=5))]
    gc_max: u32,
    /// One JSON object per row (the keys of docs/vm.md) instead of tables
    #[arg(long)]
    json: bool,
}

#[derive(ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
enum Experiment {
    /// Appel and Li's trap benchmarks (Figure 3.2)
    Appel,
    /// Map, protect and unmap of buffers (Figure 3.3)
    Mpu,
    /// HPCC RandomAccess by page size (Table 3.1)
    Gups,
    /// GCBench, dirty bits against protection traps (Table 3.4)
    Gc,
}

const ALL: [Experiment; 4] = [
    Experiment::Appel,
    Experiment::Mpu,
    Experiment::Gups,
    Experiment::Gc,
];

/// The page sizes RandomAccess tries, each where `--max-mib` holds one of its
/// pages; map, protect and unmap takes the first two (its leaf tables are
/// page tables of 4 KiB or 2 MiB entries).
const BACKINGS: [Backing; 3] = [Backing::Small, Backing::Huge2M, Backing::Huge1G];

pub fn run(a: Args) -> Result<()> {
    let only = if a.only.is_empty() {
        ALL.to_vec()
    } else {
        a.only.clone()
    };
    for e in ALL.into_iter().filter(|e| only.contains(e)) {
        match e {
            Experiment::Appel => appel(&a)?,
            Experiment::Mpu => mpu(&a)?,
            Experiment::Gups => gups(&a)?,
            Experiment::Gc => gc(&a)?,
        }
    }
    Ok(())
}

/// The sizes from `from` bytes, ×4, up to `--max-mib`.
fn sizes(from: u64, a: &Args) -> impl Iterator<Item = u64> {
    let max = a.max_mib << 20;
    std::iter::successors(Some(from), |b| b.checked_mul(4)).take_while(move |&b| b <= max)
}

/// Whether `backing` has a page within `--max-mib` and can hold `bytes` now;
/// says why not on stderr.
fn usable(backing: Backing, bytes: u64, a: &Args) -> bool {
    if backing.page() > a.max_mib << 20 {
        return false;
    }
    match backing.available(bytes) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("{} KiB pages skipped: {why}", backing.page() >> 10);
            false
        }
    }
}

fn appel(a: &Args) -> Result<()> {
    let r: AppelRow = appel_li(a.rounds, a.traps, a.reps).context("Appel and Li")?;
    if a.json {
        outln!("{}", r.json());
        return Ok(());
    }
    outln!(
        "Appel and Li (Figure 3.2): ns per trap, {} rounds, {} traps, median of {}",
        a.rounds,
        a.traps,
        a.reps
    );
    outln!("  {:<20} {:>10} {:>10} {:>8}", "", "ours", "Linux", "ratio");
    for (name, (ours, linux)) in [
        ("trap", r.trap),
        ("prot1-trap-unprot", r.prot1),
        ("protN-trap-unprot", r.prot_n),
        ("appel1", r.appel1),
        ("appel2", r.appel2),
    ] {
        outln!(
            "  {name:<20} {ours:>10.1} {linux:>10.1} {:>7.2}×",
            ours / linux
        );
    }
    outln!();
    Ok(())
}

fn mpu(a: &Args) -> Result<()> {
    let mut rows: Vec<Row> = Vec::new();
    for backing in &BACKINGS[..2] {
        let backing = *backing;
        if !usable(backing, a.max_mib << 20, a) {
            continue;
        }
        for bytes in sizes(backing.page(), a) {
            let r = map_protect_unmap(bytes, backing, a.reps)
                .with_context(|| format!("map, protect, unmap of {bytes} bytes"))?;
            if a.json {
                outln!("{}", r.json());
            }
            rows.push(r);
        }
    }
    if a.json {
        return Ok(());
    }
    outln!(
        "Map, protect, unmap (Figure 3.3): ns per page, median of {}; ratio ours/Linux (mmap); Linux through System V shm: shmat, mprotect, shmdt",
        a.reps
    );
    outln!(
        "  {:>10} {:>6} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}",
        "bytes",
        "page",
        "map",
        "Linux",
        "ratio",
        "protect",
        "Linux",
        "ratio",
        "unmap",
        "Linux",
        "ratio",
        "shmat",
        "mprotect",
        "shmdt"
    );
    for r in &rows {
        outln!(
            "  {:>10} {:>5}K {:>10.2} {:>10.2} {:>6.2}× {:>10.2} {:>10.2} {:>6.2}× {:>10.2} {:>10.2} {:>6.2}× {:>10.2} {:>10.2} {:>10.2}",
            r.bytes,
            r.page >> 10,
            r.map.0,
            r.map.1,
            r.map.0 / r.map.1,
            r.protect.0,
            r.protect.1,
            r.protect.0 / r.protect.1,
            r.unmap.0,
            r.unmap.1,
            r.unmap.0 / r.unmap.1,
            r.shm.0,
            r.shm.1,
            r.shm.2
        );
    }
    outln!();
    Ok(())
}

fn gups(a: &Args) -> Result<()> {
    let mut rows: Vec<GupsRow> = Vec::new();
    for backing in BACKINGS {
        // One table of the largest size at a time (ours: and its tables).
        if !usable(backing, (a.max_mib << 20) + (4 << 20), a) {
            continue;
        }
        for bytes in sizes(1 << 20, a).filter(|&b| b >= backing.page()) {
            let r = random_access(bytes, backing, a.updates, a.reps)
                .with_context(|| format!("RandomAccess on {bytes} bytes"))?;
            if a.json {
                outln!("{}", r.json());
            }
            rows.push(r);
        }
    }
    if a.json {
        return Ok(());
    }
    outln!(
        "RandomAccess (Table 3.1): GUPS, {} updates, median of {}",
        a.updates,
        a.reps
    );
    outln!(
        "  {:>10} {:>6} {:>10} {:>10} {:>7}",
        "bytes",
        "page",
        "ours",
        "Linux",
        "ratio"
    );
    for r in &rows {
        outln!(
            "  {:>10} {:>5}K {:>10.5} {:>10.5} {:>6.2}×",
            r.bytes,
            r.page >> 10,
            r.gups.0,
            r.gups.1,
            r.gups.0 / r.gups.1
        );
    }
    outln!();
    Ok(())
}

fn gc(a: &Args) -> Result<()> {
    let mut rows: Vec<GcRow> = Vec::new();
    for config in 1..=a.gc_max {
        let r = gcbench(config, a.reps).with_context(|| format!("GCBench C{config}"))?;
        if a.json {
            outln!("{}", r.json());
        }
        rows.push(r);
    }
    if a.json {
        return Ok(());
    }
    outln!(
        "GCBench (Table 3.4): seconds, median of {}; dirty bits against protection traps",
        a.reps
    );
    outln!(
        "  {:>6} {:>12} {:>10} {:>10} {:>7}",
        "config",
        "heap bytes",
        "dirty",
        "traps",
        "ratio"
    );
    for r in &rows {
        outln!(
            "  {:>6} {:>12} {:>10.3} {:>10.3} {:>6.2}×",
            format!("C{}", r.config),
            r.heap_bytes,
            r.seconds.0,
            r.seconds.1,
            r.seconds.0 / r.seconds.1
        );
    }
    outln!();
    Ok(())
}
