//! Bounded recordings as a user makes them: `retype record --aggregate`
//! (per-stack counters and snapshots) gives the same sites, leaks and peak as
//! the full recording of the same deterministic program, in a file whose
//! size does not grow with the calls; `retype record --sample-bytes` gives
//! estimates of the top sites' bytes within 5 % at 1 MB sampling on a
//! program that allocates about 1 GB (seeded: `RETYPE_SAMPLE_SEED`, so the
//! test draws the same samples in every run); every analysis says which kind
//! it read, and those that need events refuse an aggregate recording.

mod common;

use std::path::Path;

use serde_json::Value;

use common::recording::{compile, recorder_built};
use common::{retype_cmd, scratch, stderr, stdout};

/// `retype ARGS…` in `dir`; its stdout, or a panic with its stderr.
fn retype_ok(dir: &Path, args: &[&str]) -> String {
    let o = retype_cmd().args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
    stdout(&o)
}

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&retype_ok(dir, args)).expect("one JSON document")
}

/// `retype record EXTRA -o DIR/NAME -- bounded ARGS` (with the sampler's seed set).
fn record(dir: &Path, name: &str, extra: &[&str], args: &[&str]) {
    recorder_built();
    let exe = dir.join("bounded");
    let o = retype_cmd()
        .arg("record")
        .args(extra)
        .arg("-o")
        .arg(dir.join(name))
        .arg("--")
        .arg(&exe)
        .args(args)
        .env("RETYPE_SAMPLE_SEED", "1")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "record {extra:?}: {}", stderr(&o));
}

