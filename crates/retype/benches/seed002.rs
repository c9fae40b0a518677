//! Seed 002's experiment (COSC1114 "segmented memory allocator"), rebuilt on
//! our heaps: for a low, medium and high load (7,000 / 20,000 / 50,000), first
//! pre-generate that many free blocks of 5–34 bytes (size from the loop index),
//! then allocate that many values of one type (int, double, or a word from
//! the word list as a NUL-terminated string), then free them in the same
//! order. Each run is a fresh process so its peak RSS is its own.
//!
//! The seed made its free blocks without allocating them; a heap can only
//! free what it gave out, so we allocate each one followed by an 8-byte guard
//! that stays live (the guards keep the free blocks from coalescing), then
//! free the blocks. Time covers the three phases; the guards are freed after.
//!
//! `cargo bench -p retype --bench seed002 [-- --repeats N --heaps P,P --loads low,medium,high]`
//! prints a Markdown table: the mean of N runs (default 3) per cell, the runs
//! of the heaps alternating.
//!
//! With `--series FILE.csv` it also samples the run as the seed did: every
//! N/10 iterations of each stage (free-block generation, whose two loops
//! count as one stage of 2N iterations, allocation, deallocation) the time
//! since the start and the resident set (`VmRSS`), written to FILE one line a
//! sample; `bench/seed002.py` draws them. The time spent reading `VmRSS` is
//! left out of the sampled times, not of the table's totals, which come from
//! the same runs (about 40 reads of `/proc/self/status` a run). Its heaps
//! default to the seed's three list fits.

use std::io::Write;
use std::process::Command;
use std::ptr::NonNull;
use std::time::Instant;

use retype_core::heap::{Arena, Heap, HeapKind};

const WORDS: &str = "/usr/share/dict/words";
const LOADS: [(&str, usize); 3] = [("low", 7_000), ("medium", 20_000), ("high", 50_000)];
const TYPES: [&str; 3] = ["int", "double", "string"];

/// The stages of the run, as the seed named them.
const STAGES: [&str; 3] = ["free blocks", "allocation", "deallocation"];

/// Samples of one run: every `every` iterations of a stage, the time since
/// the start (less the time spent sampling) and the resident set.
struct Series {
    every: usize,
    start: Instant,
    /// Time spent reading the resident set, left out of the samples' times.
    spent: std::time::Duration,
    lines: Vec<String>,
}

impl Series {
    /// Takes a sample at iteration `i` of `stage` when it falls on one.
    fn at(&mut self, stage: usize, i: usize, heap_bytes: usize) {
        if !i.is_multiple_of(self.every) {
            return;
        }
        let before = Instant::now();
        let rss = status_kb("VmRSS:");
        let ms = (before - self.start - self.spent).as_secs_f64() * 1e3;
        self.lines
            .push(format!("{},{i},{ms:.3},{rss},{heap_bytes}", STAGES[stage]));
        self.spent += before.elapsed();
    }
}

/// Runs one configuration and prints `total_ms alloc_free_ms heap_bytes
/// peak_rss_kb`; with `series`, then one line per sample: `stage,iteration,
/// ms,rss_kib,heap_bytes`.
fn child(load: usize, ty: &str, heap: HeapKind, series: bool) {
    let words: Vec<String> = if ty == "string" {
        std::fs::read_to_string(WORDS)
            .unwrap_or_else(|e| {
                panic!("{WORDS}: {e} (install Debian's wamerican: scripts/install-deps wamerican)")
            })
            .lines()
            .map(str::to_owned)
            .collect()
    } else {
        Vec::new()
    };
    let mut arena = Arena::new(1 << 30).expect("arena");
    let mut h = heap.build(&mut arena).expect("a 1 GiB arena");
    let start = Instant::now();
    let mut series = series.then(|| Series {
        every: (load / 10).max(1),
        start,
        spent: std::time::Duration::ZERO,
        lines: Vec::new(),
    });
    let mut sample = |stage: usize, i: usize, h: &dyn Heap| {
        if let Some(s) = series.as_mut() {
            s.at(stage, i, h.heap_size());
        }
    };
    let mut guards = Vec::with_capacity(load);
    let mut holes = Vec::with_capacity(load);
    for i in 0..load {
        sample(0, i, &*h);
        holes.push(h.allocate(5 + i % 30, 8).expect("hole"));
        guards.push(h.allocate(8, 8).expect("guard"));
    }
    for (i, p) in holes.into_iter().enumerate() {
        sample(0, load + i, &*h);
        // SAFETY: each hole is live once.
        unsafe { h.free(p) };
    }
    let phase = Instant::now();
    let mut values: Vec<NonNull<u8>> = Vec::with_capacity(load);
    for i in 0..load {
        sample(1, i, &*h);
        let p = match ty {
            "int" => store(&mut *h, &(i as i32).to_ne_bytes()),
            "double" => store(&mut *h, &(i as f64).to_ne_bytes()),
            _ => {
                let w = words[i % words.len()].as_bytes();
                store(&mut *h, &[w, &[0]].concat())
            }
        };
        values.push(p);
    }
    for (i, p) in values.into_iter().enumerate() {
        sample(2, i, &*h);
        // SAFETY: each value is live once.
        unsafe { h.free(p) };
    }
    sample(2, load, &*h);
    let (total, alloc_free) = (start.elapsed(), phase.elapsed());
    let heap_bytes = h.heap_size();
    for p in guards {
        // SAFETY: each guard is live once.
        unsafe { h.free(p) };
    }
    h.check().expect("heap consistent at the end");
    println!(
        "{:.3} {:.3} {} {}",
        total.as_secs_f64() * 1e3,
        alloc_free.as_secs_f64() * 1e3,
        heap_bytes,
        status_kb("VmHWM:")
    );
    for line in series.map(|s| s.lines).unwrap_or_default() {
        println!("{line}");
    }
}

