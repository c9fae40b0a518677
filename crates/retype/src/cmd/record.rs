//! `retype record`: runs a program with the LD_PRELOAD recorder
//! (libretype_recorder.so) in front of the chosen allocator, or loads the
//! recorder into a running process (`--pid`, see `crate::attach`). Recording
//! can start paused (`--paused`) and be started and stopped while the
//! program runs: by the toggle signal (`--toggle-signal`, SIGUSR2 by
//! default), or by `start` and `stop` lines written to a named pipe
//! (`--control FIFO`), which this command turns into the signal with a value
//! that says which.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use retype_trace::recorded::windows;
use retype_trace::summary::Summary;
use retype_trace::{Kind, Trace};

use crate::attach;
use crate::preload::{allocator_lib, beside_exe, ld_preload, Allocator};

/// The value sent with the toggle signal to start recording (the recorder's `control` module)...
const START: usize = 1;
/// ... and to stop it.
const STOP: usize = 2;

#[derive(clap::Args)]
pub struct Args {
    /// The allocator the program runs on: glibc, jemalloc, mimalloc, tcmalloc,
    /// retype (libretype_malloc_preload.so), or the path of a malloc .so
    #[arg(long, default_value = "glibc")]
    allocator: Allocator,
    /// The trace to write; a forked child writes FILE.PID
    #[arg(short, long, default_value = "retype.rtr")]
    output: PathBuf,
    /// The most frames a call stack keeps (1 to 128)
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=128))]
    stack_depth: u32,
    /// Record no call stacks: the cheapest recording (no sites, leaks or flame graphs)
    #[arg(long, conflicts_with = "stack_depth")]
    no_stacks: bool,
    /// Sample the process's RSS every N ms, on its calls (0: no samples)
    #[arg(long, value_name = "N", default_value_t = 10)]
    rss_ms: u64,
    /// Measure the latency of calls N apart on average, picked at random (1:
    /// every call, which costs a second clock read a call; the rest keep 0,
    /// "not measured")
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    latency_every: u64,
    /// Print what was recorded as JSON
    #[arg(long)]
    json: bool,
    /// Keep per-stack counters and snapshots of live bytes instead of every
    /// call: a file whose size does not grow with the calls (no per-event analyses)
    #[arg(long, conflicts_with = "sample_bytes")]
    aggregate: bool,
    /// With --aggregate: a snapshot of live bytes per top stack every MS milliseconds (0: none)
    #[arg(long, value_name = "MS", requires = "aggregate", default_value_t = 100)]
    snapshot_ms: u64,
    /// Record only the allocations a Poisson process picks, BYTES apart on
    /// average (1MB, 64KiB, 4096), and the frees of those blocks; every
    /// analysis gives unbiased estimates (RETYPE_SAMPLE_SEED fixes the draws)
    #[arg(long, value_name = "BYTES", value_parser = parse_sample_bytes)]
    sample_bytes: Option<u64>,
    /// Open the trace without recording: the toggle signal or --control starts it
    #[arg(long)]
    paused: bool,
    /// The signal that starts and stops recording: USR1, USR2, HUP, WINCH, URG, PWR, or a number
    #[arg(long, value_name = "SIG", default_value = "USR2", value_parser = parse_signal)]
    toggle_signal: i32,
    /// A named pipe (made if it does not exist) whose `start` and `stop` lines start and stop recording
    #[arg(long, value_name = "FIFO", conflicts_with = "pid")]
    control: Option<PathBuf>,
    /// Record the running process PID: load the recorder into it (ptrace) and return
    #[arg(long, value_name = "PID", conflicts_with = "allocator")]
    pid: Option<i32>,
    /// With --pid: end the recording of PID (the process runs on) and report it
    #[arg(long, requires = "pid")]
    stop: bool,
    /// With --pid: record for SECS seconds, then stop
    #[arg(long, value_name = "SECS", requires = "pid", conflicts_with = "stop")]
    duration: Option<f64>,
    /// The program and its arguments
    #[arg(last = true, required_unless_present = "pid", conflicts_with = "pid")]
    command: Vec<OsString>,
}

/// `--sample-bytes`: an amount of bytes above 0.
fn parse_sample_bytes(s: &str) -> Result<u64, String> {
    match crate::sites::gate::Threshold::parse(s) {
        Ok(crate::sites::gate::Threshold::Amount(n)) if n > 0 => Ok(n),
        _ => Err(format!(
            "{s:?}: the mean gap between samples is an amount of bytes above 0 (1MB, 64KiB, 4096)"
        )),
    }
}

/// A signal by name or number; refuses those that stop, kill or report a fault.
fn parse_signal(s: &str) -> Result<i32, String> {
    let name = s.trim_start_matches("SIG");
    let sig = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        "PWR" => libc::SIGPWR,
        n => n
            .parse::<i32>()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| {
                format!("`{s}` is not a signal (USR1, USR2, HUP, WINCH, URG, PWR, or 1 to 64)")
            })?,
    };
    let refused = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGTRAP,
        libc::SIGABRT,
    ];
    if refused.contains(&sig) {
        return Err(format!(
            "signal {sig} cannot toggle recording (it stops, kills or reports a fault)"
        ));
    }
    Ok(sig)
}

