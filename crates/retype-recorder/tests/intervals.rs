//! An aggregate recording's snapshots and RSS samples come at their interval
//! although its calls read the clock only every few calls (`coarse`): never
//! sooner than the interval, and about on time both while the program calls
//! back to back and after it slows down all at once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use retype_trace::Trace;

/// The interval asked for, in ms, of both snapshots and RSS samples.
const INTERVAL_MS: u64 = 10;

/// Brings libretype_recorder.so up to date (a test run does not build the
/// package's cdylib) and gives its path: beside the test's own `deps` folder.
fn recorder() -> PathBuf {
    static BUILD: Once = Once::new();
    let exe = std::env::current_exe().unwrap();
    let release = exe.components().any(|c| c.as_os_str() == "release");
    BUILD.call_once(|| {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "-p", "retype-recorder"]);
        if release {
            cargo.arg("--release");
        }
        assert!(
            cargo.status().unwrap().success(),
            "cannot build the recorder"
        );
    });
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libretype_recorder.so")
}

/// Compiles `tests/c/SOURCE` into `dir`.
fn compile(source: &str, dir: &Path) -> PathBuf {
    let out = dir.join(source.trim_end_matches(".c"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(source);
    let ok = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cannot compile {}", src.display());
    out
}

/// The gaps, in ms, between the times `ns` (in order) taken on the
/// program's calls: all but the first and last, which the recording's start
/// and end take.
fn gaps_ms(mut ns: Vec<u64>) -> Vec<f64> {
    ns.sort_unstable();
    let on_calls = &ns[1..ns.len().saturating_sub(1).max(1)];
    on_calls
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .collect()
}

/// Checks the gaps `gaps` (ms) of `what`: none shorter than the interval,
/// half of them at most twice it (a loaded machine delays some).
fn check(what: &str, gaps: &[f64], at_least: usize) {
    assert!(
        gaps.len() >= at_least,
        "{what}: {} gaps {gaps:?}",
        gaps.len()
    );
    let interval = INTERVAL_MS as f64;
    assert!(
        gaps.iter().all(|&g| g >= interval - 0.01),
        "{what}: a gap under {interval} ms: {gaps:?}"
    );
    let mut sorted = gaps.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!(
        median <= 2.0 * interval,
        "{what}: median gap {median} ms: {gaps:?}"
    );
}

#[test]
fn snapshots_and_rss_samples_keep_their_interval_after_a_burst() {
    let dir = std::env::temp_dir().join(format!("retype-intervals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paced = compile("paced.c", &dir);
    let trace = dir.join("t.rtr");
    // A burst of a few ms that lets the clock count to its most calls
    // between reads, then 150 pairs 2 ms apart (300 ms): were it still read
    // every 32 calls (16 pairs), the checks would come every 32 ms.
    let status = Command::new(&paced)
        .args(["100000", "150", "2000"])
        .env("LD_PRELOAD", recorder())
        .env("RETYPE_TRACE_FILE", &trace)
        .env("RETYPE_AGGREGATE", "1")
        .env("RETYPE_SNAPSHOT_MS", INTERVAL_MS.to_string())
        .env("RETYPE_RSS_MS", INTERVAL_MS.to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let t = Trace::read_file(&trace).unwrap();
    // 300 ms of slow calls alone hold 30 intervals: at least half are seen.
    let snapshots = gaps_ms(t.snapshots.iter().map(|s| s.time_ns).collect());
    check("snapshots", &snapshots, 15);
    let rss = gaps_ms(t.rss.iter().map(|s| s.time_ns).collect());
    check("RSS samples", &rss, 15);
    std::fs::remove_dir_all(&dir).unwrap();
}
