//! `retype bench vm`: seed 001 §3.5.2 and §3.6 on Linux (`crate::bench::vm`)
//! as tables or JSON lines: the memory of shadow page tables (Figure 3.1);
//! then capabilities that map real memory
//! (`crates/retype-vm`) beside raw Linux system calls, both in the same run,
//! alternated: Appel and Li's trap benchmarks (Figure 3.2), map, protect and
//! unmap of buffers (Figure 3.3), RandomAccess by page size (Table 3.1) and
//! run by run (Figure 3.5), PageRank by page size per array (Table 3.3),
//! and a GCBench-like collector whose write barrier is dirty bits or protection
//! traps, the traps also on raw Linux (Table 3.4). See docs/vm.md.

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use retype_vm::Backing;

use crate::bench::vm::appel::{appel_li, AppelRow};
use crate::bench::vm::dist::{histogram, Dist, BIMODAL};
use crate::bench::vm::gc::{gcbench, GcRow};
use crate::bench::vm::gups::{random_access, spread, GupsRow};
use crate::bench::vm::mpu::{map_protect_unmap, Row};
use crate::bench::vm::pagerank::{table, Graph};
use crate::bench::vm::shadow::{shadow_memory, ShadowRow, MAPPING};

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
    /// RandomAccess spread: runs per table size, every one kept (Figure 3.5)
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(4..))]
    runs: u32,
    /// PageRank: the R-MAT graph has 2^scale vertices and 16 edges each
    /// (21: about 180 MiB of arrays; each more doubles it)
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u32).range(8..=28))]
    pr_scale: u32,
    /// PageRank: iterations per run
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pr_iterations: u32,
    /// GCBench: configurations C1 up to this one (1 to 5; the heap grows with each)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=5))]
    gc_max: u32,
    /// One JSON object per row (the keys of docs/vm.md) instead of tables
    #[arg(long)]
    json: bool,
}

#[derive(ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
enum Experiment {
    /// Memory of shadow page tables, list against array (Figure 3.1)
    Shadow,
    /// Appel and Li's trap benchmarks (Figure 3.2)
    Appel,
    /// Map, protect and unmap of buffers (Figure 3.3)
    Mpu,
    /// HPCC RandomAccess by page size (Table 3.1)
    Gups,
    /// RandomAccess run by run: the spread of GUPS (Figure 3.5)
    GupsSpread,
    /// PageRank with its arrays on 4 KiB, 2 MiB and mixed pages (Table 3.3)
    Pagerank,
    /// GCBench: dirty bits, traps, and traps on raw Linux (Table 3.4)
    Gc,
}