pub fn run(a: Args) -> Result<()> {
    if let Some(pid) = a.pid {
        return record_pid(&a, pid);
    }
    let recorder = beside_exe("libretype_recorder.so", "retype-recorder")?;
    let lib = allocator_lib(&a.allocator)?;
    let output = absolute(&a.output)?;
    remove_old(&output)?;
    let preload = ld_preload([Some(recorder.as_path()), lib.as_deref()]);
    let (program, args) = a.command.split_first().context("no command to record")?;
    let before = child_traces(&output)?;
    let fifo = a.control.as_deref().map(Fifo::open).transpose()?;
    let mut child = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", &preload)
        .envs(settings(&a, &output))
        .env("RETYPE_ALLOCATOR", a.allocator.to_string())
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    if let Some(fifo) = &fifo {
        fifo.serve(child.id() as i32, a.toggle_signal)?;
    }
    let status = child.wait()?;
    drop(fifo);
    if !output.exists() {
        bail!(
            "{} wrote no trace to {} (did it run with LD_PRELOAD?)",
            program.to_string_lossy(),
            output.display()
        );
    }
    let children: Vec<PathBuf> = child_traces(&output)?
        .into_iter()
        .filter(|c| !before.contains(c))
        .map(|(path, _)| path)
        .collect();
    let trace = Trace::read_file(&output)?;
    let s = Summary::of(&trace);
    if a.json {
        let mut v = serde_json::json!({
            "trace": output,
            "allocator": a.allocator.to_string(),
            "events": s.events,
            "threads": s.threads.len(),
            "peak_live_bytes": s.peak_live_bytes,
            "stacks": trace.stacks.len(),
            "child_traces": children,
            "exit_status": status.code(),
        });
        v["windows"] = windows(&trace).len().into();
        v["recording"] = s.kind.name().into();
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let what = match s.kind {
            Kind::Full => format!("{} events", s.events),
            Kind::Aggregate => format!("the counters of {} stacks", trace.stacks.len() + 1),
            Kind::Sampled { mean_bytes } => {
                format!("{} sampled events (every {mean_bytes} bytes)", s.events)
            }
        };
        eprintln!(
            "retype: recorded {what} of {} threads into {} (allocator {}); peak live {} bytes{}",
            s.threads.len(),
            output.display(),
            a.allocator,
            s.peak_live_bytes,
            in_windows(&trace)
        );
        for c in &children {
            eprintln!("retype: child process trace {}", c.display());
        }
    }
    if !status.success() {
        bail!("{} exited with {status}", program.to_string_lossy());
    }
    Ok(())
}

/// The recorder's settings that `a` asks for, as its variables (docs/environment.md).
fn settings(a: &Args, output: &Path) -> Vec<(&'static str, OsString)> {
    let mut v = vec![
        ("RETYPE_TRACE_FILE", output.as_os_str().to_owned()),
        (
            "RETYPE_STACK_DEPTH",
            if a.no_stacks { 0 } else { a.stack_depth }
                .to_string()
                .into(),
        ),
        ("RETYPE_TOGGLE_SIGNAL", a.toggle_signal.to_string().into()),
        ("RETYPE_RSS_MS", a.rss_ms.to_string().into()),
        ("RETYPE_LATENCY_EVERY", a.latency_every.to_string().into()),
    ];
    if a.paused {
        v.push(("RETYPE_PAUSED", "1".into()));
    }
    if a.aggregate {
        v.push(("RETYPE_AGGREGATE", "1".into()));
        v.push(("RETYPE_SNAPSHOT_MS", a.snapshot_ms.to_string().into()));
    }
    if let Some(n) = a.sample_bytes {
        v.push(("RETYPE_SAMPLE_BYTES", n.to_string().into()));
    }
    v
}

/// `; in N windows` when recording was started and stopped.
fn in_windows(trace: &Trace) -> String {
    match windows(trace).len() {
        0 => String::new(),
        1 => "; in 1 recording window".to_string(),
        n => format!("; in {n} recording windows"),
    }
}

