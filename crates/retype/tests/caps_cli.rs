//! `retype caps bench` as a user runs it: one JSON line per implementation
//! and size with the documented keys, and a clear error for bad input.

mod common;

use common::retype;

#[test]
fn bench_json_has_the_documented_keys() {
    let out = retype(&[
        "caps",
        "bench",
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
    let want = [("tree", 64), ("list", 64), ("tree", 128), ("list", 128)];
    assert_eq!(seen, want.map(|(i, n)| (i.to_string(), n)));
    for v in &lines {
        for key in [
            "score_boot_cycles",
            "score_procmgmt_cycles",
            "score_procmgmt_ns",
        ] {
            assert!(v[key].as_f64().unwrap() >= 0.0, "{key}");
        }
        assert_eq!(v["median_cycles"].as_object().unwrap().len(), 9);
    }
}

#[test]
fn bad_sizes_are_refused() {
    let out = retype(&["caps", "bench", "--caps", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("retype: error: --caps"), "{err}");
}
