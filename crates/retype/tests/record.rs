//! `retype record` on real programs: C (ours, multi-threaded), python3, sort,
//! git. The recorded events are checked against an independent count
//! (`valgrind --trace-malloc=yes` on the same deterministic run) and for
//! consistency: every free and realloc names a block the trace allocated.

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;

use retype_trace::summary::Summary;
use retype_trace::{Op, Trace};

use common::recording::{compile, compile_library, record, recorder_built, valgrind_trace};
use common::{quick_replay, retype_cmd, scratch};

/// Calls by kind; valgrind reports every aligned allocation as memalign.
fn counts(t: &Trace) -> [u64; 5] {
    let s = Summary::of(t);
    let n = |op| s.ops.get(&op).copied().unwrap_or(0);
    let aligned = n(Op::PosixMemalign)
        + n(Op::AlignedAlloc)
        + n(Op::Memalign)
        + n(Op::Valloc)
        + n(Op::Pvalloc);
    [
        n(Op::Malloc),
        n(Op::Calloc),
        n(Op::Realloc),
        n(Op::Free),
        aligned,
    ]
}

/// No event lost: every pointer freed or reallocated was allocated in the trace.
fn assert_consistent(t: &Trace) {
    let s = Summary::of(t);
    assert_eq!(
        s.unknown_pointers, 0,
        "frees/reallocs of blocks the trace never allocated"
    );
    assert!(s.events > 0);
}

fn the_last_image_is(t: &Trace, program: &str) {
    let last = t
        .meta
        .iter()
        .rev()
        .find(|(k, _)| k == "cmdline")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(
        last.contains(program),
        "last cmdline {last:?} is not {program}"
    );
}

#[test]
fn a_multithreaded_c_program_matches_valgrind_call_for_call() {
    let dir = scratch("mt");
    let exe = compile("mt_alloc.c", &dir);
    let cmd = [exe.to_str().unwrap(), "4", "3000"];
    let (t, o) = record(&dir, "mt.rtr", &[], &cmd);
    assert!(o.status.success());
    let v = valgrind_trace(&dir, &cmd);
    assert_eq!(
        counts(&t),
        counts(&v),
        "recorded vs valgrind [malloc, calloc, realloc, free, aligned]"
    );
    assert_eq!(t.events.len(), v.events.len());
    assert_consistent(&t);
    // The program reports its own calls: every one of them is in the trace, on a worker thread.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let calls: usize = stdout
        .trim()
        .strip_prefix("calls ")
        .unwrap()
        .parse()
        .unwrap();
    let main = t.events.iter().map(|e| e.thread).min().unwrap();
    let on_workers = t.events.iter().filter(|e| e.thread != main).count();
    assert!(
        on_workers >= calls,
        "{on_workers} worker events < {calls} calls"
    );
    // Each worker's exit wrote its TLM summary, with CPU time and a wait time that adds up.
    let s = Summary::of(&t);
    assert_eq!(s.threads.len(), 5);
    let summaries: Vec<_> = s.threads.iter().filter_map(|th| th.summary).collect();
    assert!(summaries.len() >= 4, "{summaries:?}");
    for m in &summaries {
        assert!(m.end_ns >= m.start_ns);
        // A worker's events come after its start (read as it begins) and before
        // its end, but for glibc's own cleanup after the thread-exit destructor.
        let times: Vec<u64> = t
            .events
            .iter()
            .filter(|e| e.thread == m.thread)
            .map(|e| e.time_ns)
            .collect();
        if m.thread != main {
            assert!(times.iter().all(|&x| m.start_ns <= x), "{m:?}");
            assert!(
                times.iter().filter(|&&x| x > m.end_ns).count() <= 8,
                "{m:?}"
            );
        }
        assert_eq!(
            m.wait_ns(),
            m.lifetime_ns().saturating_sub(m.user_ns + m.system_ns)
        );
    }
    assert!(summaries.iter().any(|m| m.user_ns + m.system_ns > 0));
    // By default a sample of the calls, 64 apart on average, had their
    // latency measured (at least the clock's resolution, however fast this
    // machine's allocator and clock are); the others keep 0. Their number
    // is about Poisson: 3 times off its mean is beyond any run's chance.
    assert_eq!(t.meta_value("latency_every"), Some("64"));
    let resolution = clock_resolution(&t);
    let measured: Vec<u64> = t
        .events
        .iter()
        .map(|e| e.latency_ns)
        .filter(|&l| l > 0)
        .collect();
    assert!(
        measured.iter().all(|&l| l >= resolution),
        "latencies under {resolution} ns"
    );
    let expected = t.events.len() as f64 / 64.0;
    let n = measured.len() as f64;
    assert!(
        n > expected / 3.0 && n < expected * 3.0,
        "{n} measured, about {expected} expected"
    );
}

