//! Recordings that survive faults (#46): a recorded program killed by a
//! signal leaves a trace that reads up to its last flush; a trace that cannot
//! be written (a full disk, a device that refuses writes, an unwritable path,
//! the file-size limit, a descriptor the program closed and reused) stops the
//! recording with one line on stderr while the program runs on with its own
//! output and exit status; fork and exec keep whole traces. The programs are
//! `crates/retype-recorder/tests/c/faults.c` and python3.

mod common;

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use retype_trace::summary::Summary;
use retype_trace::{Op, Trace};

use common::recording::{compile, record, recorder_built};
use common::{retype, retype_cmd, scratch, stderr, stdout};

/// Marker allocations (size 12345) of `faults.c`.
fn markers(t: &Trace) -> usize {
    t.events
        .iter()
        .filter(|e| e.op == Op::Malloc && e.size == 12345)
        .count()
}

/// What `faults MODE N` prints before it faults.
fn printed(n: usize) -> String {
    (0..n).map(|i| format!("line {i}\n")).collect()
}

/// That the program printed what `faults MODE n` prints, all of it.
fn assert_printed(o: &Output, n: usize) {
    let out = stdout(o);
    assert!(
        out == printed(n),
        "{} bytes of stdout, not the {n} lines (stderr: {})",
        out.len(),
        stderr(o)
    );
}

/// The lines the recorder wrote on stderr.
fn recorder_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("retype-recorder:"))
        .map(str::to_string)
        .collect()
}

/// Each thread's events in call order, as a cut trace must keep them: times
/// never go back, and every block freed or reallocated was allocated before.
fn assert_a_whole_prefix(t: &Trace) {
    let mut last: HashMap<u32, u64> = HashMap::new();
    for e in &t.events {
        let prev = last.entry(e.thread).or_insert(0);
        assert!(e.time_ns >= *prev, "thread {}'s time goes back", e.thread);
        *prev = e.time_ns;
    }
    assert_eq!(
        Summary::of(t).unknown_pointers,
        0,
        "an event lost before one kept"
    );
}

/// `retype record -o TRACE -- CMD` run in `cwd`, started with stdout piped
/// (the recorded program's stdout comes through it), and the pid the program
/// printed after `word` once it was ready.
fn start_recording(
    cwd: &Path,
    trace: &Path,
    cmd: &[&str],
    env: &[(&str, &str)],
    word: &str,
) -> (Child, BufReader<ChildStdout>, i32) {
    recorder_built();
    let mut child = retype_cmd()
        .args(["record", "-o"])
        .arg(trace)
        .arg("--")
        .args(cmd)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let pid = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "{cmd:?} ended before {word}"
        );
        if let Some(pid) = line.strip_prefix(word) {
            break pid.trim().parse().unwrap();
        }
    };
    (child, out, pid)
}

