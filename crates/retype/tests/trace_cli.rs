//! `retype trace info` and `retype trace convert`, as a user runs them.

mod common;

use std::process::Output;

use common::{retype, scratch};

const REP: &str = "1000\n3\n6\n1\na 0 100\na 1 50\nr 0 300\nf 1\na 2 40\nf 0\n";

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn convert_rep_to_rtr_csv_and_back_and_inspect_each() {
    let d = scratch("conv");
    let rep = d.join("small.rep");
    std::fs::write(&rep, REP).unwrap();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let o = retype(&[
        "trace",
        "convert",
        &p("small.rep"),
        &p("small.rtr"),
        "--json",
    ]);
    assert_eq!(json(&o)["events"], 6);
    let info = json(&retype(&["trace", "info", &p("small.rtr"), "--json"]));
    assert_eq!(info["events"], 6);
    assert_eq!(info["ops"]["malloc"], 3);
    assert_eq!(info["ops"]["realloc"], 1);
    assert_eq!(info["ops"]["free"], 2);
    assert_eq!(info["peak_live_bytes"], 350);
    assert_eq!(info["live_at_end_bytes"], 40);
    assert!(info["size_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["le"] == 64 && b["count"] == 2));
    // The .rep itself reads the same.
    assert_eq!(
        json(&retype(&["trace", "info", &p("small.rep"), "--json"]))["peak_live_bytes"],
        350
    );
    // rtr → rep → rtr keeps the requests.
    assert!(
        retype(&["trace", "convert", &p("small.rtr"), &p("again.rep")])
            .status
            .success()
    );
    assert_eq!(
        json(&retype(&["trace", "info", &p("again.rep"), "--json"]))["peak_live_bytes"],
        350
    );
    // CSV has a header and one row per event.
    assert!(
        retype(&["trace", "convert", &p("small.rtr"), &p("small.csv")])
            .status
            .success()
    );
    let csv = std::fs::read_to_string(d.join("small.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7);
    assert!(csv.starts_with("thread,time_ns,latency_ns,op,size,align,ptr,ret\n"));
    // Text output names the essentials.
    let text = String::from_utf8(retype(&["trace", "info", &p("small.rtr")]).stdout).unwrap();
    assert!(text.contains("peak live: 350 bytes in 2 blocks"), "{text}");
}

#[test]
fn wee_alloc_and_valgrind_inputs_are_detected() {
    let d = scratch("detect");
    std::fs::write(d.join("w.trace"), "Alloc(10),\nAlloc(20),\nFree(0),\n").unwrap();
    let v = json(&retype(&[
        "trace",
        "info",
        d.join("w.trace").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["events"], 3);
    std::fs::write(
        d.join("vg.txt"),
        "--5-- malloc(10) = 0x10\n--5-- free(0x10)\n",
    )
    .unwrap();
    let v = json(&retype(&[
        "trace",
        "info",
        d.join("vg.txt").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["ops"]["free"], 1);
}

#[test]
fn bad_inputs_give_errors_that_say_where() {
    let d = scratch("bad");
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    std::fs::write(d.join("small.rep"), REP).unwrap();
    assert!(retype(&["trace", "convert", &p("small.rep"), &p("t.rtr")])
        .status
        .success());
    // The first record's tag made unknown (a file cut short reads as far as
    // it goes: tests/faults.rs).
    let mut bytes = std::fs::read(d.join("t.rtr")).unwrap();
    bytes[12] = 99;
    std::fs::write(d.join("bad.rtr"), &bytes).unwrap();
    let o = retype(&["trace", "info", &p("bad.rtr")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("retype: error: ") && err.contains("bad.rtr") && err.contains("at byte 12"),
        "{err}"
    );
    std::fs::write(d.join("bad.rep"), "1\n1\n1\n1\nq 0 1\n").unwrap();
    let o = retype(&["trace", "info", &p("bad.rep")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.rep:5"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = retype(&["trace", "convert", &p("small.rep"), &p("out.weird")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--to"));
}

/// Every text format's error names the file and the line as `FILE:LINE:`, the same for
/// `trace info`, `trace convert` and `replay`, which all read through one request stream.
#[test]
fn every_text_format_names_file_and_line_alike() {
    let d = scratch("errors");
    let cases = [
        ("bad.rep", "0\n1\n2\n1\na 0 8\nf 1\n", 6, "out of range"),
        (
            "bad.csv",
            "thread,time_ns,latency_ns,op,size,align,ptr,ret\n0,1,2,malloc,8,0,0x0,0x10\n0,1,2\n",
            3,
            "expected 8 columns",
        ),
        ("bad.trace", "Alloc(8),\nFree(1),\n", 2, "not yet allocated"),
        (
            "bad.vg",
            "--7-- malloc(8) = 0x10\n--7-- mystery(1) = 0x20\n",
            2,
            "unknown call",
        ),
    ];
    for (name, text, line, what) in cases {
        let path = d.join(name);
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let out = d.join("out.rtr");
        for args in [
            vec!["trace", "info", p],
            vec!["trace", "convert", p, out.to_str().unwrap()],
            vec!["replay", "--heap", "first-fit", "--min-time-ms", "0", p],
        ] {
            let o = retype(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{args:?} succeeded");
            assert!(
                err.contains(&format!("{p}:{line}: ")) && err.contains(what),
                "{args:?}: {err}"
            );
        }
    }
}