/// The clock's resolution in ns, as the recorder wrote it.
fn clock_resolution(t: &Trace) -> u64 {
    let resolution: u64 = t
        .meta_value("clock_resolution_ns")
        .expect("the recorder writes the clock's resolution")
        .parse()
        .unwrap();
    assert!(resolution >= 1);
    resolution
}

#[test]
fn python_matches_valgrind() {
    let dir = scratch("py");
    // The interpreter itself, not a version-manager shim around it.
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(exe.stdout).unwrap().trim().to_string();
    let cmd = [
        python.as_str(),
        "-c",
        "import json; json.dumps(list(range(20000)))",
    ];
    let (t, o) = record(&dir, "py.rtr", &[], &cmd);
    assert!(o.status.success());
    assert_consistent(&t);
    let v = valgrind_trace(&dir, &cmd);
    assert_eq!(
        counts(&t),
        counts(&v),
        "recorded vs valgrind [malloc, calloc, realloc, free, aligned]"
    );
}

#[test]
fn python3_through_the_path_records_the_interpreter() {
    let dir = scratch("py3");
    let (t, o) = record(
        &dir,
        "t.rtr",
        &[],
        &[
            "python3",
            "-c",
            "import json; json.dumps(list(range(100000)))",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_consistent(&t);
    the_last_image_is(&t, "python3");
    // The list of 100000 ints is live at once: the peak says so.
    assert!(Summary::of(&t).peak_live_bytes > 800_000);
}

#[test]
fn sort_matches_valgrind() {
    let dir = scratch("sort");
    let mut x = 12345u64;
    let lines: String = (0..20000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            format!("{:016x} {}\n", x, "y".repeat((x >> 58) as usize))
        })
        .collect();
    std::fs::write(dir.join("in.txt"), &lines).unwrap();
    let cmd = ["sort", "--parallel=1", "-o", "out.txt", "in.txt"];
    let (t, o) = record(&dir, "s.rtr", &[], &cmd);
    assert!(o.status.success());
    let sorted = std::fs::read_to_string(dir.join("out.txt")).unwrap();
    let mut want: Vec<&str> = lines.lines().collect();
    want.sort();
    assert_eq!(sorted.lines().collect::<Vec<_>>(), want);
    assert_consistent(&t);
    let v = valgrind_trace(&dir, &cmd);
    assert_eq!(counts(&t), counts(&v));
}

#[test]
fn git_in_a_temporary_repository() {
    let dir = scratch("git");
    let git = |args: &[&str]| {
        let s = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(s.status.success(), "git {args:?}");
    };
    git(&["init", "-q", "."]);
    std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
    // A file modified in the same tick as the index is "racily clean": git then
    // re-reads it, and a status may rewrite the index, so that a second status
    // does less work than the first. A file from long ago never is.
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(dir.join("a.txt"))
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    git(&["add", "a.txt"]);
    let (t, o) = record(
        &dir,
        "commit.rtr",
        &[],
        &[
            "git",
            "-c",
            "user.name=r",
            "-c",
            "user.email=r@x",
            "commit",
            "-qm",
            "first",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_consistent(&t);
    // A deterministic read-only command against valgrind: git's index preload
    // runs threads whose allocations vary from run to run (off), and without
    // optional locks the first status cannot rewrite the index for the second.
    let cmd = [
        "git",
        "--no-optional-locks",
        "-c",
        "core.preloadIndex=false",
        "status",
        "--porcelain",
    ];
    let (t, _) = record(&dir, "status.rtr", &[], &cmd);
    assert_consistent(&t);
    let v = valgrind_trace(&dir, &cmd);
    assert_eq!(counts(&t), counts(&v));
}

/// Marker allocations (size 12345) of the lifecycle program.
fn markers(t: &Trace) -> usize {
    t.events
        .iter()
        .filter(|e| e.op == Op::Malloc && e.size == 12345)
        .count()
}

#[test]
fn every_exit_path_ends_the_trace() {
    let dir = scratch("life");
    let exe = compile("lifecycle.c", &dir);
    for (mode, code) in [
        ("exit", Some(0)),
        ("_exit", Some(3)),
        ("sigterm", None),
        ("abort", None),
    ] {
        let (t, o) = record(
            &dir,
            &format!("{mode}.rtr"),
            &[],
            &[exe.to_str().unwrap(), mode, "50"],
        );
        assert_eq!(o.status.code() == Some(0), code == Some(0), "{mode}");
        assert_eq!(markers(&t), 50, "{mode}");
    }
}

/// The process ends while two threads allocate without pause: their buffers
/// are written out while they append (the fast path's handshake with the
/// drainer), and the trace must still read to its end record, consistent.
#[test]
fn exit_while_threads_allocate_leaves_a_whole_trace() {
    let dir = scratch("busy");
    let exe = compile("lifecycle.c", &dir);
    for round in 0..5 {
        let (t, o) = record(
            &dir,
            &format!("busy{round}.rtr"),
            &[],
            &[exe.to_str().unwrap(), "busy", "10"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(markers(&t), 10);
        assert_consistent(&t);
        let threads = t
            .events
            .iter()
            .map(|e| e.thread)
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(threads.len(), 3, "main and both workers recorded");
    }
}

#[test]
fn a_forked_child_writes_its_own_trace_and_exec_continues_the_file() {
    let dir = scratch("fork");
    let exe = compile("lifecycle.c", &dir);
    let (t, o) = record(
        &dir,
        "f.rtr",
        &["--json"],
        &[exe.to_str().unwrap(), "fork", "40"],
    );
    assert!(o.status.success());
    assert_eq!(markers(&t), 40);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let children = report["child_traces"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{report}");
    let child = Trace::read_file(Path::new(children[0].as_str().unwrap())).unwrap();
    assert_eq!(markers(&child), 40);
    assert_eq!(child.meta_value("segment"), Some("fork"));

    assert_exec_continues_the_file(&dir, &exe, "exec");
}

/// `lifecycle MODE 30` execs /bin/true: the 30 marker calls before the exec
/// are in the file, and the new image appends a second segment.
fn assert_exec_continues_the_file(dir: &Path, exe: &Path, mode: &str) {
    let (t, o) = record(
        dir,
        &format!("{mode}.rtr"),
        &[],
        &[exe.to_str().unwrap(), mode, "30"],
    );
    assert!(o.status.success(), "{mode}");
    assert_eq!(markers(&t), 30, "{mode}");
    let segments: Vec<&str> = t
        .meta
        .iter()
        .filter(|(k, _)| k == "segment")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        segments,
        ["start", "exec"],
        "{mode} begins a second segment in the same file"
    );
    the_last_image_is(&t, "true");
}

/// The C-variadic exec functions (the recorder's C shim) end the segment too.
#[test]
fn execl_execlp_and_execle_keep_the_events_before_them() {
    let dir = scratch("execl");
    let exe = compile("lifecycle.c", &dir);
    for mode in ["execl", "execlp", "execle"] {
        assert_exec_continues_the_file(&dir, &exe, mode);
    }
}

#[test]
fn jemalloc_runs_under_the_recorder() {
    let dir = scratch("je");
    let exe = compile("mt_alloc.c", &dir);
    let cmd = [exe.to_str().unwrap(), "2", "2000"];
    let (glibc, _) = record(&dir, "g.rtr", &[], &cmd);
    let (je, o) = record(&dir, "j.rtr", &["--allocator", "jemalloc"], &cmd);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(je.meta_value("allocator"), Some("jemalloc"));
    assert_consistent(&je);
    // The program's own calls are the same whichever allocator serves them.
    let workers = |t: &Trace| {
        let main = t.events.iter().map(|e| e.thread).min().unwrap();
        t.events
            .iter()
            .filter(|e| e.thread != main && !(e.op == Op::Free && e.ptr == 0))
            .count()
    };
    assert_eq!(workers(&je), workers(&glibc));
}

/// A call during which the thread sleeps carries the descheduled flag (when the machine's
/// glibc registers rseq, as the trace's `descheduling` metadata says); quick calls mostly
/// do not, and `trace info` leaves the flagged ones out of its longest running call.
#[test]
fn a_call_that_sleeps_is_marked_descheduled() {
    let dir = scratch("desched");
    let exe = compile("slow_calls.c", &dir);
    let lib = compile_library("slow_alloc.c", &dir);
    let (t, o) = record(
        &dir,
        "d.rtr",
        &[
            "--no-stacks",
            "--latency-every",
            "1",
            "--allocator",
            lib.to_str().unwrap(),
        ],
        &[exe.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every call's latency was measured.
    let resolution = clock_resolution(&t);
    let unmeasured = t.events.iter().filter(|e| e.latency_ns < resolution);
    assert_eq!(unmeasured.count(), 0, "latencies under {resolution} ns");
    let slow: Vec<_> = t.events.iter().filter(|e| e.size == 12345).collect();
    assert_eq!(slow.len(), 5);
    assert!(slow.iter().all(|e| e.latency_ns >= 2_000_000), "{slow:?}");
    let quick = t.events.iter().filter(|e| e.size == 16).count();
    assert_eq!(quick, 1000);
    let flagged = t.events.iter().filter(|e| e.descheduled).count();
    let s = Summary::of(&t);
    assert_eq!(s.descheduled, flagged as u64);
    assert_eq!(
        t.meta_value("descheduling"),
        Some(if glibc_registers_rseq() {
            "rseq"
        } else {
            "none"
        })
    );
    match t.meta_value("descheduling") {
        Some("rseq") => {
            assert!(slow.iter().all(|e| e.descheduled), "{slow:?}");
            // A quick call is descheduled only if the machine preempts it: rarely.
            assert!(
                flagged < 5 + 100,
                "{flagged} of {} calls flagged",
                t.events.len()
            );
            assert!(s.latency_max_ns >= 2_000_000);
            let running = t
                .events
                .iter()
                .filter(|e| !e.descheduled)
                .map(|e| e.latency_ns);
            assert_eq!(s.latency_max_running_ns, running.max().unwrap());
        }
        Some("none") => assert_eq!(flagged, 0),
        other => panic!("meta descheduling is {other:?}"),
    }
}

/// glibc registers every thread's rseq area from version 2.35 on, unless a tunable says not.
fn glibc_registers_rseq() -> bool {
    let o = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let version = text
        .trim()
        .strip_prefix("glibc ")
        .expect("getconf names glibc");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap());
    let major_minor = (parts.next().unwrap(), parts.next().unwrap());
    let off = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.pthread.rseq=0"));
    major_minor >= (2, 35) && !off
}

#[test]
fn clear_errors_for_missing_allocators_and_commands() {
    recorder_built();
    let o = retype_cmd()
        .args(["record", "--allocator", "nosuch", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown allocator"));
    let o = retype_cmd()
        .args(["record", "--allocator", "/nonexistent/lib.so", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such shared object"));
}

/// `-o` names a path in a missing directory, or something that is not a regular file (a
/// directory, a pipe, a device): refused before the program runs, naming the path, and
/// nothing there removed.
#[test]
fn an_output_that_is_not_a_file_is_refused_and_kept() {
    recorder_built();
    let dir = common::scratch("record-output");
    let fifo = dir.join("pipe");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let missing = dir.join("no-such-dir").join("t.rtr");
    let cases = [
        (dir.clone(), "is not a regular file"),
        (fifo.clone(), "is not a regular file"),
        (missing.clone(), "no directory"),
    ];
    for (path, words) in cases {
        let o = retype_cmd()
            .args(["record", "-o"])
            .arg(&path)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&path.display().to_string()) && err.contains(words),
            "{err}"
        );
    }
    assert!(dir.is_dir());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn a_recorded_trace_replays_on_our_heaps() {
    let dir = scratch("replay");
    let exe = compile("mt_alloc.c", &dir);
    let (t, _) = record(&dir, "mt.rtr", &[], &[exe.to_str().unwrap(), "2", "1500"]);
    let path = dir.join("mt.rtr");
    let o = quick_replay("best-fit,tlsf")
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (requests, _) = retype_trace::requests::from_events(&t);
    let reallocs = requests
        .requests
        .iter()
        .filter(|op| matches!(op, retype_trace::Request::Realloc { .. }))
        .count() as u64;
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["ops"], requests.requests.len());
        let util = row["util"].as_f64().unwrap();
        assert!(util > 0.0 && util <= 1.0, "{row}");
        let moved = row["reallocs_moved"].as_u64().unwrap();
        assert_eq!(
            moved + row["reallocs_in_place"].as_u64().unwrap(),
            reallocs,
            "{row}"
        );
        let histogram: u64 = row["hole_histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(histogram, row["holes_at_peak"].as_u64().unwrap());
    }
    // The text report adds the placement table for recorded traces.
    let o = quick_replay("tlsf").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("hole bytes") && text.contains("in place"),
        "{text}"
    );
}
