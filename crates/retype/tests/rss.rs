//! RSS and mapping calls end to end (#42 point 3): a program whose memory
//! grows, shrinks and grows again in heap blocks and mappings of its own
//! (`rss_phases.c`), recorded and read by `retype trace timeline` and
//! `trace info`; its mapping calls found in the trace as it made them; and
//! a program that forks and execs (`rss_fork.c`), whose traces stay whole.
//! RSS is held to relations between phases, never to values (they depend on
//! the kernel, THP and the machine).

mod common;

use std::path::Path;
use std::process::Output;

use retype_trace::{MapOp, Mapping, Trace};
use serde_json::Value;

use common::recording::{compile, record};
use common::{retype_cmd, scratch, stderr, stdout};

const MIB: u64 = 1024 * 1024;

fn json(dir: &Path, args: &[&str]) -> Value {
    let o: Output = retype_cmd().args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("one JSON document")
}

/// `(time_ns, bytes)` of a timeline series under `key`.
fn series(v: &Value, name: &str, key: &str) -> Vec<(u64, u64)> {
    v[name]
        .as_array()
        .unwrap_or_else(|| panic!("{name} in {v}"))
        .iter()
        .map(|p| (p["time_ns"].as_u64().unwrap(), p[key].as_u64().unwrap()))
        .collect()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap()
}

/// The mapping the program printed on `line`, as the trace should hold it.
fn printed(line: &str) -> Mapping {
    let f: Vec<&str> = line.split(' ').collect();
    let m = Mapping::default();
    match f[0] {
        "mmap" => Mapping {
            op: MapOp::Mmap,
            addr: hex(f[1]),
            len: f[2].parse().unwrap(),
            ..m
        },
        "munmap" => Mapping {
            op: MapOp::Munmap,
            addr: hex(f[1]),
            len: f[2].parse().unwrap(),
            ..m
        },
        "mremap" => Mapping {
            op: MapOp::Mremap,
            old_addr: hex(f[1]),
            old_len: f[2].parse().unwrap(),
            addr: hex(f[3]),
            len: f[4].parse().unwrap(),
            ..m
        },
        "brk" => Mapping {
            op: MapOp::Brk,
            old_addr: hex(f[1]),
            addr: hex(f[2]),
            ..m
        },
        other => panic!("unknown line {other}"),
    }
}

