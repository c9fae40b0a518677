//! `retype bench vm` as a user runs it: bad flags are refused, and a tiny run
//! gives every experiment's rows with the documented keys; its old name,
//! `retype vm bench`, still works and names the new one.

mod common;

use common::{json_lines, retype, stderr, stdout};

/// The smallest run of every experiment.
const TINY: [&str; 14] = [
    "--max-mib",
    "1",
    "--reps",
    "1",
    "--rounds",
    "10",
    "--traps",
    "100",
    "--updates",
    "1000",
    "--gc-max",
    "1",
    "--json",
    "--only",
];

#[test]
fn bad_flags_are_refused_clearly() {
    for (flag, value, message) in [
        ("--only", "appel,tlb", "invalid value 'tlb'"),
        ("--gc-max", "6", "6 is not in 1..=5"),
        ("--reps", "0", "0 is not in 1.."),
        ("--max-mib", "0", "0 is not in 1..="),
        ("--updates", "many", "invalid digit"),
        ("--runs", "3", "3 is not in 4.."),
    ] {
        let o = retype(&["bench", "vm", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        assert!(
            stderr(&o).contains(message),
            "{flag} {value}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{flag} {value} printed results");
    }
}

#[test]
fn a_tiny_run_gives_every_row_with_its_keys() {
    let mut args = vec!["bench", "vm"];
    args.extend(TINY);
    args.push("appel,mpu,gups,gc");
    let o = retype(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    let of = |bench: &str| -> Vec<&serde_json::Value> {
        rows.iter().filter(|r| r["bench"] == bench).collect()
    };
    let positive = |r: &serde_json::Value, key: &str| {
        let v = r[key].as_f64().unwrap_or_else(|| panic!("{key} in {r}"));
        assert!(v > 0.0 && v.is_finite(), "{key} = {v} in {r}");
    };
    let appel = of("appel-li");
    assert_eq!(appel.len(), 1, "{rows:?}");
    for k in [
        "trap",
        "prot1_trap_unprot",
        "protn_trap_unprot",
        "appel1",
        "appel2",
    ] {
        positive(appel[0], &format!("{k}_ns"));
        positive(appel[0], &format!("linux_{k}_ns"));
    }
    // Map, protect, unmap: 4 KiB pages from one page, ×4, up to 1 MiB (2 MiB
    // pages only if the machine has some free, and then not below 2 MiB).
    let mpu: Vec<_> = rows.iter().filter(|r| r.get("bench").is_none()).collect();
    let sizes: Vec<u64> = mpu
        .iter()
        .filter(|r| r["page_kib"] == 4)
        .map(|r| r["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [4096, 16384, 65536, 262144, 1048576]);
    for r in &mpu {
        for op in ["map", "protect", "unmap"] {
            positive(r, &format!("{op}_ns_per_page"));
            positive(r, &format!("linux_{op}_ns_per_page"));
            positive(r, &format!("shm_{op}_ns_per_page"));
            // Figure 2.3's two: MAP_POPULATE (up to 1 GiB) and shm_open
            // (4 KiB pages only).
            positive(r, &format!("populate_{op}_ns_per_page"));
            if r["page_kib"] == 4 {
                positive(r, &format!("shm_open_{op}_ns_per_page"));
            } else {
                assert!(r[format!("shm_open_{op}_ns_per_page")].is_null(), "{r}");
            }
        }
    }
    let gups = of("gups");
    assert!(gups
        .iter()
        .any(|r| r["page_kib"] == 4 && r["bytes"] == 1 << 20));
    for r in &gups {
        positive(r, "gups");
        positive(r, "linux_gups");
    }
    let gc = of("gcbench");
    assert_eq!(gc.len(), 1);
    assert_eq!(gc[0]["config"], "C1");
    for k in [
        "dirty_seconds",
        "traps_seconds",
        "linux_traps_seconds",
        "dirty_collections",
        "traps_collections",
        "linux_traps_collections",
    ] {
        positive(gc[0], k);
    }
}

/// Figure 3.5: every run of each side is kept, with its summary.
#[test]
fn the_spread_keeps_every_run_of_both_sides() {
    let mut args = vec!["bench", "vm", "--runs", "5"];
    args.extend(TINY);
    args.push("gups-spread");
    let o = retype(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    let small: Vec<_> = rows.iter().filter(|r| r["page_kib"] == 4).collect();
    assert_eq!(small.len(), 1, "{rows:?}");
    for p in ["", "linux_"] {
        let runs = small[0][format!("{p}runs")].as_array().expect("runs");
        assert_eq!(runs.len(), 5, "{p}: {rows:?}");
        let min = small[0][format!("{p}min")].as_f64().unwrap();
        let max = small[0][format!("{p}max")].as_f64().unwrap();
        assert_eq!(runs[0].as_f64(), Some(min));
        assert_eq!(runs[4].as_f64(), Some(max));
    }
}

/// Table 3.3: every page-size choice, each side timed or said to be
/// unavailable with its reason.
#[test]
fn pagerank_gives_every_choice_or_the_reason_it_cannot() {
    let o = retype(&[
        "bench",
        "vm",
        "--only",
        "pagerank",
        "--pr-scale",
        "10",
        "--pr-iterations",
        "2",
        "--reps",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    let pages: Vec<_> = rows.iter().map(|r| r["pages"].as_str().unwrap()).collect();
    assert_eq!(pages, ["4 KiB", "2 MiB", "mixed"]);
    for r in &rows {
        assert_eq!(r["edges"], 16 << 10, "{r}");
        for k in ["seconds", "linux_thp_seconds", "linux_hugetlb_seconds"] {
            match r[k].as_f64() {
                Some(v) => assert!(v > 0.0, "{r}"),
                None => assert!(r[format!("{k}_unavailable")].is_string(), "{r}"),
            }
        }
    }
    assert!(
        rows[0]["seconds"].as_f64().is_some() && rows[0]["linux_thp_seconds"].as_f64().is_some()
    );
}

/// Figure 3.1: the array tables hold more than the list ones at every size.
#[test]
fn shadow_tables_are_counted_for_every_working_set() {
    let o = retype(&["bench", "vm", "--only", "shadow", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 8, "2 MiB ×4 up to 64 GiB");
    for r in &rows {
        let (l, a) = (
            r["list_bytes"].as_u64().unwrap(),
            r["array_bytes"].as_u64().unwrap(),
        );
        assert!(0 < l && l < a, "{r}");
    }
}

#[test]
fn only_the_experiments_asked_for_run() {
    let mut args = vec!["bench", "vm"];
    args.extend(TINY);
    args.push("gc");
    let o = retype(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["bench"] == "gcbench"), "{rows:?}");
}

#[test]
fn vm_bench_is_bench_vm_under_its_old_name() {
    let mut args = vec!["vm", "bench"];
    args.extend(TINY);
    args.push("appel");
    let o = retype(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(
            "retype: 'retype vm bench' is now 'retype bench vm'; the old name goes in the next release\n"
        ),
        "{}",
        stderr(&o)
    );
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["bench"], "appel-li");
    assert_eq!(
        (r["rounds"].as_u64(), r["traps"].as_u64()),
        (Some(10), Some(100))
    );
}