/// Allocates room for `bytes` and copies them in.
fn store(h: &mut dyn Heap, bytes: &[u8]) -> NonNull<u8> {
    let p = h.allocate(bytes.len(), 8).expect("value");
    // SAFETY: `p` has room for `bytes.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.as_ptr(), bytes.len()) };
    p
}

/// A figure of the process's status in KiB: `VmHWM:` (the peak resident
/// set) or `VmRSS:` (the resident set now).
fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn option<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(
            args[i + 1].parse().expect("load"),
            &args[i + 2],
            args[i + 3].parse().expect("a heap's name"),
            args.get(i + 4).is_some_and(|a| a == "--series"),
        );
        return;
    }
    let repeats: usize = option(&args, "--repeats").map_or(3, |r| r.parse().expect("--repeats N"));
    let series_path = option(&args, "--series");
    let mut series = series_path.map(|p| {
        let mut f = std::fs::File::create(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        writeln!(
            f,
            "load,type,heap,run,stage,iteration,ms,rss_kib,heap_bytes"
        )
        .unwrap_or_else(|e| panic!("{p}: {e}"));
        f
    });
    let default_heaps = if series.is_some() {
        vec![HeapKind::FirstFit, HeapKind::BestFit, HeapKind::WorstFit]
    } else {
        HeapKind::ALL.to_vec()
    };
    let heaps: Vec<HeapKind> = option(&args, "--heaps").map_or(default_heaps, |h| {
        h.split(',')
            .map(|n| n.parse().unwrap_or_else(|_| panic!("unknown heap {n:?}")))
            .collect()
    });
    let loads: Vec<(&str, usize)> = option(&args, "--loads").map_or(LOADS.to_vec(), |l| {
        l.split(',')
            .map(|n| {
                *LOADS
                    .iter()
                    .find(|(name, _)| *name == n)
                    .expect("load: low, medium or high")
            })
            .collect()
    });
    let exe = std::env::current_exe().expect("own path");
    println!("| load | type | heap | total ms | alloc+free ms | heap bytes | peak RSS KiB |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for &(load_name, load) in &loads {
        for ty in TYPES {
            // Repeats alternate over the heaps (A B C A B C), so that a burst of
            // load on the machine hits all of them alike.
            let mut sums = vec![[0f64; 4]; heaps.len()];
            for run in 0..repeats {
                for (name, sum) in heaps.iter().zip(&mut sums) {
                    let out = Command::new(&exe)
                        .args(["--child", &load.to_string(), ty, name.name()])
                        .args(series.is_some().then_some("--series"))
                        .output()
                        .expect("run child");
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let text = String::from_utf8(out.stdout).expect("utf-8");
                    let mut lines = text.lines();
                    let totals = lines.next().expect("the run's totals");
                    for (s, v) in sum.iter_mut().zip(totals.split_whitespace()) {
                        *s += v.parse::<f64>().expect("number");
                    }
                    if let Some(f) = series.as_mut() {
                        for l in lines {
                            writeln!(f, "{load_name},{ty},{name},{run},{l}")
                                .expect("write the series");
                        }
                    }
                }
            }
            for (name, sum) in heaps.iter().zip(&sums) {
                let m = sum.map(|s| s / repeats as f64);
                println!(
                    "| {load_name} ({load}) | {ty} | {name} | {:.1} | {:.1} | {:.0} | {:.0} |",
                    m[0], m[1], m[2], m[3]
                );
            }
        }
    }
}
