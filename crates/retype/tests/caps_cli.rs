//! `retype bench mdb`, `bench protocol` and `caps check` as a user runs
//! them: one JSON line per result with the documented keys, a table row per
//! result, and a clear error for bad input; and the benchmarks' old names
//! (`caps bench`, `caps protocol-bench`), which still work and name the new
//! ones. Nothing here depends on how fast the machine is: the figures are
//! only checked to be consistent.

mod common;

use common::{json_lines, retype, stderr, stdout};

#[test]
fn bench_json_has_the_documented_keys() {
    let out = retype(&[
        "bench",
        "mdb",
        "--json",
        "--caps",
        "64,128",
        "--samples",
        "20",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let seen: Vec<(String, u64)> = lines
        .iter()
        .map(|v| {
            (
                v["impl"].as_str().unwrap().to_string(),
                v["caps"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [64, 128]
        .into_iter()
        .flat_map(|n| IMPLS.map(|i| (i.to_string(), n)))
        .collect();
    assert_eq!(seen, want);
    for v in &lines {
        for key in [
            "score_boot_cycles",
            "score_procmgmt_cycles",
            "score_procmgmt_ns",
        ] {
            assert!(v[key].as_f64().unwrap() >= 0.0, "{key}");
        }
        let medians = v["median_cycles"].as_object().unwrap();
        assert_eq!(medians.len(), 9);
        for (op, median) in medians {
            let median = median.as_f64().unwrap();
            let p99 = v["p99_cycles"][op].as_f64().unwrap();
            let stddev = v["stddev_cycles"][op].as_f64().unwrap();
            assert!(p99 >= median, "{op}: p99 {p99} below the median {median}");
            assert!(stddev >= 0.0 && stddev.is_finite(), "{op}: stddev {stddev}");
        }
        assert_eq!(v["p99_cycles"].as_object().unwrap().len(), 9);
        assert_eq!(v["stddev_cycles"].as_object().unwrap().len(), 9);
    }
}

/// The implementations of `bench mdb`, in the order of its rows.
const IMPLS: [&str; 5] = [
    "tree",
    "tree-noparent",
    "tree-packed",
    "tree-bitfield",
    "list",
];

#[test]
fn bench_prints_a_row_per_implementation() {
    let out = retype(&["bench", "mdb", "--caps", "64", "--samples", "10"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .next()
                .filter(|_| l.contains("caps=64"))
        })
        .collect();
    assert_eq!(rows, IMPLS);
    for line in text.lines().filter(|l| l.contains("caps=64")) {
        assert_eq!(line.matches(" (p99 ").count(), 9, "{line}");
    }
}

#[test]
fn bad_sizes_are_refused() {
    let out = retype(&["bench", "mdb", "--caps", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("retype: error: --caps"), "{err}");
}

/// Every (op, case) of `bench protocol`, in its order.
const PROTOCOL_CASES: [(&str, &str); 20] = [
    ("noop", "noop"),
    ("delete", "local-copies"),
    ("delete", "foreign"),
    ("delete", "last-copy"),
    ("delete", "foreign-copies"),
    ("delete-cnode", "occupied-1"),
    ("delete-cnode", "occupied-2"),
    ("delete-cnode", "occupied-4"),
    ("delete-cnode", "occupied-8"),
    ("delete-cnode", "occupied-16"),
    ("delete-cnode", "occupied-32"),
    ("delete-cnode", "occupied-64"),
    ("delete-cnode", "occupied-128"),
    ("delete-cnode", "occupied-256"),
    ("revoke", "no-foreign"),
    ("revoke", "foreign-copy"),
    ("revoke", "foreign-relations"),
    ("retype", "no-foreign"),
    ("retype", "local-descendants"),
    ("retype", "remote-descendants"),
];

#[test]
fn protocol_bench_json_has_every_case_with_consistent_figures() {
    let out = retype(&[
        "bench",
        "protocol",
        "--json",
        "--caps",
        "256,512",
        "--samples",
        "5",
    ]);
    let lines = json_lines(&out);
    let seen: Vec<(String, String, u64)> = lines
        .iter()
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap().to_string();
            (s("op"), s("case"), v["caps"].as_u64().unwrap())
        })
        .collect();
    let want: Vec<(String, String, u64)> = [256, 512]
        .iter()
        .flat_map(|&n| PROTOCOL_CASES.map(|(o, c)| (o.to_string(), c.to_string(), n)))
        .collect();
    assert_eq!(seen, want);
    for v in &lines {
        let num = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
        let (median, p90) = (num("median_cycles"), num("p90_cycles"));
        assert!(median > 0.0 && median <= p90, "{v}");
        assert!(num("median_ns") > 0.0 && num("p90_ns") >= num("median_ns"));
        assert!(num("round_trip_cycles") > 0.0 && num("round_trip_ns") > 0.0);
        assert!(
            num("mdb_caps") >= num("caps"),
            "the database holds the synthetic capabilities"
        );
        let parts: Vec<f64> = ["local", "messages", "waiting"]
            .iter()
            .map(|k| v["breakdown"][k].as_f64().unwrap())
            .collect();
        assert!(parts.iter().all(|&p| p >= 0.0), "{v}");
        // Medians of parts need not add up, but cannot be far above the
        // total: only messages to several nodes at once overlap.
        assert!(parts.iter().sum::<f64>() <= 2.0 * median, "{v}");
        assert!(v["breakdown_ns"].is_object());
        let remote = v["round_trips"].as_u64().unwrap() > 0;
        assert_eq!(remote, num("messages") > 0.0, "{v}");
        if let Some(met) = v["goal_met"].as_bool() {
            assert_eq!(met, median <= num("goal_cycles"), "{v}");
        }
    }
}

#[test]
fn protocol_bench_prints_a_row_per_case() {
    let out = retype(&["bench", "protocol", "--caps", "256", "--samples", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| w.len() > 3 && w[2] == "256")
        .collect();
    let names: Vec<(&str, &str)> = rows.iter().map(|w| (w[0], w[1])).collect();
    assert_eq!(names, PROTOCOL_CASES, "{text}");
    assert!(text.starts_with("op "), "a header: {text}");
}

#[test]
fn protocol_bench_refuses_bad_input() {
    for (args, names) in [
        (&["--caps", "100"][..], "--caps"),
        (&["--caps", "4096,lots"], "--caps"),
        (&["--caps", "70000"], "--caps"),
        (&["--samples", "0"], "--samples"),
        (&["--nodes", "0"], "--nodes"),
        (&["--nodes", "two"], "--nodes"),
        (&["--seed=-1"], "--seed"),
        (&["--fast"], "--fast"),
    ] {
        let out = retype(&[&["bench", "protocol"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("error") && err.contains(names),
            "{args:?}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
}

#[test]
fn check_prints_its_counts_and_refuses_bad_configurations() {
    let args = [
        "caps", "check", "--nodes", "2", "--mem", "2", "--slots", "3", "--ops", "1",
    ];
    let json = |symmetry: &str| {
        let out = retype(&[&args[..], &["--json", "--symmetry", symmetry]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        for key in [
            "states",
            "distinct",
            "depth",
            "seconds",
            "livelock_tasks",
            "livelock_steps",
            "livelock_seconds",
        ] {
            assert!(v[key].is_number(), "{key} in {v}");
        }
        assert_eq!(v["symmetry"], symmetry);
        assert_eq!(v["violations"], serde_json::json!([]));
        v["distinct"].as_u64().unwrap()
    };
    let (on, off) = (json("on"), json("off"));
    assert!(
        1 < on && on < off,
        "{on} classes with symmetry, {off} states without"
    );
    let out = retype(&args);
    assert!(
        stdout(&out).contains("every property holds"),
        "{}",
        stdout(&out)
    );
    let out = retype(&["caps", "check", "--regions", "reduced", "--mem", "2"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--mem 3"), "{}", stderr(&out));
}

/// `retype OLD…` still runs the benchmark, and says once on standard error
/// what it is called now.
fn runs_under_its_old_name(old: &[&str], new: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let out = retype(&[old, args].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let notice = format!(
        "retype: 'retype {}' is now 'retype {new}'; the old name goes in the next release\n",
        old.join(" ")
    );
    assert!(stderr(&out).starts_with(&notice), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("is now").count(), 1);
    json_lines(&out)
}

#[test]
fn caps_bench_is_bench_mdb_under_its_old_name() {
    let rows = runs_under_its_old_name(
        &["caps", "bench"],
        "bench mdb",
        &["--json", "--caps", "64", "--samples", "4"],
    );
    let impls: Vec<&str> = rows.iter().map(|r| r["impl"].as_str().unwrap()).collect();
    assert_eq!(impls, IMPLS);
}

#[test]
fn caps_protocol_bench_is_bench_protocol_under_its_old_name() {
    let rows = runs_under_its_old_name(
        &["caps", "protocol-bench"],
        "bench protocol",
        &["--json", "--caps", "256", "--samples", "3"],
    );
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["case"].as_str().unwrap()))
        .collect();
    assert_eq!(names, PROTOCOL_CASES);
}