const ALL: [Experiment; 7] = [
    Experiment::Shadow,
    Experiment::Appel,
    Experiment::Mpu,
    Experiment::Gups,
    Experiment::GupsSpread,
    Experiment::Pagerank,
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
            Experiment::Shadow => shadow(&a)?,
            Experiment::Appel => appel(&a)?,
            Experiment::Mpu => mpu(&a)?,
            Experiment::Gups => gups(&a)?,
            Experiment::GupsSpread => gups_spread(&a)?,
            Experiment::Pagerank => pagerank(&a)?,
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

/// Figure 3.1 for working sets of one mapping (2 MiB) ×4 up to 64 GiB: the
/// tables are only counted, so no memory is needed.
fn shadow(a: &Args) -> Result<()> {
    let vm = retype_vm::Vm::new(retype_vm::Options {
        ram: 4 << 20,
        dirty_bits: false,
        ..retype_vm::Options::default()
    })
    .context("a space for the entries' capabilities")?;
    let cap = retype_core::caps::CapRef::l1(vm.boot().cspace, 4);
    let rows: Vec<ShadowRow> = std::iter::successors(Some(MAPPING), |b| Some(b * 4))
        .take_while(|&b| b <= 64 << 30)
        .map(|b| shadow_memory(b, cap))
        .collect();
    if a.json {
        for r in &rows {
            outln!("{}", r.json());
        }
        return Ok(());
    }
    outln!("Shadow page tables (Figure 3.1): bytes held, one mapping per 2 MiB leaf table of 4 KiB pages");
    outln!(
        "  {:>14} {:>9} {:>12} {:>12} {:>8} {:>10}",
        "working set",
        "mappings",
        "list",
        "array",
        "ratio",
        "array/ws"
    );
    for r in &rows {
        outln!(
            "  {:>14} {:>9} {:>12} {:>12} {:>7.1}× {:>9.3}%",
            r.working_set,
            r.mappings,
            r.list_bytes,
            r.array_bytes,
            r.array_bytes as f64 / r.list_bytes as f64,
            100.0 * r.array_bytes as f64 / r.working_set as f64
        );
    }
    outln!();
    Ok(())
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
        "Map, protect, unmap (Figure 3.3): ns per page, median of {}; ratio ours/Linux (mmap of a memfd); Linux through System V shm (shmat, mprotect, shmdt), MAP_POPULATE of anonymous memory and a shm_open object (Figure 2.3; '-': not run, see docs/vm.md)",
        a.reps
    );
    outln!(
        "  {:>10} {:>6} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
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
        "shmdt",
        "populate",
        "mprotect",
        "munmap",
        "shm_open",
        "mprotect",
        "munmap"
    );
    let three = |v: Option<(f64, f64, f64)>| match v {
        Some((m, p, u)) => format!("{m:>10.2} {p:>10.2} {u:>10.2}"),
        None => format!("{:>10} {:>10} {:>10}", "-", "-", "-"),
    };
    for r in &rows {
        outln!(
            "  {:>10} {:>5}K {:>10.2} {:>10.2} {:>6.2}× {:>10.2} {:>10.2} {:>6.2}× {:>10.2} {:>10.2} {:>6.2}× {} {} {}",
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
            three(Some(r.shm)),
            three(r.populate),
            three(r.shm_open)
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

fn gups_spread(a: &Args) -> Result<()> {
    let mut header = false;
    for backing in BACKINGS {
        if !usable(backing, (a.max_mib << 20) + (4 << 20), a) {
            continue;
        }
        for bytes in sizes(1 << 20, a).filter(|&b| b >= backing.page()) {
            let r = spread(bytes, backing, a.updates, a.runs)
                .with_context(|| format!("RandomAccess spread on {bytes} bytes"))?;
            if a.json {
                outln!("{}", r.json());
                continue;
            }
            if !header {
                outln!(
                    "RandomAccess spread (Figure 3.5): GUPS of each of {} runs, {} updates each, ours and Linux alternated; bimodality coefficient above {BIMODAL:.3} suggests more than one mode; gap: the widest empty band between runs over the range",
                    a.runs,
                    a.updates
                );
                header = true;
            }
            outln!("  {} bytes, {} KiB pages", r.bytes, r.page >> 10);
            outln!(
                "    {:<6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>6}",
                "",
                "min",
                "q1",
                "median",
                "q3",
                "max",
                "bimodality",
                "gap"
            );
            for (name, d) in [("ours", &r.ours), ("Linux", &r.linux)] {
                outln!("{}", summary(name, d));
            }
            out!("{}", histogram(("ours", &r.ours), ("Linux", &r.linux), 12));
        }
    }
    if header {
        outln!();
    }
    Ok(())
}

fn summary(name: &str, d: &Dist) -> String {
    format!(
        "    {name:<6} {:>9.5} {:>9.5} {:>9.5} {:>9.5} {:>9.5} {:>10.3}{} {:>6.2}",
        d.min,
        d.q1,
        d.median,
        d.q3,
        d.max,
        d.bimodality,
        if d.multimodal() { "*" } else { " " },
        d.gap
    )
}

fn pagerank(a: &Args) -> Result<()> {
    let g = Graph::rmat(a.pr_scale);
    let (eb, vb) = g.bytes();
    let rows = table(&g, a.pr_scale, a.pr_iterations, a.reps).context("PageRank")?;
    drop(g);
    for r in &rows {
        for (side, s) in ["ours", "Linux THP", "Linux hugetlbfs"]
            .iter()
            .zip(&r.seconds)
        {
            if let Err(why) = s {
                if r.pages != "4 KiB" || *side != "Linux hugetlbfs" {
                    eprintln!(
                        "PageRank on {} pages, {side}: not available: {why}",
                        r.pages
                    );
                }
            }
        }
    }
    if a.json {
        for r in &rows {
            outln!("{}", r.json());
        }
        return Ok(());
    }
    outln!(
        "PageRank (Table 3.3): seconds for {} iterations, median of {}; R-MAT scale {} ({} vertices, {} edges; edge array {} MiB, vertex arrays {} MiB); mixed: edges on 4 KiB pages, vertex arrays on 2 MiB",
        a.pr_iterations,
        a.reps,
        a.pr_scale,
        1u64 << a.pr_scale,
        rows.first().map_or(0, |r| r.edges),
        eb >> 20,
        vb >> 20
    );
    outln!(
        "  {:<7} {:>18} {:>22} {:>18}",
        "pages",
        "ours (retype-vm)",
        "Linux THP off / on",
        "Linux hugetlbfs"
    );
    let cell = |s: &std::result::Result<f64, String>| match s {
        Ok(v) => format!("{v:.3}"),
        Err(_) => "n/a".into(),
    };
    for r in &rows {
        outln!(
            "  {:<7} {:>18} {:>22} {:>18}",
            r.pages,
            cell(&r.seconds[0]),
            cell(&r.seconds[1]),
            cell(&r.seconds[2])
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
        "GCBench (Table 3.4): seconds, median of {}; write barrier: dirty bits and protection traps through retype-vm, protection traps on raw Linux (mprotect + SIGSEGV)",
        a.reps
    );
    outln!(
        "  {:>6} {:>12} {:>10} {:>10} {:>12} {:>13} {:>13}",
        "config",
        "heap bytes",
        "dirty",
        "traps",
        "Linux traps",
        "dirty/traps",
        "traps/Linux"
    );
    for r in &rows {
        let (d, t, l) = r.seconds;
        outln!(
            "  {:>6} {:>12} {:>10.3} {:>10.3} {:>12.3} {:>12.2}× {:>12.2}×",
            format!("C{}", r.config),
            r.heap_bytes,
            d,
            t,
            l,
            d / t,
            t / l
        );
    }
    outln!();
    Ok(())
}
