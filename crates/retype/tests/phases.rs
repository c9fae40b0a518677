//! Phases a program marks itself (`retype_mark`, `include/retype.h`): the
//! C example runs with and without the recorder, its marks come back as
//! phases (`trace info` lists them), and every analysis takes `--phase NAME`
//! as the window of that phase; an unknown name is refused, naming the
//! phases there are. The program also reads its running phase's figures
//! (`retype_phase_stats`), which must agree with the trace's.

mod common;

use std::path::Path;
use std::process::Command;

use retype_trace::phase::phases;
use retype_trace::Trace;

use common::recording::{compile, record};
use common::{retype_cmd, scratch, stderr, stdout};

/// `tests/c/marks.c` recorded in `dir`: the trace and what the program printed.
fn recorded(dir: &Path) -> (Trace, String) {
    let exe = compile("marks.c", dir);
    let (t, o) = record(dir, "marks.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    (t, stdout(&o))
}

fn trace_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    retype_cmd()
        .arg("trace")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_example_runs_without_the_recorder() {
    let dir = scratch("marks-plain");
    let exe = compile("marks.c", &dir);
    let o = Command::new(&exe).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "recorder: no\n");
}

#[test]
fn marks_are_phases_and_the_program_reads_its_own_figures() {
    let dir = scratch("marks-recorded");
    let (t, out) = recorded(&dir);
    // solve: 5 x 100000 freed, 7000 kept; the peak is one 100000 block; two
    // sites, the first the 100000 one.
    assert_eq!(
        out,
        "solve: allocated 507000 live 7000 peak 100000 sites 2 top 500000\n"
    );
    let names: Vec<String> = phases(&t).into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["load", "solve", "report"]);
    let p = phases(&t);
    assert!(p[0].end_ns == Some(p[1].start_ns) && p[2].end_ns.is_some());
    // retype_phase_stats allocates nothing: the phases hold the program's calls only.
    assert_eq!(
        p.iter().map(|p| p.events).collect::<Vec<_>>(),
        [10, 11, 6],
        "{out}"
    );

    let o = trace_cmd(&dir, &["info", "marks.rtr"]);
    let text = stdout(&o);
    assert!(text.contains("3 phases marked"), "{text}");
    for line in ["    load: ", "    solve: ", "    report: "] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let o = trace_cmd(&dir, &["info", "marks.rtr", "--phase", "solve", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ph = &info["phase"];
    assert_eq!(ph["name"], "solve");
    assert_eq!(
        (ph["calls"].as_u64(), ph["bytes"].as_u64()),
        (Some(6), Some(507000))
    );
    // The whole heap at the phase's highest moment: load's 10 blocks and one of 100000.
    assert_eq!(ph["peak_bytes"].as_u64(), Some(110_000));
    assert_eq!(ph["leaked_bytes"].as_u64(), Some(7000));
    assert_eq!(info["phases"].as_array().map(Vec::len), Some(3));
}

/// The counts of a collapsed-stacks export, summed.
fn collapsed_total(dir: &Path, args: &[&str]) -> u64 {
    let o = trace_cmd(
        dir,
        &[&["export", "marks.rtr", "-o", "out.folded"], args].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_to_string(dir.join("out.folded"))
        .unwrap()
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn every_analysis_takes_a_phase_as_its_window() {
    let dir = scratch("marks-analyses");
    recorded(&dir);
    let allocated = |phase: &str| collapsed_total(&dir, &["--phase", phase]);
    assert_eq!(allocated("load"), 10_000);
    assert_eq!(allocated("solve"), 507_000);
    assert_eq!(allocated("report"), 900);
    assert_eq!(
        collapsed_total(&dir, &["--phase", "solve", "--weight", "leaked"]),
        7000
    );
    for args in [
        &["sites", "marks.rtr", "--phase", "solve"][..],
        &["leaks", "marks.rtr", "--phase", "load"],
        &["timeline", "marks.rtr", "--phase", "solve"],
        &["flamegraph", "marks.rtr", "-o", "f.svg", "--phase", "solve"],
        &["diff", "marks.rtr", "marks.rtr", "--phase", "report"],
    ] {
        let o = trace_cmd(&dir, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    // Leaks in load: its 10 blocks of 1000, none freed.
    let o = trace_cmd(&dir, &["leaks", "marks.rtr", "--phase", "load", "--json"]);
    assert!(stdout(&o).contains("10000"), "{}", stdout(&o));
}

#[test]
fn an_unknown_phase_is_refused_naming_the_phases_there_are() {
    let dir = scratch("marks-unknown");
    recorded(&dir);
    for args in [
        &["sites", "marks.rtr", "--phase", "nope"][..],
        &["info", "marks.rtr", "--phase", "nope"],
    ] {
        let o = trace_cmd(&dir, args);
        assert!(!o.status.success(), "{args:?}");
        let e = stderr(&o);
        assert!(
            e.contains("marks.rtr: no phase \"nope\"; the trace has 3 phases: load, solve, report"),
            "{e}"
        );
    }
    let o = trace_cmd(
        &dir,
        &["sites", "marks.rtr", "--phase", "load", "--from", "1ms"],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}
