//! Starting and stopping a recording while the program runs: `retype record
//! --paused` with the toggle signal and with `--control FIFO`, and `retype
//! record --pid` (the recorder loaded into a process started without it) with
//! `--stop`. Blocks allocated while nothing was recorded are unknown when they
//! are freed, never counted against the recorded ones.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use retype_trace::recorded::windows;
use retype_trace::summary::Summary;
use retype_trace::{MapOp, Op, Trace};

use common::recording::{compile, recorder_built};
use common::{retype, retype_cmd, scratch, stderr};

/// The control program (`tests/c/control.c`) under `retype record EXTRA`,
/// driven a command at a time.
struct Driven {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Driven {
    fn start(dir: &Path, trace: &Path, extra: &[&str]) -> Driven {
        recorder_built();
        let exe = compile("control.c", dir);
        let mut child = retype_cmd()
            .arg("record")
            .args(extra)
            .arg("-o")
            .arg(trace)
            .arg("--")
            .arg(&exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Driven {
            child,
            stdin,
            stdout,
        }
    }

    /// Runs one command and waits until the program has done it.
    fn run(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ok", "after `{command}`");
    }

    fn finish(mut self) {
        self.run("quit");
        let o = self.child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

/// The allocations of `size` bytes in `t`.
fn mallocs_of(t: &Trace, size: u64) -> usize {
    t.events
        .iter()
        .filter(|e| e.op == Op::Malloc && e.size == size)
        .count()
}

/// The frees in `t` of blocks it allocated before (the others are unknown).
fn known_frees(t: &Trace) -> usize {
    let mut live = std::collections::HashSet::new();
    let mut known = 0;
    for e in t.serialized() {
        if e.op == Op::Free {
            known += usize::from(live.remove(&e.ptr));
        } else if e.op.allocates() {
            live.insert(e.ret);
        }
    }
    known
}

#[test]
fn a_paused_start_and_the_toggle_signal_record_only_the_windows() {
    let dir = scratch("control-signal");
    let trace = dir.join("t.rtr");
    let mut p = Driven::start(&dir, &trace, &["--paused"]);
    p.run("alloc 100 10"); // paused: not recorded
    p.run("toggle"); // window 1
    p.run("alloc 200 20");
    p.run("free 100"); // 10 blocks the trace never saw allocated
    p.run("toggle");
    p.run("alloc 300 30"); // paused
    p.run("toggle"); // window 2
    p.run("free 300"); // 30 more
    p.run("alloc 400 5");
    p.finish();

    let t = Trace::read_file(&trace).unwrap();
    assert_eq!(mallocs_of(&t, 100), 0);
    assert_eq!(mallocs_of(&t, 200), 20);
    assert_eq!(mallocs_of(&t, 300), 0);
    assert_eq!(mallocs_of(&t, 400), 5);
    let frees = t.events.iter().filter(|e| e.op == Op::Free).count();
    assert_eq!((frees, known_frees(&t)), (40, 0));
    let s = Summary::of(&t);
    // The unknown frees are counted apart and take nothing from the live bytes.
    assert_eq!(s.unknown_pointers, 40);
    assert_eq!(
        (s.live_at_end_blocks, s.live_at_end_bytes),
        (25, 20 * 200 + 5 * 400)
    );
    assert_eq!(s.peak_live_bytes, 20 * 200 + 5 * 400);

    let w = windows(&t);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(
        (w[0].opened_by.as_str(), w[0].closed_by.as_deref()),
        ("signal", Some("signal"))
    );
    assert_eq!(
        (w[1].opened_by.as_str(), w[1].closed_by.as_deref()),
        ("signal", Some("exit"))
    );
    assert_eq!((w[0].events, w[1].events), (30, 35));
    assert!(w[0].stop_ns < Some(w[1].start_ns));
    for e in &t.events {
        assert!(
            w.iter().any(|w| w.contains(e.time_ns)),
            "{e:?} outside every window"
        );
    }

    let info = retype(&["trace", "info", trace.to_str().unwrap()]);
    let text = common::stdout(&info);
    assert!(text.contains("recorded in 2 windows"), "{text}");
    assert!(text.contains("(signal) to "), "{text}");
    assert!(
        text.contains("blocks allocated while nothing was recorded"),
        "{text}"
    );
    let json = retype(&["trace", "info", "--json", trace.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&json)).unwrap();
    assert_eq!(v["windows"].as_array().unwrap().len(), 2);
    assert_eq!(v["windows"][1]["closed_by"], "exit");
    assert_eq!(v["unknown_pointers"], 40);
}

/// Waits until the trace file holds `times` copies of `text` (the recorder
/// writes a window's record as it opens or closes it).
fn wait_for_records(trace: &Path, text: &str, times: usize) {
    let start = Instant::now();
    loop {
        let bytes = std::fs::read(trace).unwrap_or_default();
        let n = bytes
            .windows(text.len())
            .filter(|w| *w == text.as_bytes())
            .count();
        if n >= times {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never held {times} {text} records",
            trace.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn start_and_stop_lines_on_the_control_pipe_open_and_close_windows() {
    let dir = scratch("control-fifo");
    let trace = dir.join("t.rtr");
    let fifo = dir.join("ctl");
    let mut p = Driven::start(
        &dir,
        &trace,
        &["--paused", "--control", fifo.to_str().unwrap()],
    );
    p.run("alloc 100 3");
    let send = |line: &str| {
        let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        writeln!(f, "{line}").unwrap();
    };
    // A line the pipe does not know is reported and changes nothing.
    send("begin");
    send("start");
    wait_for_records(&trace, "window_start", 1);
    // A second start while recording opens nothing.
    send("start");
    p.run("alloc 200 4");
    send("stop");
    wait_for_records(&trace, "window_stop", 1);
    p.run("alloc 300 5");
    send("start");
    wait_for_records(&trace, "window_start", 2);
    p.run("alloc 400 6");
    p.run("quit");
    let o = p.child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(":1: `begin` is not start or stop"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The pipe this command made is gone.
    assert!(!fifo.exists());

    let t = Trace::read_file(&trace).unwrap();
    let got: Vec<usize> = [100, 200, 300, 400]
        .iter()
        .map(|&s| mallocs_of(&t, s))
        .collect();
    assert_eq!(got, [0, 4, 0, 6]);
    let w = windows(&t);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(
        (w[0].opened_by.as_str(), w[0].closed_by.as_deref()),
        ("control", Some("control"))
    );
    assert_eq!((w[0].events, w[1].events), (4, 6));
}

#[test]
fn a_control_path_that_is_not_a_pipe_is_refused() {
    let dir = scratch("control-not-fifo");
    let file = dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    let o = retype(&["record", "--control", file.to_str().unwrap(), "--", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("exists and is not a named pipe"),
        "{}",
        stderr(&o)
    );
    let o = retype(&["record", "--toggle-signal", "9", "--", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot toggle recording"),
        "{}",
        stderr(&o)
    );
}

/// Whether this machine lets a process trace its child (Yama, a container's
/// seccomp profile); the reason if not.
fn ptrace_forbidden() -> Option<String> {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    // SAFETY: seizing and detaching our own child; no memory is shared.
    let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) };
    let err = std::io::Error::last_os_error();
    child.kill().unwrap();
    child.wait().unwrap();
    (rc != 0).then(|| format!("PTRACE_SEIZE of a child fails here: {err}"))
}

/// The python3 executable itself (not a shim script that execs it).
fn python() -> PathBuf {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    std::fs::canonicalize(String::from_utf8_lossy(&o.stdout).trim()).unwrap()
}

/// Python running `script`, started plainly (its output piped), once it is in
/// its loop (see [`wait_until_in_loop`]), and its pid as an argument.
fn python_in_its_loop(script: &str) -> (std::process::Child, String) {
    let exe = python();
    let py = Command::new(&exe)
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_in_loop(py.id(), &exe);
    let pid = py.id().to_string();
    (py, pid)
}

/// Waits until process `pid` runs `exe` and is in its loop: it has slept
/// (`time.sleep`, a voluntary context switch each) a few hundred times, which
/// Python's start-up, however slow the machine, does not.
fn wait_until_in_loop(pid: u32, exe: &Path) {
    let start = Instant::now();
    let sleeps = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
            .trim()
            .parse::<u64>()
            .ok()
    };
    while std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .as_deref()
        != Some(exe)
        || sleeps().is_none_or(|n| n < 300)
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "process {pid} never reached its loop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn python_recorded_by_pid_for_a_window_runs_on_to_its_end() {
    if let Some(why) = ptrace_forbidden() {
        eprintln!("skipped: {why}");
        return;
    }
    recorder_built();
    let dir = scratch("control-pid");
    let trace = dir.join("py.rtr");
    // The program, started plainly: about 10^5 blocks of 1000 bytes,
    // one every 0.1 ms or more.
    let (py, pid) = python_in_its_loop(
        "import time; x=[]; [x.append(bytes(1000)) or time.sleep(0.0001) for _ in range(10**5)]; print(len(x))",
    );
    let o = retype(&["record", "--pid", &pid, "-o", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("--stop` ends it"), "{}", stderr(&o));
    std::thread::sleep(Duration::from_millis(500));
    let o = retype(&["record", "--pid", &pid, "--stop", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    assert_eq!(v["trace"], trace.to_str().unwrap());
    // A second stop finds nothing to stop.
    let again = retype(&["record", "--pid", &pid, "--stop"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("is not being recorded"),
        "{}",
        stderr(&again)
    );

    // The recorder attaches once per process, and says so.
    let again = retype(&[
        "record",
        "--pid",
        &pid,
        "-o",
        dir.join("again.rtr").to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("was recorded by --pid before"),
        "{}",
        stderr(&again)
    );

    let out = py.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 ended with {}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "100000");

    let t = Trace::read_file(&trace).unwrap();
    assert!(t.cut_short.is_none());
    let w = windows(&t);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(
        (w[0].opened_by.as_str(), w[0].closed_by.as_deref()),
        ("attach", Some("detach"))
    );
    let stop = w[0].stop_ns.unwrap();
    // bytes(1000): a calloc of 1000 bytes and the object's header.
    let thousands = t
        .events
        .iter()
        .filter(|e| e.op == Op::Calloc && (1000..1100).contains(&e.size))
        .count();
    assert!(
        thousands > 0,
        "no bytes(1000) recorded among {} events",
        t.events.len()
    );
    for e in &t.events {
        assert!(
            e.time_ns >= w[0].start_ns && e.time_ns.saturating_add(e.latency_ns) <= stop,
            "{e:?} outside the window {:?}",
            w[0]
        );
    }
    assert_eq!(v["events"], t.events.len());
    let info = common::stdout(&retype(&["trace", "info", trace.to_str().unwrap()]));
    assert!(info.contains("(attach) to "), "{info}");
    assert!(
        info.contains("(when recording stopped; the program ran on)"),
        "{info}"
    );
}

/// The mapping hooks are redirected too: a plainly started Python program's
/// own `mmap` and `munmap` (its mmap module, loaded before the attach) are
/// recorded in the window, and put back at the detach.
#[test]
fn mapping_calls_of_a_process_recorded_by_pid_fall_in_its_window() {
    if let Some(why) = ptrace_forbidden() {
        eprintln!("skipped: {why}");
        return;
    }
    recorder_built();
    let dir = scratch("control-pid-mappings");
    let trace = dir.join("maps.rtr");
    // 3,000 anonymous mappings of 1 MiB, each unmapped at once, 1 ms apart or more.
    let (py, pid) = python_in_its_loop(
        "import mmap, time\nn = 0\nfor _ in range(3000):\n    m = mmap.mmap(-1, 1 << 20); m[0] = 1; m.close(); n += 1; time.sleep(0.001)\nprint(n)",
    );
    let o = retype(&["record", "--pid", &pid, "-o", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::thread::sleep(Duration::from_millis(500));
    let o = retype(&["record", "--pid", &pid, "--stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = py.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 ended with {}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3000");

    let t = Trace::read_file(&trace).unwrap();
    let w = windows(&t);
    assert_eq!(w.len(), 1, "{w:?}");
    let (start, stop) = (w[0].start_ns, w[0].stop_ns.unwrap());
    let of = |op: MapOp| {
        t.mappings
            .iter()
            .filter(|m| m.op == op && m.len == 1 << 20)
            .count()
    };
    let (maps, unmaps) = (of(MapOp::Mmap), of(MapOp::Munmap));
    assert!(maps > 0 && unmaps > 0, "{:?}", t.mappings);
    // Each mapping is unmapped right after it is made: the window cuts one pair at most.
    assert!(maps.abs_diff(unmaps) <= 1, "{maps} mmap, {unmaps} munmap");
    for m in &t.mappings {
        assert!(
            (start..=stop).contains(&m.time_ns),
            "{m:?} outside the window {:?}",
            w[0]
        );
    }
}

#[test]
fn a_process_under_retype_record_is_pointed_to_its_toggle_signal() {
    if let Some(why) = ptrace_forbidden() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = scratch("control-preloaded");
    let trace = dir.join("t.rtr");
    let mut p = Driven::start(&dir, &trace, &[]);
    p.run("alloc 100 1");
    // The program is the child of `retype record`.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", p.child.id())).unwrap();
    let pid = children.split_whitespace().next().unwrap().to_string();
    let o = retype(&[
        "record",
        "--pid",
        &pid,
        "-o",
        dir.join("p.rtr").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("runs with the recorder preloaded"),
        "{}",
        stderr(&o)
    );
    // It was left as it was: it goes on, recorded.
    p.run("alloc 200 1");
    p.finish();
    let t = Trace::read_file(&trace).unwrap();
    assert_eq!((mallocs_of(&t, 100), mallocs_of(&t, 200)), (1, 1));
}

#[test]
fn a_process_that_may_not_be_traced_gets_a_clear_error() {
    if let Some(why) = ptrace_forbidden() {
        eprintln!("skipped: {why}");
        return;
    }
    recorder_built();
    let o = retype(&["record", "--pid", "2147483647"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no process 2147483647"),
        "{}",
        stderr(&o)
    );

    let mut child = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = child.id() as i32;
    // Attached to before its loader maps the C library, it would have none
    // to load the recorder with, and that error would come first.
    let start = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("libc")) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "sleep never loaded its C library"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = retype(&["record", "--pid", &pid.to_string(), "--stop"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the recorder is not loaded"),
        "{}",
        stderr(&o)
    );
    // This test's process traces it: a process has one tracer at a time.
    // SAFETY: seizing our own child; nothing is shared.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) }, 0);
    let o = retype(&["record", "--pid", &pid.to_string()]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!o.status.success());
    let me = std::process::id();
    assert!(
        stderr(&o).contains(&format!("traced already by process {me}")),
        "{}",
        stderr(&o)
    );
}
