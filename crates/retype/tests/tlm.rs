//! `retype study tlm` on a tiny configuration under glibc and retype-malloc:
//! the rows are consistent (no negative time, wait = lifetime − user −
//! kernel), and the counts are what the workload did, computed here from
//! the flags alone. No timing is asserted.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Once;

use serde_json::Value;

use common::{json_lines, retype_cmd, scratch, stderr};

/// Brings the recorder and the preload library beside the retype binary up
/// to date: a test run of this package alone does not build other packages'
/// cdylibs.
fn libraries_built() {
    static BUILD: Once = Once::new();
    BUILD.call_once(|| {
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_retype"));
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args([
            "build",
            "-p",
            "retype-recorder",
            "-p",
            "retype-malloc-preload",
        ]);
        if exe.components().any(|c| c.as_os_str() == "release") {
            cargo.arg("--release");
        }
        assert!(
            cargo.status().unwrap().success(),
            "cannot build the libraries"
        );
    });
}

const THREADS: [u64; 2] = [1, 2];
const SIZES: [u64; 2] = [4096, 16384];
const ROUNDS: u64 = 2;
const STEADY: u64 = 2;
const BLOCKS: u64 = 8;
const RUNS: u64 = 2;

fn tiny(extra: &[&str]) -> std::process::Output {
    libraries_built();
    retype_cmd()
        .args([
            "study",
            "tlm",
            "--allocators",
            "glibc,retype",
            "--threads",
            "1,2",
            "--sizes",
            "4K,16384",
            "--rounds",
            &ROUNDS.to_string(),
            "--steady",
            &STEADY.to_string(),
            "--blocks",
            &BLOCKS.to_string(),
            "--runs",
            &RUNS.to_string(),
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn num(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a whole number in {v}"))
}

fn float(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number in {v}"))
}

#[test]
fn rows_are_consistent_and_count_what_the_workload_did() {
    let rows = json_lines(&tiny(&["--json"]));
    assert_eq!(rows.len(), 2 * THREADS.len() * SIZES.len());
    // Blocks per worker: rounds 1..=ROUNDS grow by BLOCKS, then STEADY rounds at the largest.
    let mallocs_per_thread: u64 =
        (1..=ROUNDS).map(|k| k * BLOCKS).sum::<u64>() + STEADY * ROUNDS * BLOCKS;
    let strace = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut seen = Vec::new();
    for r in &rows {
        let (allocator, threads, size) = (
            r["allocator"].as_str().unwrap(),
            num(r, "threads"),
            num(r, "size"),
        );
        seen.push((allocator.to_string(), threads, size));
        let what = format!("{allocator}, {threads} threads, {size} B");
        assert_eq!(num(r, "mallocs"), threads * mallocs_per_thread, "{what}");
        assert_eq!(
            num(r, "recorded_calls"),
            2 * threads * mallocs_per_thread,
            "{what}"
        );
        assert_eq!(
            num(r, "steady_calls"),
            RUNS * threads * 2 * STEADY * ROUNDS * BLOCKS,
            "{what}: every steady call of every recorded run"
        );
        assert_eq!(num(r, "runs"), RUNS);
        assert!(num(r, "median_run") < RUNS);
        let per_thread = r["per_thread"].as_array().unwrap();
        assert_eq!(per_thread.len() as u64, threads, "{what}");
        for t in per_thread {
            let (l, u, k, w) = (
                num(t, "lifetime_ns"),
                num(t, "user_ns"),
                num(t, "kernel_ns"),
                num(t, "wait_ns"),
            );
            assert!(l > 0 && u + k > 0, "{what}: {t}");
            assert_eq!(w, l - u - k, "{what}: wait = lifetime − user − kernel: {t}");
        }
        let by_round = r["by_round"].as_array().unwrap();
        assert_eq!(by_round.len() as u64, ROUNDS + STEADY + 1, "{what}");
        let mut before = 0.0;
        for (k, p) in by_round.iter().enumerate() {
            let (l, u, kn, w) = (
                float(p, "lifetime_ns"),
                float(p, "user_ns"),
                float(p, "kernel_ns"),
                float(p, "wait_ns"),
            );
            assert!(
                l >= before && u >= 0.0 && kn >= 0.0 && w >= 0.0,
                "{what}: round {k}: {p}"
            );
            assert!(
                (w - (l - u - kn)).abs() <= 1e-6 * l.max(1.0),
                "{what}: round {k}: {p}"
            );
            let blocks = if k == 0 {
                0
            } else {
                (k as u64).min(ROUNDS) * BLOCKS
            };
            assert_eq!(num(p, "blocks"), blocks, "{what}: round {k}");
            before = l;
        }
        // None when the kernel put every tick of every worker in kernel mode.
        for k in ["kernel_user_ratio", "steady_kernel_user_ratio"] {
            assert!(r[k].is_null() || float(r, k) >= 0.0, "{what}: {k}");
        }
        let lat: Vec<u64> = ["p50_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns"]
            .iter()
            .map(|k| num(r, k))
            .collect();
        assert!(lat[0] >= 1, "{what}: a measured latency is never 0");
        assert!(lat.windows(2).all(|w| w[0] <= w[1]), "{what}: {lat:?}");
        // The longest call whose worker ran throughout is one of the steady calls: no longer
        // than the longest; without rseq neither is known.
        match (
            r["max_running_ns"].as_u64(),
            r["descheduled_calls"].as_u64(),
        ) {
            (Some(running), Some(descheduled)) => {
                assert!(
                    running >= 1 && running <= lat[4],
                    "{what}: {running} vs {lat:?}"
                );
                assert!(descheduled <= num(r, "steady_calls"), "{what}");
                if descheduled == 0 {
                    assert_eq!(running, lat[4], "{what}: no call descheduled");
                }
            }
            (None, None) => {}
            other => panic!("{what}: {other:?}"),
        }
        if strace {
            let s = &r["syscalls"];
            for phase in ["rounds", "steady"] {
                let c = &s[phase];
                let kinds: u64 = ["mmap", "munmap", "mremap", "madvise", "mprotect", "brk"]
                    .iter()
                    .map(|k| num(c, k))
                    .sum();
                assert_eq!(kinds, num(c, "total"), "{what}: {phase}");
            }
            assert!(
                num(&s["steady"], "total") <= num(&s["rounds"], "total"),
                "{what}"
            );
        }
    }
    for a in ["glibc", "retype"] {
        for t in THREADS {
            for s in SIZES {
                assert!(
                    seen.contains(&(a.to_string(), t, s)),
                    "no row for {a}, {t}, {s}"
                );
            }
        }
    }
}

/// With `--reserve`, retype-malloc runs again with a reserve sized for each
/// configuration: its rows count the same calls, and its workers make no
/// system call that maps or returns memory (the reserve's promise).
#[test]
fn a_reserve_keeps_the_workers_out_of_the_kernel_for_memory() {
    let rows = json_lines(&tiny(&["--json", "--reserve"]));
    assert_eq!(rows.len(), 3 * THREADS.len() * SIZES.len());
    let strace = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    for t in THREADS {
        for s in SIZES {
            let of = |a: &str| {
                rows.iter()
                    .find(|r| r["allocator"] == a && num(r, "threads") == t && num(r, "size") == s)
                    .unwrap_or_else(|| panic!("no row for {a}, {t}, {s}"))
            };
            let (plain, reserved) = (of("retype"), of("retype-reserve"));
            for k in ["mallocs", "recorded_calls", "steady_calls"] {
                assert_eq!(num(plain, k), num(reserved, k), "{t} threads, {s} B: {k}");
            }
            if strace {
                assert_eq!(
                    num(&reserved["syscalls"]["rounds"], "total"),
                    0,
                    "{t} threads, {s} B: {}",
                    reserved["syscalls"]
                );
            }
        }
    }
}

#[test]
fn the_report_draws_every_chart() {
    let dir = scratch("tlm-report");
    let html = dir.join("tlm.html");
    let o = tiny(&["--no-syscalls", "--report", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("id=\"tlm\"") && text.contains("four panels"),
        "the part and its panels"
    );
    if let Some(browser) = common::chromium() {
        let marks = common::marks_in_browser(browser, &html);
        // Across allocators: four charts (no system calls were counted), and the longest
        // call whose worker ran where rseq tells it; then four panels per allocator.
        let running = marks.contains_key("maximum latency, worker running");
        assert_eq!(marks.len(), 4 + usize::from(running) + 2 * 4, "{marks:?}");
        for (name, n) in &marks {
            assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
        }
    }
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    for (flag, value, reason) in [
        ("--allocators", "hoard", "unknown allocator \"hoard\""),
        ("--sizes", "0", "at least 1 byte"),
        ("--steady", "0", "steady rounds"),
        ("--threads", "0", "at least 1"),
    ] {
        let o = retype_cmd()
            .args(["study", "tlm", flag, value])
            .output()
            .unwrap();
        assert!(
            !o.status.success() && stderr(&o).contains(reason),
            "{flag} {value}: {}",
            stderr(&o)
        );
    }
}
