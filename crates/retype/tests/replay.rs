//! `retype replay` as a user runs it: the built binary on real traces, on the
//! traces shipped in `traces/malloclab`, and on malformed input.

mod common;

use std::path::Path;
use std::process::Command;

use common::{json_lines, quick_replay, repo, retype};

fn rep_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rep"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    files
}

/// Replays `traces` on every heap with JSON output and checks every row.
fn replay_all(traces: &[String], extra: &[&str]) {
    let out = quick_replay("all")
        .arg("--json")
        .args(extra)
        .args(traces)
        .output()
        .unwrap();
    let rows = json_lines(&out);
    let heaps = retype_core::heap::HeapKind::ALL.len();
    let totals = if traces.len() > 1 { heaps } else { 0 };
    assert_eq!(rows.len(), traces.len() * heaps + totals);
    for row in rows.iter().filter(|r| r["trace"] != "TOTAL") {
        for key in ["trace", "heap", "ops", "util", "frag4", "kops"] {
            assert!(!row[key].is_null(), "missing {key} in {row}");
        }
        let (util, frag4) = (
            row["util"].as_f64().unwrap(),
            row["frag4"].as_f64().unwrap(),
        );
        assert!(util > 0.0 && util <= 1.0, "{row}");
        assert!(
            (frag4 - (1.0 / util - 1.0)).abs() < 1e-9,
            "frag4 disagrees with util: {row}"
        );
        assert!(
            row["heap_size"].as_u64().unwrap() >= row["peak_live"].as_u64().unwrap(),
            "{row}"
        );
        assert!(row["kops"].as_f64().unwrap() > 0.0, "{row}");
    }
}

#[test]
#[cfg_attr(
    not(shared_data),
    ignore = "../shared/data was absent when this test was built (cargo clean -p retype to look again)"
)]
fn every_shared_malloclab_trace_replays_on_every_heap() {
    let dir = repo().join("../shared/data/malloclab");
    let traces = rep_files(&dir);
    assert!(
        traces.len() >= 11,
        "expected the malloc-lab traces in {}",
        dir.display()
    );
    replay_all(&traces, &[]);
}

#[test]
fn shipped_traces_replay_with_every_heap_checked_after_every_request() {
    let traces = rep_files(&repo().join("traces/malloclab"));
    assert!(traces.len() >= 4);
    replay_all(&traces, &["--check"]);
}

#[test]
fn table_output_has_a_row_per_trace_and_heap_and_a_total() {
    let dir = repo().join("traces/malloclab");
    let (a, b) = (dir.join("short1-bal.rep"), dir.join("short2-bal.rep"));
    let out = quick_replay("best-fit,tlsf").args([a, b]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 3, "{text}");
    assert!(lines[0]
        .split_whitespace()
        .eq(["trace", "heap", "ops", "util", "frag4", "kops", "perfidx"]));
    assert!(lines[1].starts_with("short1-bal.rep") && lines[1].contains("best-fit"));
    assert!(lines[3].starts_with("TOTAL (2 traces)"));
}