#[test]
fn the_timeline_shows_growth_shrinking_and_growth_again_in_heap_rss_and_mappings() {
    let dir = scratch("rss-phases");
    let exe = compile("rss_phases.c", &dir);
    let (t, o) = record(&dir, "p.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));

    // Each mapping call the program made, in the trace as it made it, with
    // its stack; and nothing else (glibc's own mmap of the 48 MiB blocks is
    // not the program's call: those blocks are heap blocks).
    let lines: Vec<Mapping> = stdout(&o).lines().map(printed).collect();
    assert_eq!(lines.len(), 6, "{}", stdout(&o));
    let ours: Vec<Mapping> = t
        .mappings
        .iter()
        .map(|m| {
            assert_ne!(m.stack, 0, "{m:?} has its stack");
            assert!(m.thread > 0 && m.time_ns > 0, "{m:?}");
            Mapping {
                prot: 0,
                flags: 0,
                thread: 0,
                time_ns: 0,
                stack: 0,
                ..*m
            }
        })
        .collect();
    assert_eq!(ours, lines);
    let mmap = t.mappings.iter().find(|m| m.op == MapOp::Mmap).unwrap();
    assert_eq!(mmap.prot, (libc::PROT_READ | libc::PROT_WRITE) as u32);
    assert_eq!(mmap.flags, (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u32);
    assert_eq!(
        t.mappings
            .iter()
            .find(|m| m.op == MapOp::Mremap)
            .unwrap()
            .flags,
        libc::MREMAP_MAYMOVE as u32
    );

    // Kept out of the heap: its peak is one 48 MiB block and change.
    let info = json(&dir, &["trace", "info", "--json", "p.rtr"]);
    let peak = info["peak_live_bytes"].as_u64().unwrap();
    assert!((48 * MIB..49 * MIB).contains(&peak), "heap peak {peak}");
    let calls = &info["mapping_calls"];
    assert_eq!(
        [
            &calls["mmap"],
            &calls["munmap"],
            &calls["mremap"],
            &calls["brk"]
        ],
        [2, 1, 1, 2]
    );
    assert!(info["rss_samples"].as_u64().unwrap() >= 3, "{info}");

    let v = json(&dir, &["trace", "timeline", "--json", "p.rtr"]);
    // Mapped bytes step as the calls went: mmap, munmap, sbrk and brk back,
    // mmap, mremap.
    let mapped = series(&v, "mapped", "mapped_bytes");
    let levels: Vec<u64> = mapped.iter().map(|&(_, b)| b).collect();
    assert_eq!(levels, [32 * MIB, 0, MIB, 0, 16 * MIB, 32 * MIB]);
    let (unmapped_at, remapped_at) = (mapped[1].0, mapped[4].0);

    // The heap: 48 MiB, then almost nothing, then 48 MiB again.
    let points: Vec<(u64, u64)> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["time_ns"].as_u64().unwrap(),
                p["live_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let live = |from: u64, to: u64| points.iter().filter(move |p| (from..to).contains(&p.0));
    assert!(live(0, unmapped_at).any(|p| p.1 >= 48 * MIB), "{points:?}");
    assert!(
        live(mapped[0].0, remapped_at).any(|p| p.1 < MIB),
        "{points:?}"
    );
    assert!(points.last().unwrap().1 >= 48 * MIB, "{points:?}");

    // RSS: at each height above the trough between them by most of the 80
    // MiB touched (each phase's sample is taken on its next call: the free,
    // the second malloc, the last output).
    let rss = series(&v, "rss", "rss_bytes");
    let highest = |from: u64, to: u64| {
        let r = rss.iter().filter(|s| (from..to).contains(&s.0));
        r.map(|s| s.1).max()
    };
    let lowest = |from: u64, to: u64| {
        let r = rss.iter().filter(|s| (from..to).contains(&s.0));
        r.map(|s| s.1).min()
    };
    let first_peak = highest(mapped[0].0, unmapped_at).expect("a sample at the first height");
    let trough = lowest(unmapped_at, remapped_at).expect("a sample between");
    let second_peak = highest(mapped[5].0, u64::MAX).expect("a sample at the second height");
    let most = 80 * MIB * 3 / 4;
    assert!(first_peak > trough + most, "{rss:?}");
    assert!(second_peak > trough + most, "{rss:?}");
    // Each point carries the RSS last sampled and the bytes mapped then.
    let p = v["points"].as_array().unwrap().last().unwrap();
    assert_eq!(p["mapped_bytes"], 32 * MIB);
    assert!(p["rss_bytes"].as_u64().unwrap() > trough + most, "{p}");

    // The text table shows the two series beside the heap.
    let o = retype_cmd()
        .args(["trace", "timeline", "p.rtr"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(text.contains("  RSS: "), "{text}");
    assert!(text.contains("  mapped (mmap, brk): 6 calls"), "{text}");
    assert!(
        text.lines().any(|l| l
            .split_whitespace()
            .take(5)
            .eq(["time", "live", "rss", "mapped", "[1]"])),
        "{text}"
    );
}

#[test]
fn rss_ms_zero_samples_nothing_and_mapping_calls_are_still_recorded() {
    let dir = scratch("rss-off");
    let exe = compile("rss_phases.c", &dir);
    let (t, o) = record(&dir, "p.rtr", &["--rss-ms", "0"], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t.rss.is_empty(), "{:?}", t.rss);
    assert_eq!(t.mappings.len(), 6);
    assert_eq!(t.meta_value("rss_interval_ms"), Some("0"));
}

/// A trace's mapping calls of segment `segment` with op `op`.
fn calls(t: &Trace, segment: u32, op: MapOp) -> Vec<Mapping> {
    let of = |m: &&Mapping| m.segment == segment && m.op == op;
    t.mappings.iter().filter(of).copied().collect()
}

#[test]
fn a_fork_child_and_an_exec_image_record_their_own_rss_and_mappings() {
    let dir = scratch("rss-fork");
    let exe = compile("rss_fork.c", &dir);
    let (t, o) = record(&dir, "f.rtr", &["--rss-ms", "1"], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Two images (the exec), each with its own mapping, RSS samples and heap.
    assert_eq!(t.segments.len(), 1, "one exec: {:?}", t.segments);
    for segment in 0..2 {
        assert_eq!(
            calls(&t, segment, MapOp::Mmap).len(),
            1,
            "segment {segment}"
        );
        assert_eq!(
            calls(&t, segment, MapOp::Munmap).len(),
            1,
            "segment {segment}"
        );
        assert!(
            t.rss.iter().any(|r| r.segment == segment),
            "segment {segment}"
        );
    }
    // The parent's mapping is not the child's.
    let mut lines = stdout(&o);
    lines.retain(|c| c != '\r');
    let child_map = lines
        .lines()
        .find_map(|l| l.strip_prefix("child mmap "))
        .map(hex)
        .expect("the child says where it mapped");
    assert!(t
        .mappings
        .iter()
        .all(|m| m.addr != child_map || m.op != MapOp::Mmap));
    // The child's own trace, whole, with its own calls and samples.
    let child_trace = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_str()
                .unwrap()
                .starts_with(dir.join("f.rtr.").to_str().unwrap())
        })
        .expect("the child's trace");
    let c = Trace::read_file(&child_trace).unwrap();
    assert_eq!(c.cut_short, None);
    let maps = calls(&c, 0, MapOp::Mmap);
    assert_eq!(maps.len(), 1, "{:?}", c.mappings);
    assert_eq!(maps[0].addr, child_map);
    assert!(!c.rss.is_empty());
    assert_ne!(c.meta_value("pid"), t.meta_value("pid"));
}

#[test]
fn the_report_draws_rss_and_mapped_bytes_beside_the_heap() {
    let dir = scratch("rss-report");
    let exe = compile("rss_phases.c", &dir);
    let (_, o) = record(&dir, "p.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = dir.join("t.html");
    let o = retype_cmd()
        .args(["trace", "timeline", "p.rtr"])
        .arg("--report")
        .arg(&html)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let at = page
        .find("RSS beside live heap bytes")
        .unwrap_or_else(|| panic!("no RSS figure in the report"));
    // Its three lines: the heap, the samples and the program's own mappings.
    let figure = &page[at..];
    for line in ["live heap bytes", "RSS", "mapped (mmap, brk)"] {
        assert!(figure.contains(line), "the figure draws {line:?}");
    }
    let Some(browser) = common::chromium() else {
        return;
    };
    let marks = common::marks_in_browser(browser, &html);
    let (_, n) = marks
        .iter()
        .find(|(k, _)| k.to_lowercase().contains("rss beside live heap bytes"))
        .unwrap_or_else(|| panic!("the RSS chart is checked: {marks:?}"));
    assert!(
        n.as_u64().unwrap() >= 3,
        "a mark a line at least: {marks:?}"
    );
}
