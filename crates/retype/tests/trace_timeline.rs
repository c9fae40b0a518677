//! Memory over time end to end (#42): a program whose heap grows, shrinks
//! and grows again (`phases.c`), recorded and read by `retype trace
//! timeline`, restricted to a time window by `--from/--to`, exported for
//! valgrind's `ms_print`, its temporaries counted, and held to a gate by
//! `trace diff --fail-above`, which a planted regression fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use retype_trace::Trace;
use serde_json::Value;

use common::recording::{compile, record};
use common::{retype_cmd, scratch, stderr, stdout};

fn run(dir: &Path, args: &[&str]) -> Output {
    retype_cmd().args(args).current_dir(dir).output().unwrap()
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let o = run(dir, args);
    assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("one JSON document")
}

/// `phases.c` compiled and recorded in a fresh directory as `name`, with
/// `args`: (dir, trace).
fn recorded(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, Trace) {
    let exe = dir.join("phases");
    if !exe.exists() {
        compile("phases.c", dir);
    }
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend(args);
    let (t, o) = record(dir, name, &[], &cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir.join(name), t)
}

/// ns from the first event to the first call of `size` bytes.
fn first_of_size(t: &Trace, size: u64) -> u64 {
    let first = t.events.iter().map(|e| e.time_ns).min().unwrap();
    t.events.iter().find(|e| e.size == size).unwrap().time_ns - first
}

fn site<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == name)
        .unwrap_or_else(|| panic!("{name} in {v}"))
}

#[test]
fn the_timeline_shows_growth_shrinking_and_growth_again_per_site() {
    let dir = scratch("timeline");
    let (t, _) = recorded(&dir, "p.rtr", &[]);
    let t = t.to_str().unwrap();
    let v = json(&dir, &["trace", "timeline", t, "--json", "--top", "2"]);
    let bands: Vec<&str> = v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap())
        .collect();
    // grow and regrow both rose to 100,000; scratch's 64 bytes are the rest.
    assert_eq!(
        bands[..2]
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        ["grow", "regrow"].into()
    );
    assert_eq!(bands[2], "(other sites)");
    assert_eq!(site(&v, "grow")["peak_live_bytes"], 100_000);
    assert_eq!(site(&v, "regrow")["peak_live_bytes"], 100_000);
    let points = v["points"].as_array().unwrap();
    let live: Vec<u64> = points
        .iter()
        .map(|p| p["live_bytes"].as_u64().unwrap())
        .collect();
    for p in points {
        let bands: u64 = p["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(bands, p["live_bytes"].as_u64().unwrap(), "{p}");
    }
    // Up to 100,000, down to 10,000, up to 110,000 (and scratch's 64 on
    // top, one block at a time), where it ends.
    let high = live
        .iter()
        .position(|&b| b == 100_000)
        .expect("grow's height");
    let low = high
        + live[high..]
            .iter()
            .position(|&b| b == 10_000)
            .expect("shrunk");
    assert!(live[low..].contains(&110_064), "{live:?}");
    assert_eq!(*live.last().unwrap(), 110_000);
    assert!(
        live.windows(2).any(|w| w[1] < w[0]),
        "a drop shows: {live:?}"
    );
    // Text draws the same moments.
    let o = run(&dir, &["trace", "timeline", t]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("highest 110,064") && text.contains("[1] grow"),
        "{text}"
    );
}