/// Runs a malformed trace and returns its error message.
fn error_of(fixture: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let out = retype(&["replay", "--heap", "all", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{fixture} must fail with exit code 2"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("retype: error: "), "{err}");
    assert!(
        err.contains(path.to_str().unwrap()),
        "error must name the file: {err}"
    );
    err
}

#[test]
fn malformed_traces_give_a_clear_error_naming_file_and_line() {
    for (fixture, line, what) in [
        (
            "truncated.rep",
            7,
            "truncated: the header announces 4 requests, the file ends after 3",
        ),
        ("bad-request.rep", 6, "unknown request `x`"),
        ("missing-size.rep", 6, "`a` takes 2 field(s), found 1"),
        ("free-not-live.rep", 6, "`f 1` but id 1 is not live"),
        ("bad-number.rep", 5, "expected a size, found `sixteen`"),
        ("id-out-of-range.rep", 5, "id 7 out of range"),
        ("huge-request.rep", 5, "malloc(1000000000000000) failed"),
    ] {
        let err = error_of(fixture);
        assert!(
            err.contains(&format!("{fixture}:{line}: ")),
            "{fixture}: no line {line} in {err}"
        );
        assert!(err.contains(what), "{fixture}: expected `{what}` in {err}");
    }
    for (fixture, what) in [
        ("truncated-header.rep", "truncated header"),
        ("empty.rep", "truncated header"),
    ] {
        assert!(error_of(fixture).contains(what), "{fixture}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    let trace = repo().join("traces/malloclab/short1-bal.rep");
    let out = retype(&["replay", "--heap", "fastest-fit", trace.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown heap \"fastest-fit\"") && err.contains("indexed-first-fit"),
        "{err}"
    );
    let out = retype(&["replay", "--heap", "tlsf", "no/such/file.rep"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("no/such/file.rep"));
}

#[test]
fn gigabyte_blocks_replay_without_touching_their_pages() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/huge-blocks.rep");
    let out = quick_replay("all")
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    for row in json_lines(&out) {
        assert!(row["util"].as_f64().unwrap() > 0.9, "{row}");
    }
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // Far more output than a pipe buffers, so the writer meets the closed pipe.
    let trace = repo().join("traces/malloclab/short1-bal.rep");
    let mut child = Command::new(env!("CARGO_BIN_EXE_retype"))
        .args(["replay", "--json", "--runs", "1", "--min-time-ms", "0"])
        .args(std::iter::repeat_n(&trace, 300))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The placement table of a recording goes to the output the replay was
/// given: `retype report`, which keeps the tables to itself, prints nothing,
/// even to a standard output whose reader has gone away.
#[test]
fn a_report_of_a_recording_prints_no_table() {
    let dir = common::scratch("report-of-recording");
    let rtr = dir.join("short.rtr");
    let convert = retype(&[
        "trace",
        "convert",
        repo()
            .join("traces/malloclab/short1-bal.rep")
            .to_str()
            .unwrap(),
        rtr.to_str().unwrap(),
    ]);
    assert!(convert.status.success(), "{}", common::stderr(&convert));
    let report = |stdout: std::process::Stdio| {
        common::retype_cmd()
            .arg("report")
            .arg("--traces")
            .arg(&rtr)
            .arg("-o")
            .arg(dir.join("r.html"))
            .stdout(stdout)
            .output()
            .unwrap()
    };
    let out = report(std::process::Stdio::piped());
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(common::stdout(&out), "");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = report(writer.into());
    assert!(out.status.success(), "{}", common::stderr(&out));
}

/// A trace whose live bytes never rise above 0 has a utilization of 0 and no
/// fragmentation ratio (not a division by zero).
#[test]
fn a_trace_with_nothing_live_has_no_fragmentation_ratio() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nothing-live.rep");
    let table = quick_replay("best-fit").arg(&trace).output().unwrap();
    assert!(table.status.success(), "{}", common::stderr(&table));
    let row: Vec<String> = common::stdout(&table)
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(
        (row[3].as_str(), row[4].as_str()),
        ("0.000", "-"),
        "{row:?}"
    );
    let json = quick_replay("best-fit").arg("--json").arg(&trace).output();
    let rows = json_lines(&json.unwrap());
    assert_eq!(rows[0]["util"], 0.0);
    assert!(rows[0]["frag4"].is_null(), "{}", rows[0]);
}

/// `--cheri F`: each row carries the CHERI run beside the plain one, and its padding is, request
/// by request, what the format's representable length adds to the size (a model computed here
/// from the trace and `retype_core::cheri`, not from the replay); every heap runs the
/// traces, and the plain figures are the plain replay's.
#[test]
fn cheri_mode_pads_each_request_to_its_representable_length() {
    use retype_core::cheri::{representable_length, Format};
    use retype_trace::{format, Request};

    let traces = rep_files(&repo().join("traces/malloclab"));
    for f in [Format::Morello, Format::Rv64, Format::Rv32] {
        let out = quick_replay("all")
            .args(["--json", "--cheri", f.name()])
            .args(&traces)
            .output()
            .unwrap();
        let rows = json_lines(&out);
        let plain = json_lines(
            &quick_replay("all")
                .arg("--json")
                .args(&traces)
                .output()
                .unwrap(),
        );
        assert_eq!(rows.len(), plain.len());
        for (row, p) in rows
            .iter()
            .zip(&plain)
            .filter(|(r, _)| r["trace"] != "TOTAL")
        {
            assert_eq!(
                (&row["heap_size"], &row["util"]),
                (&p["heap_size"], &p["util"])
            );
            let c = &row["cheri"];
            assert_eq!(c["format"], f.name(), "{row}");
            let (requests, _) =
                format::load_requests(Path::new(row["trace"].as_str().unwrap()), None).unwrap();
            let sizes = requests.requests.iter().filter_map(|r| match *r {
                Request::Alloc { size, .. } | Request::Realloc { size, .. } => Some(size),
                Request::Free { .. } => None,
            });
            let (mut n, mut padding, mut rounded) = (0u64, 0u64, 0u64);
            for size in sizes {
                let pad = (representable_length(f, size.into()) - u128::from(size)) as u64;
                n += 1;
                padding += pad;
                rounded += u64::from(pad > 0);
            }
            assert_eq!(c["requests"], n, "{row}");
            assert_eq!(c["padding"], padding, "{f}: {row}");
            assert_eq!(c["rounded"], rounded, "{f}: {row}");
            let by_size: u64 = c["by_size"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["padding"].as_u64().unwrap())
                .sum();
            assert_eq!(by_size, padding);
            let heap_size = c["heap_size"].as_u64().unwrap();
            assert!(heap_size >= row["peak_live"].as_u64().unwrap(), "{row}");
            let util = c["util"].as_f64().unwrap();
            assert!((util - row["peak_live"].as_f64().unwrap() / heap_size as f64).abs() < 1e-9);
        }
        // The shipped traces have sizes RV32 cannot hold exactly.
        if f == Format::Rv32 {
            assert!(rows
                .iter()
                .any(|r| r["cheri"]["padding"].as_u64() > Some(0)));
        }
    }
    // The table names the format and a row per trace and heap.
    let out = quick_replay("best-fit")
        .args(["--cheri", "rv32"])
        .args(&traces)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("CHERI (rv32)"), "{text}");
    let table = text.split("CHERI (rv32)").nth(1).unwrap();
    assert_eq!(
        table.lines().filter(|l| l.contains("best-fit")).count(),
        traces.len()
    );
    // A bad format is refused with the formats named.
    let out = quick_replay("best-fit")
        .args(["--cheri", "vax"])
        .args(&traces)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("morello"));
}
