//! `retype study cheri` as a user runs it: the tables, `--json` held against
//! what set-bounds on the root gives for every request of the shipped
//! traces, the pages' bytes accounted for, a recording sized as the
//! malloc-lab trace it was made from, and clear errors on bad input.

mod common;

use common::{json_lines, repo, retype, scratch, stderr, stdout};
use retype_core::cheri::{Capability, Format};
use retype_trace::requests::to_events;
use retype_trace::{malloclab, Request};
use serde_json::Value;

/// Requests, those exact, and the padding of a trace's mallocs and reallocs
/// in `format`, from set-bounds on the root.
fn model(path: &std::path::Path, format: Format) -> (u64, u64, u64) {
    let (mut requests, mut exact, mut padding) = (0, 0, 0);
    for op in malloclab::read(path).unwrap().requests {
        let size = match op {
            Request::Alloc { size, .. } | Request::Realloc { size, .. } => size,
            Request::Free { .. } => continue,
        };
        // A base aligned far enough for any of these sizes.
        let set = Capability::root(format)
            .set_address(1 << 24)
            .set_bounds(size.into())
            .unwrap();
        requests += 1;
        exact += u64::from(set.exact);
        padding += set.capability.length() as u64 - size;
    }
    (requests, exact, padding)
}

fn workload_lines(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["table"] == "workload").collect()
}

#[test]
fn json_agrees_with_set_bounds_on_every_shipped_trace() {
    let lines = json_lines(&retype(&["study", "cheri", "--json"]));
    let workloads = workload_lines(&lines);
    let names: Vec<&str> = workloads
        .iter()
        .map(|l| l["workload"].as_str().unwrap())
        .collect();
    for name in [
        "hostname.rep",
        "perl.rep",
        "short1-bal.rep",
        "glibc",
        "memaccess",
        "kmeans",
        "richards",
    ] {
        assert_eq!(
            names.iter().filter(|&&n| n == name).count(),
            3,
            "{name} once per format"
        );
    }
    let mut traces = 0;
    for l in &workloads {
        let name = l["workload"].as_str().unwrap();
        let format: Format = l["format"].as_str().unwrap().parse().unwrap();
        let t = &l["total"];
        if name.ends_with(".rep") {
            let want = model(&repo().join("traces/malloclab").join(name), format);
            let got = (
                t["requests"].as_u64().unwrap(),
                t["exact"].as_u64().unwrap(),
                t["padding_bytes"].as_u64().unwrap(),
            );
            assert_eq!(got, want, "{name} in {format}");
            traces += 1;
        }
        // The ranges add up to the total.
        for key in ["requests", "exact", "padding_bytes", "requested_bytes"] {
            let sum: u64 = l["ranges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r[key].as_u64().unwrap())
                .sum();
            assert_eq!(sum, t[key].as_u64().unwrap(), "{name} {format} {key}");
        }
        // Every byte of the pages taken is requested, padding, alignment or a tail.
        for p in l["pages"].as_array().unwrap() {
            let n = |k: &str| p[k].as_u64().unwrap();
            assert_eq!(
                n("footprint"),
                n("requested") + n("padding") + n("alignment") + n("tails"),
                "{name} {format} {p}"
            );
            assert_eq!(n("footprint") % n("page"), 0);
        }
    }
    assert_eq!(traces, 4 * 3);
    // Morello holds every length below 16 KiB exactly, RV32 none from 64 B without rounding some.
    let glibc = workloads
        .iter()
        .find(|l| l["workload"] == "glibc" && l["format"] == "rv32")
        .unwrap();
    assert_eq!(glibc["total"]["exact"], glibc["total"]["requests"]);
    let classes: Vec<_> = lines.iter().filter(|l| l["table"] == "class").collect();
    assert_eq!(classes.len(), 3 * 88);
    assert!(classes
        .iter()
        .filter(|c| c["format"] == "morello")
        .all(|c| c["exact"] == true));
    assert!(classes
        .iter()
        .any(|c| c["format"] == "rv32" && c["exact"] == false));
    let large: Vec<_> = lines.iter().filter(|l| l["table"] == "large").collect();
    assert!(!large.is_empty());
    for l in large {
        assert!(l["exact_mapping"].as_u64() >= l["mapping"].as_u64(), "{l}");
    }
}

#[test]
fn a_recording_is_sized_as_the_trace_it_was_made_from() {
    let rep = repo().join("traces/malloclab/perl.rep");
    let dir = scratch("cheri-study");
    let native = dir.join("perl.rtr");
    let trace = to_events(&malloclab::read(&rep).unwrap(), "malloc-lab .rep");
    retype_trace::format::save(
        &trace,
        &native,
        retype_trace::format::Format::from_extension(&native).unwrap(),
    )
    .unwrap();
    let totals = |path: &std::path::Path| -> Vec<Value> {
        let lines = json_lines(&retype(&[
            "study",
            "cheri",
            "--no-patterns",
            "--json",
            path.to_str().unwrap(),
        ]));
        workload_lines(&lines)
            .into_iter()
            .map(|l| l["total"].clone())
            .collect()
    };
    let (from_rep, from_recording) = (totals(&rep), totals(&native));
    assert_eq!(from_rep.len(), 3);
    assert_eq!(from_rep, from_recording);
}

#[test]
fn the_tables_name_every_workload_and_format() {
    let o = retype(&["study", "cheri"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for needle in [
        "perl.rep",
        "kmeans",
        "morello exact",
        "rv32 exact",
        "16 MiB+",
        "2MiB",
        "1GiB",
        "88 of 88 classes exact",
        "large blocks on Morello",
    ] {
        assert!(text.contains(needle), "no {needle:?} in\n{text}");
    }
}

#[test]
fn bad_input_is_refused_with_its_place() {
    let o = retype(&["study", "cheri", "no/such/trace.rep"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no/such/trace.rep"), "{}", stderr(&o));
    let bad = repo().join("crates/retype/tests/fixtures/bad-number.rep");
    let o = retype(&["study", "cheri", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("bad-number.rep:"), "{}", stderr(&o));
}