/// Makes room for the trace at `output`: its directory must exist, and what is there already
/// is replaced only if it is a regular file (never a device, a pipe or a directory, which the
/// recorder would otherwise remove or write into).
fn remove_old(output: &Path) -> Result<()> {
    let dir = output.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        bail!(
            "cannot write the trace {}: no directory {}",
            output.display(),
            dir.display()
        );
    }
    match std::fs::symlink_metadata(output) {
        Ok(m) if !m.file_type().is_file() => bail!(
            "{} exists and is not a regular file: give the trace another path",
            output.display()
        ),
        Ok(_) => std::fs::remove_file(output)
            .with_context(|| format!("cannot replace {}", output.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot write the trace {}", output.display())),
    }
}

/// `retype record --pid PID`: loads the recorder into PID and starts
/// recording; with `--stop`, ends it; with `--duration`, both.
fn record_pid(a: &Args, pid: i32) -> Result<()> {
    if a.stop {
        return stop_pid(a, pid);
    }
    let recorder = beside_exe("libretype_recorder.so", "retype-recorder")?;
    let output = absolute(&a.output)?;
    remove_old(&output)?;
    let mut config = String::new();
    for (k, v) in settings(a, &output) {
        let v = v.to_str().context("the trace's path is not UTF-8")?;
        if v.contains('\n') {
            bail!("the trace's path holds a newline");
        }
        config.push_str(&format!("{k}={v}\n"));
    }
    attach::attach(pid, &recorder, &config)?;
    match a.duration {
        Some(secs) => {
            std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
            stop_pid(a, pid)
        }
        None => {
            let how = if a.paused {
                "paused: the toggle signal starts it"
            } else {
                "recording"
            };
            if a.json {
                let v = serde_json::json!({"pid": pid, "trace": output, "paused": a.paused});
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                eprintln!(
                    "retype: process {pid} records into {} ({how}); `retype record --pid {pid} --stop` ends it",
                    output.display()
                );
            }
            Ok(())
        }
    }
}

/// `retype record --pid PID --stop`: ends PID's recording and reports it.
fn stop_pid(a: &Args, pid: i32) -> Result<()> {
    let output = attach::detach(pid)?;
    let trace = Trace::read_file(&output)?;
    let s = Summary::of(&trace);
    if a.json {
        let v = serde_json::json!({
            "pid": pid,
            "trace": output,
            "events": s.events,
            "threads": s.threads.len(),
            "peak_live_bytes": s.peak_live_bytes,
            "stacks": trace.stacks.len(),
            "windows": windows(&trace).len(),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        eprintln!(
            "retype: recorded {} events of {} threads of process {pid} into {}; peak live {} bytes{}; the process runs on",
            s.events,
            s.threads.len(),
            output.display(),
            s.peak_live_bytes,
            in_windows(&trace)
        );
    }
    Ok(())
}

/// `--control FIFO`: the named pipe whose lines start and stop recording;
/// removed at the end if this command made it.
struct Fifo {
    path: PathBuf,
    made: bool,
}

impl Fifo {
    /// Makes the pipe at `path`, or takes the one there.
    fn open(path: &Path) -> Result<Fifo> {
        use std::os::unix::fs::FileTypeExt;
        match std::fs::metadata(path) {
            Ok(m) if m.file_type().is_fifo() => Ok(Fifo {
                path: path.to_path_buf(),
                made: false,
            }),
            Ok(_) => bail!("{} exists and is not a named pipe", path.display()),
            Err(_) => {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                    .context("the pipe's path holds a NUL")?;
                // SAFETY: `c` is NUL-terminated.
                if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                    return Err(std::io::Error::last_os_error())
                        .with_context(|| format!("cannot make the named pipe {}", path.display()));
                }
                Ok(Fifo {
                    path: path.to_path_buf(),
                    made: true,
                })
            }
        }
    }

    /// Reads the pipe's lines in a thread, signalling `pid` with `sig` and
    /// the value that says start or stop; says so of a line it does not know.
    fn serve(&self, pid: i32, sig: i32) -> Result<()> {
        // Read and write: the pipe never reads as ended when a writer closes.
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&self.path)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        let name = self.path.display().to_string();
        std::thread::spawn(move || {
            for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
                let Ok(line) = line else { return };
                let value = match line.trim() {
                    "start" => START,
                    "stop" => STOP,
                    "" => continue,
                    other => {
                        eprintln!("retype: {name}:{}: `{other}` is not start or stop", n + 1);
                        continue;
                    }
                };
                let v = libc::sigval {
                    sival_ptr: value as *mut libc::c_void,
                };
                // SAFETY: sigqueue sends a signal with a value; nothing is shared.
                unsafe { libc::sigqueue(pid, sig, v) };
                handled(pid, sig);
            }
        });
        Ok(())
    }
}

/// Waits (a while at most) until process `pid` has taken signal `sig`: a
/// signal sent while the same one is pending is lost, and so would be a
/// `stop` that follows a `start` closely.
fn handled(pid: i32, sig: i32) {
    let bit = 1u64 << (sig - 1);
    let pending = |key: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let start = std::time::Instant::now();
    while pending("ShdPnd:").is_some_and(|p| p & bit != 0)
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// The traces of child processes, `FILE.PID` and `FILE.PID.N`, with their
/// modification times (to tell this run's from older ones).
fn child_traces(output: &Path) -> Result<Vec<(PathBuf, Option<SystemTime>)>> {
    let dir = output.parent().unwrap_or(Path::new("."));
    let name = output
        .file_name()
        .context("trace path has no file name")?
        .to_string_lossy()
        .into_owned();
    let prefix = format!("{name}.");
    let is_child = |n: &str| {
        n.strip_prefix(&prefix).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    let mut found: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| is_child(&e.file_name().to_string_lossy()))
        .map(|e| (e.path(), e.metadata().and_then(|m| m.modified()).ok()))
        .collect();
    found.sort();
    Ok(found)
}