/// Each site of `sites --json` by name, with its figures.
fn sites(dir: &Path, trace: &str, by: &str) -> Vec<(String, Value)> {
    let v = json(
        dir,
        &["trace", "sites", trace, "--by", by, "--json", "--top", "0"],
    );
    v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["site"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// Asserts that the aggregate recording `agg` gives the sites (by function
/// and by stack), leaks and peak of the full recording `full`, which leaked
/// `leaked` bytes, and returns the full recording's `trace info --json`.
fn assert_same_figures(dir: &Path, full: &str, agg: &str, leaked: u64) -> Value {
    for by in ["function", "stack"] {
        let (f, a) = (sites(dir, full, by), sites(dir, agg, by));
        assert!(f.len() >= 5, "{f:?}");
        assert_eq!(a, f, "by {by}");
    }
    let leaks = |t: &str| {
        let mut v = json(dir, &["trace", "leaks", t, "--json"]);
        let kind = v["recording"].take();
        (kind, v["leaks"].take(), v["leaked_bytes"].take())
    };
    let (full_kind, full_leaks, full_bytes) = leaks(full);
    let (agg_kind, agg_leaks, agg_bytes) = leaks(agg);
    assert_eq!(
        (full_kind.as_str(), agg_kind.as_str()),
        (Some("full"), Some("aggregate"))
    );
    assert_eq!(agg_leaks, full_leaks);
    assert_eq!(full_bytes, leaked);
    assert_eq!(agg_bytes, full_bytes);
    let info = |t: &str| json(dir, &["trace", "info", t, "--json"]);
    let (f, a) = (info(full), info(agg));
    for key in [
        "peak_live_bytes",
        "peak_live_blocks",
        "live_at_end_bytes",
        "live_at_end_blocks",
        "bytes_requested",
        "temporary_allocations",
        "failed_allocations",
    ] {
        assert_eq!(a[key], f[key], "{key}");
    }
    assert_eq!(a["recording"], "aggregate");
    assert_eq!(f["recording"], "full");
    f
}

#[test]
fn an_aggregate_recording_gives_the_full_recordings_sites_leaks_and_peak() {
    let dir = scratch("bounded-same");
    compile("bounded.c", &dir);
    record(&dir, "full.rtr", &[], &["30000"]);
    record(&dir, "agg.rtr", &["--aggregate"], &["30000"]);
    // The ten leaked blocks of 100 bytes.
    let full = assert_same_figures(&dir, "full.rtr", "agg.rtr", 1000);
    // The peak is the 64 blocks of 4096 bytes, on top of what grow() had left then.
    assert!(full["peak_live_bytes"].as_u64().unwrap() >= 64 * 4096);
    let text = retype_ok(&dir, &["trace", "info", "agg.rtr"]);
    assert!(text.contains("recording: aggregate"), "{text}");
    let text = retype_ok(&dir, &["trace", "sites", "agg.rtr"]);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("recording: aggregate"),
        "{text}"
    );
}

/// Threads count into their own tallies, retired as each exits; blocks one
/// thread allocated and another freed; the peak in the main thread alone.
#[test]
fn an_aggregate_recording_of_threads_gives_the_full_recordings_figures() {
    let dir = scratch("bounded-threads");
    let peak = threads_peak(&dir, &["200000", "threads", "4"]);
    assert!(
        (64 * 4096..64 * 4096 + 16384).contains(&peak),
        "peak() is live then, and little else: {peak}"
    );
    let agg = json(&dir, &["trace", "info", "agg.rtr", "--json"]);
    let threads = agg["threads"].as_array().map_or(0, Vec::len);
    assert_eq!(threads, 5, "the main thread and 4 workers: {agg}");
}

/// A thread's frees are deferred until its next allocation; the peak is
/// still the process's when another thread then allocates less than they
/// freed.
#[test]
fn an_aggregate_recording_takes_another_threads_deferred_frees_out_of_the_peak() {
    let dir = scratch("bounded-handoff");
    let peak = threads_peak(&dir, &["20000", "handoff"]);
    assert!(
        (64 * 4096..64 * 4096 + 16384).contains(&peak),
        "the thread's peak() is the process's: {peak}"
    );
}

/// A thread's rise that its deferred frees cover still makes the process's
/// peak when another thread's blocks are live then.
#[test]
fn an_aggregate_recording_sees_a_peak_a_threads_deferred_frees_cover() {
    let dir = scratch("bounded-regain");
    let peak = threads_peak(&dir, &["20000", "regain"]);
    assert!(
        (80 * 4096..80 * 4096 + 16384).contains(&peak),
        "both threads' blocks at once: {peak}"
    );
}

/// Records `bounded.c` with threads (`args`) fully and as an aggregate, checks
/// that both give the same figures, and returns the peak live bytes. Leaked:
/// the ten blocks of 100 bytes, and each worker's thread-local storage
/// (glibc's dtv, a calloc inside pthread_create, of the main thread's stack).
fn threads_peak(dir: &Path, args: &[&str]) -> u64 {
    compile("bounded.c", dir);
    record(dir, "full.rtr", &[], args);
    record(dir, "agg.rtr", &["--aggregate"], args);
    let dtv = sites(dir, "agg.rtr", "function")
        .iter()
        .find(|(name, _)| name == "allocate_dtv")
        .map_or(0, |(_, s)| s["leaked_bytes"].as_u64().unwrap());
    let full = assert_same_figures(dir, "full.rtr", "agg.rtr", 1000 + dtv);
    full["peak_live_bytes"].as_u64().unwrap()
}

#[test]
fn an_aggregate_recordings_size_does_not_grow_with_the_calls() {
    let dir = scratch("bounded-size");
    compile("bounded.c", &dir);
    // No snapshots nor RSS samples: their count grows with the run's length, not its calls.
    let extra = ["--aggregate", "--snapshot-ms", "0", "--rss-ms", "0"];
    record(&dir, "small.rtr", &extra, &["1000000"]);
    record(&dir, "large.rtr", &extra, &["10000000"]);
    let size = |n: &str| std::fs::metadata(dir.join(n)).unwrap().len();
    let (small, large) = (size("small.rtr"), size("large.rtr"));
    // The same stacks; only the counters' varints grow (a few bytes each).
    assert!(
        large < small + 512,
        "{small} bytes for 1 M calls, {large} for 10 M"
    );
    let calls = |t: &str| {
        json(&dir, &["trace", "info", t, "--json"])["counted"]["allocations"]
            .as_u64()
            .unwrap()
    };
    let (c1, c10) = (calls("small.rtr"), calls("large.rtr"));
    assert!(c10 > 9 * c1, "{c1} then {c10} allocations counted");
}

#[test]
fn what_needs_events_refuses_an_aggregate_recording_naming_the_kind() {
    let dir = scratch("bounded-refused");
    compile("bounded.c", &dir);
    record(&dir, "agg.rtr", &["--aggregate"], &["20000"]);
    for args in [
        &["trace", "sites", "agg.rtr", "--from", "0.1s"][..],
        &["trace", "timeline", "agg.rtr", "--to", "seg:0"],
        &["trace", "export", "agg.rtr", "-o", "m.massif"],
    ] {
        let o = retype_cmd().args(args).current_dir(&dir).output().unwrap();
        assert!(!o.status.success(), "{args:?} refused");
        let e = stderr(&o);
        assert!(
            e.contains("agg.rtr: an aggregate recording"),
            "{args:?}: {e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    }
    // What the counters give works: sites, leaks, diff, flame graph, collapsed stacks.
    retype_ok(&dir, &["trace", "leaks", "agg.rtr"]);
    retype_ok(&dir, &["trace", "diff", "agg.rtr", "agg.rtr"]);
    retype_ok(&dir, &["trace", "flamegraph", "agg.rtr", "-o", "f.svg"]);
    retype_ok(&dir, &["trace", "export", "agg.rtr", "-o", "c.folded"]);
    let folded = std::fs::read_to_string(dir.join("c.folded")).unwrap();
    assert!(folded.contains("churn"), "{folded}");
}

#[test]
fn an_aggregate_recordings_timeline_is_its_snapshots() {
    let dir = scratch("bounded-timeline");
    compile("bounded.c", &dir);
    record(
        &dir,
        "agg.rtr",
        &["--aggregate", "--snapshot-ms", "1"],
        &["3000000"],
    );
    let trace = retype_trace::Trace::read_file(&dir.join("agg.rtr")).unwrap();
    assert!(
        trace.snapshots.len() >= 2,
        "{} snapshots",
        trace.snapshots.len()
    );
    let v = json(&dir, &["trace", "timeline", "agg.rtr", "--json"]);
    assert_eq!(v["recording"], "aggregate");
    let moments = v["points"].as_array().unwrap();
    assert!(!moments.is_empty(), "{v}");
    // Bands (the top sites and the rest) add up to the process's live bytes.
    for m in moments {
        let bands: u64 = m["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(bands, m["live_bytes"].as_u64().unwrap(), "{m}");
    }
    // The last snapshot is taken at the end: what is live then is the leak.
    let last = trace.snapshots.last().unwrap();
    assert_eq!(last.live_bytes, 1000);
}

#[test]
fn sampled_estimates_of_the_top_sites_bytes_are_within_five_percent() {
    let dir = scratch("bounded-sampled");
    compile("bounded.c", &dir);
    record(&dir, "s.rtr", &["--sample-bytes", "1MB"], &["0", "big"]);
    let v = json(&dir, &["trace", "sites", "s.rtr", "--json", "--top", "0"]);
    assert_eq!(v["recording"], "sampled");
    assert_eq!(v["sample_bytes"], 1_000_000);
    let sites: Vec<&Value> = v["sites"].as_array().unwrap().iter().collect();
    for (name, bytes) in [
        ("huge", 512u64 << 20),
        ("mid", 256 << 20),
        ("tiny", 256 << 20),
    ] {
        let s = sites
            .iter()
            .find(|s| s["site"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"));
        let est = s["bytes_allocated"].as_u64().unwrap();
        let err = est.abs_diff(bytes) as f64 / bytes as f64;
        assert!(
            err < 0.05,
            "{name}: {est} estimated, {bytes} allocated ({:.1} %)",
            err * 100.0
        );
    }
    // A recorded call stands for many: far fewer events than the 2.2 M calls.
    let info = json(&dir, &["trace", "info", "s.rtr", "--json"]);
    assert_eq!(info["recording"], "sampled");
    assert!(
        info["events"].as_u64().unwrap() < 10_000,
        "{}",
        info["events"]
    );
    assert_eq!(
        info["live_at_end_bytes"], 0,
        "every sampled block was freed"
    );
}