#[test]
fn a_window_restricts_sites_leaks_and_flame_graphs() {
    let dir = scratch("window");
    let (path, trace) = recorded(&dir, "p.rtr", &[]);
    let t = path.to_str().unwrap();
    let cut = format!("{}ns", first_of_size(&trace, 2000));
    // Before regrow: grow alone; its 10 kept blocks were live at the cut.
    let v = json(&dir, &["trace", "sites", t, "--to", &cut, "--json"]);
    let names: Vec<&str> = v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["grow"]);
    assert_eq!(v["total"]["bytes_allocated"], 100_000);
    assert_eq!(v["total"]["peak_live_bytes"], 100_000);
    assert_eq!(v["total"]["leaked_bytes"], 10_000);
    // From regrow on: regrow and scratch; the peak counts grow's kept blocks.
    let v = json(&dir, &["trace", "sites", t, "--from", &cut, "--json"]);
    assert_eq!(site(&v, "regrow")["bytes_allocated"], 100_000);
    assert_eq!(site(&v, "scratch")["calls"], 20);
    // grow made no call in it, but holds its kept blocks at its peak.
    assert_eq!(site(&v, "grow")["calls"], 0);
    assert_eq!(site(&v, "grow")["peak_live_bytes"], 10_000);
    assert_eq!(v["total"]["peak_live_bytes"], 110_064);
    let v = json(&dir, &["trace", "leaks", t, "--from", &cut, "--json"]);
    assert_eq!(
        (v["leaked_bytes"].as_u64(), v["leaked_blocks"].as_u64()),
        (Some(100_000), Some(50))
    );
    // The whole trace's segment is the whole trace.
    let whole = json(&dir, &["trace", "sites", t, "--json"]);
    let seg = json(
        &dir,
        &[
            "trace", "sites", t, "--from", "seg:0", "--to", "seg:0", "--json",
        ],
    );
    assert_eq!(whole["total"], seg["total"]);
    let o = run(
        &dir,
        &["trace", "flamegraph", t, "-o", "w.svg", "--to", &cut],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(dir.join("w.svg")).unwrap();
    assert!(
        svg.contains("grow") && !svg.contains("regrow"),
        "only grow before the cut"
    );
    // Bad windows say why.
    for (args, why) in [
        (&["--from", "seg:7"][..], "seg:7: the trace has 1 segments"),
        (&["--from", "2s", "--to", "1s"], "empty"),
        (&["--to", "soon"], "a time is a number"),
    ] {
        let mut all = vec!["trace", "sites", t];
        all.extend(args);
        let o = run(&dir, &all);
        assert!(
            !o.status.success() && stderr(&o).contains(why),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn temporaries_are_counted_per_site_and_in_info() {
    let dir = scratch("temporary");
    let (path, _) = recorded(&dir, "p.rtr", &[]);
    let t = path.to_str().unwrap();
    let v = json(
        &dir,
        &["trace", "sites", t, "--weight", "temporary", "--json"],
    );
    assert_eq!(
        v["sites"][0]["site"], "scratch",
        "ranked by temporaries: {v}"
    );
    assert_eq!(v["sites"][0]["temporary_allocations"], 20);
    // grow's last block, which shrink frees before the thread allocates
    // again, is one; regrow's are never freed.
    assert_eq!(site(&v, "grow")["temporary_allocations"], 1);
    assert_eq!(site(&v, "regrow")["temporary_allocations"], 0);
    let info = json(&dir, &["trace", "info", t, "--json"]);
    assert_eq!(
        info["temporary_allocations"],
        v["total"]["temporary_allocations"]
    );
    assert_eq!(info["temporary_allocations"], 21);
    let o = run(
        &dir,
        &[
            "trace",
            "export",
            t,
            "-o",
            "t.folded",
            "--weight",
            "temporary",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let folded = std::fs::read_to_string(dir.join("t.folded")).unwrap();
    assert!(
        folded.lines().any(|l| l.ends_with(";scratch 20")),
        "{folded}"
    );
}

#[test]
fn ms_print_reads_the_massif_export() {
    let dir = scratch("massif");
    let (path, _) = recorded(&dir, "p.rtr", &[]);
    let o = run(
        &dir,
        &["trace", "export", path.to_str().unwrap(), "-o", "p.massif"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let Ok(o) = Command::new("ms_print").arg(dir.join("p.massif")).output() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have ms_print (scripts/test installs valgrind)"
        );
        eprintln!("ms_print is not installed: the massif export was not checked");
        return;
    };
    assert!(o.status.success(), "ms_print: {}", stderr(&o));
    let text = stdout(&o);
    // The peak snapshot's tree: regrow's 100,000, grow's 10,000 and one of
    // scratch's 64-byte blocks.
    assert!(text.contains("(peak)"), "{text}");
    assert!(
        text.contains("(110,064B) (heap allocation functions)"),
        "{text}"
    );
    assert!(
        text.contains("(100,000B) 0x") && text.contains(": regrow ("),
        "{text}"
    );
    assert!(
        text.contains("(10,000B) 0x") && text.contains(": grow ("),
        "{text}"
    );
}

#[test]
fn the_diff_gate_fails_a_planted_regression_and_passes_an_unchanged_run() {
    let dir = scratch("gate");
    let (a, _) = recorded(&dir, "a.rtr", &[]);
    let (same, _) = recorded(&dir, "same.rtr", &[]);
    let (worse, _) = recorded(&dir, "worse.rtr", &["more"]);
    let (a, same, worse) = (
        a.to_str().unwrap(),
        same.to_str().unwrap(),
        worse.to_str().unwrap(),
    );
    let o = run(&dir, &["trace", "diff", a, same, "--fail-above", "5%"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("gate passed"), "{}", stdout(&o));
    let o = run(&dir, &["trace", "diff", a, worse, "--fail-above", "5%"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("gate failed") && text.contains("regrow: 100,000 -> 200,000 (+100.0%)"),
        "{text}"
    );
    assert!(!text.contains("  grow:"), "grow did not grow: {text}");
    // Bytes, on what was allocated, the total only; and in JSON.
    let v = {
        let o = run(
            &dir,
            &[
                "trace",
                "diff",
                a,
                worse,
                "--fail-above",
                "64KiB",
                "--fail-on",
                "allocated",
                "--fail-per",
                "total",
                "--json",
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        serde_json::from_str::<Value>(&stdout(&o)).unwrap()
    };
    assert_eq!(v["gate"]["failed"], true);
    assert_eq!(v["gate"]["grew"].as_array().unwrap().len(), 1);
    assert_eq!(v["gate"]["grew"][0]["site"], "(total)");
    // Past a threshold too high: passes.
    let o = run(&dir, &["trace", "diff", a, worse, "--fail-above", "1MB"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn the_report_draws_the_timeline_and_hovering_a_band_names_its_site() {
    let dir = scratch("timeline-report");
    let (t, _) = recorded(&dir, "p.rtr", &[]);
    let html = dir.join("t.html");
    let o = run(
        &dir,
        &[
            "trace",
            "timeline",
            t.to_str().unwrap(),
            "--report",
            html.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Live heap bytes per site"),
        "the chart's figure"
    );
    let Some(browser) = common::chromium() else {
        return;
    };
    let marks = common::marks_in_browser(browser, &html);
    assert!(marks.values().any(|n| n.as_u64() > Some(0)), "{marks:?}");
    let mut p = common::browser::Page::open(browser, &html, 1400, 1000);
    let tips = p.eval(
        r#"[...document.querySelectorAll("svg .mark")].map((e) => (e.tipText || []).join(" | "))"#,
    );
    let tips: Vec<&str> = tips
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for site in ["grow: ", "regrow: "] {
        assert!(
            tips.iter().any(|t| t.starts_with(site)),
            "a band names {site}: {tips:?}"
        );
    }
}
