//! Seed 003's real-time experiment (`retype study tlm`) in the seed's form:
//! for each allocator its four panels (Figures 1–7: the kernel/user ratio,
//! the wait time per thread, user and kernel time, as the work grows), and
//! across allocators the worst-case latencies, the kernel/user ratio, the
//! wait time and the system calls of the steady state against the thread
//! count.

use std::path::Path;

use super::chart::{self, Axes, Line};
use super::table::{Cell, Table};
use super::{jsonl, Body, Figure, Part, Section, Summary};
use crate::tlm::goals::{self, METRICS};
use crate::tlm::row::Row;

/// Reads the lines of `retype study tlm --json`; a bad line is named by
/// file and line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Row>> {
    jsonl::read(path, "retype study tlm --json", |v| {
        Ok(serde_json::from_value(v)?)
    })
}

/// Values in the order of first appearance.
fn distinct<T: PartialEq + Copy>(rows: &[Row], f: impl Fn(&Row) -> T) -> Vec<T> {
    let mut out = Vec::new();
    for r in rows {
        let v = f(r);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn size_label(size: u64) -> String {
    if size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

/// The study's part.
pub fn part(rows: &[Row]) -> Part {
    let allocators: Vec<String> = {
        let mut a: Vec<String> = Vec::new();
        for r in rows {
            if !a.contains(&r.allocator) {
                a.push(r.allocator.clone());
            }
        }
        a
    };
    let mut sections = vec![across(rows, &allocators)];
    for a in &allocators {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.allocator == a).collect();
        sections.push(panels(a, &mine));
    }
    let r0 = &rows[0];
    let mut summary = vec![Summary::Line(format!(
        "{} allocators, {} to {} worker threads, blocks of {}; {} growing and {} steady rounds of up to {} blocks per thread, {} run(s) each. Lower is better; retype-malloc's goal is the lowest of all.",
        allocators.len(),
        rows.iter().map(|r| r.threads).min().unwrap_or(0),
        rows.iter().map(|r| r.threads).max().unwrap_or(0),
        distinct(rows, |r| r.size).into_iter().map(size_label).collect::<Vec<_>>().join(" and "),
        r0.rounds,
        r0.steady_rounds,
        u64::from(r0.rounds) * u64::from(r0.blocks_per_round),
        r0.runs,
    ))];
    let verdicts = goals::verdicts(rows);
    if !verdicts.is_empty() {
        let mut head = vec![Cell::new("allocator, threads, size")];
        head.extend(
            METRICS
                .iter()
                .map(|m| Cell::new(format!("lowest {}", m.name))),
        );
        let mut table = Table {
            head,
            rows: Vec::new(),
        };
        for chunk in verdicts.chunks(METRICS.len()) {
            let mine = &chunk[0].allocator;
            let mut row = vec![Cell::new(format!(
                "{mine}, {}, {}",
                chunk[0].threads,
                size_label(chunk[0].size)
            ))];
            for v in chunk {
                let ours = v.ours.map_or("-".into(), fmt);
                let text = match (&v.best_other, v.met()) {
                    (_, true) => format!("{mine} {ours}"),
                    (Some((a, b)), false) => format!("{a} {} ({mine} {ours})", fmt(*b)),
                    (None, false) => format!("{mine} {ours}"),
                };
                let mut c = Cell::new(text);
                if !v.met() {
                    c.differs = Some("retype-malloc's goal is not met here".into());
                }
                row.push(c);
            }
            table.rows.push(row);
        }
        summary.push(Summary::Table(table));
    }
    Part {
        id: "tlm".into(),
        title: "Seed 003: real-time behaviour (TLM)".into(),
        summary,
        sections,
    }
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// One line per allocator and size against the thread count.
fn across(rows: &[Row], allocators: &[String]) -> Section {
    let sizes = distinct(rows, |r| r.size);
    let fig = |title: &str, y: &str, log_y: bool, caption: &str, pick: fn(&Row) -> Option<f64>| {
        let mut lines = Vec::new();
        for (k, a) in allocators.iter().enumerate() {
            for (j, &s) in sizes.iter().enumerate() {
                let points: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| &r.allocator == a && r.size == s)
                    .filter_map(|r| Some((f64::from(r.threads), pick(r)?)))
                    .collect();
                lines.push(Line {
                    name: format!("{a}, {}", size_label(s)),
                    color: chart::color(k),
                    points,
                    dashed: j > 0,
                });
            }
        }
        Figure {
            title: title.into(),
            body: Body::Chart(
                chart::lines(
                    &Axes {
                        x: "worker threads",
                        y,
                        log_y,
                    },
                    &lines,
                    &[],
                )
                .with_log_x(),
            ),
            caption: caption.into(),
        }
    };
    let mut table = Table {
        head: [
            "allocator",
            "threads",
            "size",
            "user ms",
            "kernel ms",
            "wait ms",
            "kernel/user",
            "syscalls",
            "steady syscalls",
            "p50 ns",
            "p99 ns",
            "p99.9 ns",
            "p99.99 ns",
            "max ns",
            "max running ns",
            "descheduled",
        ]
        .map(Cell::new)
        .to_vec(),
        rows: Vec::new(),
    };
    for r in rows {
        let ms =
            |f: fn(&crate::tlm::times::Times) -> u64| Cell::new(format!("{:.1}", r.mean(f) / 1e6));
        let calls = |f: fn(&crate::tlm::syscalls::Syscalls) -> u64| {
            Cell::new(r.syscalls.as_ref().map_or("-".into(), |s| f(s).to_string()))
        };
        let l = &r.latency;
        let ns = |v: u64| Cell::new(v.to_string());
        table.rows.push(vec![
            Cell::new(r.allocator.clone()),
            Cell::new(r.threads.to_string()),
            Cell::new(size_label(r.size)),
            ms(|t| t.user_ns),
            ms(|t| t.kernel_ns),
            ms(|t| t.wait_ns),
            Cell::new(
                r.kernel_user_ratio
                    .map_or("-".into(), |v| format!("{v:.3}")),
            ),
            calls(|s| s.rounds.total),
            calls(|s| s.steady.total),
            ns(l.p50_ns),
            ns(l.p99_ns),
            ns(l.p999_ns),
            ns(l.p9999_ns),
            ns(l.max_ns),
            Cell::new(r.max_running_ns.map_or("-".into(), |v| v.to_string())),
            Cell::new(r.descheduled_calls.map_or("-".into(), |v| v.to_string())),
        ]);
    }
    Section {
        title: "Across allocators".into(),
        notes: vec![
            "Latency: every malloc and free of the steady rounds as the recorder timed it (wall time inside the allocator, so a thread preempted inside a call counts the wait), all recorded runs pooled; max running is the slowest call during which the worker was not descheduled (the kernel's rseq area tells; - if it could not), descheduled the calls during which it was. Times: per worker thread, the mean over the workers of the median plain run. System calls: mmap, munmap, mremap, madvise, mprotect and brk made by the workers, from one run under strace -f.".into(),
        ],
        figures: [
            fig("p99.99 latency", "µs", true, "The 99.99th percentile of the steady rounds' call latencies (log scale).", |r| Some(r.latency.p9999_ns as f64 / 1e3)),
            fig("maximum latency", "µs", true, "The slowest call of the steady rounds (log scale).", |r| Some(r.latency.max_ns as f64 / 1e3)),
            fig("kernel/user ratio", "kernel ÷ user", false, "Kernel over user time of all workers of all plain runs (the seed's top-left panel at the end of the run).", |r| r.kernel_user_ratio),
            fig("wait time per thread", "ms", false, "Lifetime − (user + kernel) per worker at the end of the run (the seed's top-right panel).", |r| Some(r.mean(|t| t.wait_ns) / 1e6)),
        ]
        .into_iter()
        .chain(rows.iter().any(|r| r.max_running_ns.is_some()).then(|| {
            fig("maximum latency, worker running", "µs", true, "The slowest call of the steady rounds during which the worker was not descheduled: the allocator's own worst case (log scale).", |r| r.max_running_ns.map(|n| n as f64 / 1e3))
        }))
        .chain(rows.iter().any(|r| r.syscalls.is_some()).then(|| {
            fig("system calls in the steady rounds", "calls", false, "Calls that map or return memory made by all workers after their memory stopped growing.", |r| r.syscalls.map(|s| s.steady.total as f64))
        }))
        .chain([Figure {
                title: "every figure".into(),
                body: Body::Table(table),
                caption: "Per worker thread (user, kernel, wait), all workers (system calls), steady rounds (latencies).".into(),
            }])
        .collect(),
    }
}

/// The seed's four panels for one allocator: one line per thread count and
/// size against the blocks each worker has allocated.
fn panels(allocator: &str, rows: &[&Row]) -> Section {
    let sizes: Vec<u64> = {
        let mut s: Vec<u64> = Vec::new();
        for r in rows {
            if !s.contains(&r.size) {
                s.push(r.size);
            }
        }
        s
    };
    let threads: Vec<u32> = {
        let mut t: Vec<u32> = rows.iter().map(|r| r.threads).collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    let fig = |title: &str,
               y: &str,
               caption: &str,
               pick: fn(&crate::tlm::row::RoundRow) -> Option<f64>| {
        let lines: Vec<Line> = rows
            .iter()
            .map(|r| {
                let mut blocks = 0u64;
                let points = r
                    .by_round
                    .iter()
                    .filter_map(|p| {
                        blocks += p.blocks;
                        Some((blocks as f64, pick(p)?))
                    })
                    .collect();
                Line {
                    name: format!("{} threads, {}", r.threads, size_label(r.size)),
                    color: chart::color(threads.iter().position(|&t| t == r.threads).unwrap_or(0)),
                    points,
                    dashed: sizes.iter().position(|&s| s == r.size).unwrap_or(0) > 0,
                }
            })
            .collect();
        Figure {
            title: format!("{allocator}: {title}"),
            body: Body::Chart(chart::lines(
                &Axes {
                    x: "blocks allocated per thread",
                    y,
                    log_y: false,
                },
                &lines,
                &[],
            )),
            caption: caption.into(),
        }
    };
    Section {
        title: format!("{allocator}: the seed's four panels"),
        notes: vec![format!(
            "As the seed's Figures 1–7: top left the kernel/user ratio, top right the wait time per thread, then user and kernel time per thread, each from the workers' start to the end of every round (mean over the workers of the median run); {}.",
            if sizes.len() > 1 { "the first block size solid, the others dashed" } else { "one block size" }
        )],
        figures: vec![
            fig("kernel/user ratio", "kernel ÷ user", "Kernel over user time so far (smaller is better).", |p| (p.user_ns > 0.0).then(|| p.kernel_ns / p.user_ns)),
            fig("wait time per thread", "ms", "Lifetime − (user + kernel) so far: the time the scheduler kept the thread waiting.", |p| Some(p.wait_ns / 1e6)),
            fig("user time per thread", "ms", "User-mode CPU time so far.", |p| Some(p.user_ns / 1e6)),
            fig("kernel time per thread", "ms", "Kernel-mode CPU time so far (page faults and system calls).", |p| Some(p.kernel_ns / 1e6)),
        ],
    }
}