/// Sends SIGKILL to `pid`; false if it had already ended.
fn kill(pid: i32) -> bool {
    // SAFETY: kill takes two integers; `pid` is the recorded program.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

/// The recording's end, once the rest of its stdout is read.
fn finish(child: Child, mut out: BufReader<ChildStdout>) -> Output {
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    child.wait_with_output().unwrap()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

/// The fault comes in the program, or inside free (glibc's double-free
/// check aborts while the recorder's hook waits for it).
#[test]
fn segv_and_abort_leave_every_event_before_the_fault() {
    let dir = scratch("fault");
    let exe = compile("faults.c", &dir);
    for (mode, signal) in [
        ("segv", "SIGSEGV"),
        ("abort", "SIGABRT"),
        ("doublefree", "SIGABRT"),
    ] {
        let (t, o) = record(
            &dir,
            &format!("{mode}.rtr"),
            &[],
            &[exe.to_str().unwrap(), mode, "20000"],
        );
        assert!(stderr(&o).contains(signal), "{mode}: {}", stderr(&o));
        assert_printed(&o, 20000);
        assert_eq!(
            t.cut_short, None,
            "{mode}: the handler wrote the end record"
        );
        assert_eq!(markers(&t), 20000, "{mode}");
        assert_a_whole_prefix(&t);
    }
}

/// SIGKILL runs no handler: the trace holds what was written before it, and
/// `trace info` says where it stops.
#[test]
fn sigkill_leaves_the_trace_up_to_its_last_flush() {
    let dir = scratch("sigkill");
    let exe = compile("faults.c", &dir);
    let n = 100_000;
    let path = dir.join("k.rtr");
    let (child, out, pid) = start_recording(
        &dir,
        &path,
        &[exe.to_str().unwrap(), "kill", &n.to_string()],
        &[],
        "ready ",
    );
    assert!(kill(pid), "the program waits to be killed");
    let o = finish(child, out);
    assert!(stderr(&o).contains("SIGKILL"), "{}", stderr(&o));
    let t = Trace::read_file(&path).unwrap();
    let cut = t.cut_short.expect("no end record after SIGKILL");
    // Killed while it waited: no write was under way, the file ends between records.
    assert_eq!(cut.at_byte, file_len(&path));
    assert_eq!(cut.events, t.events.len() as u64);
    // The marker calls filled buffers many times; the last buffer was lost.
    let m = markers(&t);
    assert!(m > n / 2 && m <= n, "{m} of {n} marker calls");
    assert_a_whole_prefix(&t);

    let info = retype(&["trace", "info", path.to_str().unwrap()]);
    assert!(info.status.success(), "{}", stderr(&info));
    let want = format!(
        "cut short: the file ends before its end record; it reads to byte {}, {} events",
        cut.at_byte, cut.events
    );
    assert!(stdout(&info).contains(&want), "{}", stdout(&info));
    let info = retype(&["trace", "info", path.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["cut_short"]["at_byte"], cut.at_byte);
    assert_eq!(v["cut_short"]["events"], cut.events);
}

/// A random number for the moment of a kill.
fn random() -> u64 {
    RandomState::new().build_hasher().finish()
}

/// python3 killed at a random moment after it started: the trace reads (cut
/// short, or whole if it finished first), each thread's calls a whole prefix,
/// and its mallocs are the first of a full recording of the same run, call
/// for call.
#[test]
fn python_killed_at_a_random_moment_reads_a_prefix_of_its_full_recording() {
    let dir = scratch("python-kill");
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8(exe.stdout).unwrap().trim().to_string();
    let code = "import os\n\
                print('started', os.getpid(), flush=True)\n\
                keep = []\n\
                for i in range(600000):\n    \
                    keep.append(bytes(i % 2000))\n    \
                    if len(keep) > 2000:\n        \
                        del keep[:1000]\n\
                print('done', flush=True)\n";
    let cmd = [python.as_str(), "-c", code];
    // The same allocations on every run: a fixed hash seed, and a working
    // directory (the first entry of sys.path, listed by the importer) that
    // does not change between the runs.
    let env = [("PYTHONHASHSEED", "0")];
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let full_path = dir.join("full.rtr");
    let (child, mut out, _) = start_recording(&cwd, &full_path, &cmd, &env, "started ");
    let began = Instant::now();
    let mut done = String::new();
    out.read_line(&mut done).unwrap();
    let took = began.elapsed();
    assert_eq!(done, "done\n");
    let o = finish(child, out);
    assert!(o.status.success(), "{}", stderr(&o));
    let full = Trace::read_file(&full_path).unwrap();
    assert_eq!(full.cut_short, None);

    let delay = Duration::from_micros(random() % (took.as_micros() as u64 * 7 / 10).max(1));
    let (child, out, pid) = start_recording(&cwd, &dir.join("kill.rtr"), &cmd, &env, "started ");
    std::thread::sleep(delay);
    let killed = kill(pid);
    let o = finish(child, out);
    let t = Trace::read_file(&dir.join("kill.rtr"))
        .unwrap_or_else(|e| panic!("killed after {delay:?}: {e:#}"));
    eprintln!(
        "killed after {delay:?} of {took:?}: {} of {} events, cut short {:?} ({})",
        t.events.len(),
        full.events.len(),
        t.cut_short,
        o.status
    );
    assert!(
        killed || t.cut_short.is_none(),
        "it ended first, its trace whole"
    );
    assert_a_whole_prefix(&t);
    assert!(t.events.len() <= full.events.len());
    // The sizes the program asked malloc for, in order. (Frees and callocs
    // may follow where the kernel put memory: pymalloc callocs a node of its
    // arena map when an arena lands in a new region, so they differ between
    // runs now and then.)
    let shape = |t: &Trace| -> Vec<u64> {
        t.events
            .iter()
            .filter(|e| e.op == Op::Malloc)
            .map(|e| e.size)
            .collect()
    };
    let (got, all) = (shape(&t), shape(&full));
    assert!(got.len() <= all.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i] != all[i]) {
        panic!(
            "malloc {i} after a kill at {delay:?} asks {} bytes, the full recording's {}",
            got[i], all[i]
        );
    }
}

/// A program that prints `line I` for each of N marker calls, run under the
/// recorder with its trace at `trace` (no `retype record`: it would remove a
/// device it was given).
fn run_recorded(exe: &Path, args: &[&str], trace: &Path) -> Output {
    recorder_built();
    let lib = PathBuf::from(env!("CARGO_BIN_EXE_retype")).with_file_name("libretype_recorder.so");
    Command::new(exe)
        .args(args)
        .env("LD_PRELOAD", lib)
        .env("RETYPE_TRACE_FILE", trace)
        .output()
        .unwrap()
}

#[test]
fn a_device_that_refuses_writes_stops_the_recording_at_once() {
    let dir = scratch("dev-full");
    let exe = compile("faults.c", &dir);
    let o = run_recorded(&exe, &["exit", "20000"], Path::new("/dev/full"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_printed(&o, 20000);
    assert_eq!(
        stderr(&o),
        "retype-recorder: stopped recording: /dev/full: No space left on device\n"
    );
}

#[test]
fn an_unwritable_path_stops_the_recording_at_once() {
    let dir = scratch("unwritable");
    let exe = compile("faults.c", &dir);
    let trace = dir.join("no-such-dir/t.rtr");
    let o = run_recorded(&exe, &["exit", "2000"], &trace);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_printed(&o, 2000);
    let line = format!(
        "retype-recorder: stopped recording: {}: No such file or directory\n",
        trace.display()
    );
    assert_eq!(stderr(&o), line);
}

/// `setrlimit(RLIMIT_FSIZE)` below the trace's size: the write past it fails
/// with EFBIG instead of raising SIGXFSZ, which would kill the program.
#[test]
fn the_file_size_limit_stops_the_recording_and_not_the_program() {
    let dir = scratch("fsize");
    let exe = compile("faults.c", &dir);
    let n = 100_000;
    let (t, o) = record(
        &dir,
        "f.rtr",
        &[],
        &[exe.to_str().unwrap(), "fsize", &n.to_string()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_printed(&o, n);
    let line = format!(
        "retype-recorder: stopped recording: {}: File too large",
        dir.join("f.rtr").display()
    );
    assert_eq!(recorder_lines(&o), [line]);
    assert!(file_len(&dir.join("f.rtr")) <= 512 << 10);
    assert!(t.cut_short.is_some());
    let m = markers(&t);
    assert!(m > 0 && m < n, "{m} of {n} marker calls");
    assert_a_whole_prefix(&t);
}

/// Whether this machine lets an unprivileged user namespace mount a tmpfs.
fn can_mount_tmpfs(dir: &Path) -> bool {
    Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "mount",
            "-t",
            "tmpfs",
            "tmpfs",
        ])
        .arg(dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A full disk: a 256 KiB tmpfs (in a user and mount namespace of its own)
/// fills while the program records.
#[test]
fn a_full_disk_stops_the_recording_and_the_program_runs_on() {
    let dir = scratch("enospc");
    let exe = compile("faults.c", &dir);
    let disk = dir.join("disk");
    std::fs::create_dir(&disk).unwrap();
    if !can_mount_tmpfs(&disk) {
        eprintln!("no tmpfs can be mounted here: the full disk is tested with /dev/full only");
        return;
    }
    recorder_built();
    let n = 100_000;
    // The trace is copied out before the namespace, and its tmpfs, end.
    let script = r#"mount -t tmpfs -o size=256k tmpfs "$1" && "$2" record -o "$1/t.rtr" -- "$3" exit "$4"; s=$?; cp "$1/t.rtr" "$5"; exit $s"#;
    let o = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&disk)
        .arg(env!("CARGO_BIN_EXE_retype"))
        .arg(&exe)
        .arg(n.to_string())
        .arg(dir.join("t.rtr"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_printed(&o, n);
    let line = format!(
        "retype-recorder: stopped recording: {}: No space left on device",
        disk.join("t.rtr").display()
    );
    assert_eq!(recorder_lines(&o), [line]);
    let t = Trace::read_file(&dir.join("t.rtr")).unwrap();
    assert!(t.cut_short.is_some());
    let m = markers(&t);
    assert!(m > 0 && m < n, "{m} of {n} marker calls");
    assert_a_whole_prefix(&t);
}

/// A program that closes every descriptor and opens its own file at every
/// number: the recorder, finding its descriptor names another file, stops
/// without writing there (nor its line into a stderr that is now that file).
#[test]
fn closing_every_descriptor_never_puts_trace_bytes_in_the_programs_files() {
    let dir = scratch("closeall");
    let exe = compile("faults.c", &dir);
    let n = 20_000;
    for (mode, first) in [("closefrom3", 3), ("closeall", 0)] {
        let file = dir.join(format!("{mode}.txt"));
        let trace = format!("{mode}.rtr");
        let (t, o) = record(
            &dir,
            &trace,
            &[],
            &[
                exe.to_str().unwrap(),
                mode,
                &n.to_string(),
                file.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        let text = std::fs::read_to_string(&file).unwrap();
        let fds: Vec<usize> = text
            .lines()
            .map(|l| {
                l.strip_prefix("fd ")
                    .and_then(|k| k.parse().ok())
                    .unwrap_or_else(|| panic!("{mode}: {l:?} in the program's file"))
            })
            .collect();
        assert_eq!(
            fds,
            (first..first + fds.len()).collect::<Vec<_>>(),
            "{mode}"
        );
        assert!(fds.len() > 100, "{mode}");
        if first == 3 {
            assert_printed(&o, n);
            let lines = recorder_lines(&o);
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(
                lines[0].contains("reused the trace's descriptor"),
                "{lines:?}"
            );
        }
        assert!(t.cut_short.is_some(), "{mode}");
        assert!(markers(&t) <= n, "{mode}: only calls made before the close");
        assert_a_whole_prefix(&t);
    }
}

/// A forked child that execs: the child's own file holds its fork segment
/// and the exec'd image's, each whole; the parent's file is whole too.
#[test]
fn a_forked_child_and_its_exec_leave_whole_traces() {
    let dir = scratch("fork-exec");
    let exe = compile("faults.c", &dir);
    let (t, o) = record(
        &dir,
        "p.rtr",
        &["--json"],
        &[exe.to_str().unwrap(), "forkexec", "3000"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(recorder_lines(&o).is_empty());
    assert_eq!(t.cut_short, None);
    assert_eq!(markers(&t), 3000);
    let report: serde_json::Value =
        serde_json::from_slice(&o.stdout[o.stdout.iter().position(|&b| b == b'{').unwrap()..])
            .unwrap();
    let children = report["child_traces"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{report}");
    let child = Trace::read_file(Path::new(children[0].as_str().unwrap())).unwrap();
    assert_eq!(child.cut_short, None);
    let segments: Vec<&str> = child
        .meta
        .iter()
        .filter(|(k, _)| k == "segment")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(segments, ["fork", "exec"]);
    assert_eq!(markers(&child), 6000, "3000 before the exec, 3000 after");
    assert_eq!(child.segments.len(), 1);
    assert_a_whole_prefix(&child);
}
