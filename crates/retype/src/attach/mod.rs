//! Recording a process that was started without the recorder (`retype record
//! --pid`), as heaptrack's `-p` and memray's `attach` do: its main thread is
//! stopped with ptrace at a safe point ([`ptrace`]), made to call `dlopen` on
//! libretype_recorder.so and then the recorder's `retype_attach` with the
//! settings, and let run on; the recorder then redirects the program's calls
//! to itself (it rewrites the loaded objects' GOT slots: a library loaded
//! late is not in the symbol lookup order that LD_PRELOAD uses). `--stop`
//! calls `retype_detach` the same way: the trace ends, the calls go to the
//! allocator again, and the process runs on.
//!
//! - [`symbols`]: the objects a process has loaded and the functions they export;
//! - [`why`]: why a process may not be traced, and how to allow it;
//! - [`ptrace`]: one stopped thread and the calls made in it.

mod ptrace;
mod symbols;
mod why;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use self::ptrace::Tracee;
use self::symbols::Loaded;

/// The recorder's file name.
const RECORDER: &str = "libretype_recorder.so";
/// `dlopen`'s RTLD_NOW.
const RTLD_NOW: u64 = 2;

/// Loads `recorder` into process `pid` (if it is not there) and starts
/// recording with `config` (the recorder's variables, `NAME=VALUE` lines).
pub fn attach(pid: i32, recorder: &Path, config: &str) -> Result<()> {
    let objects = symbols::loaded(pid).map_err(|e| not_found(pid).unwrap_or(e))?;
    let libc = symbols::find(&objects, is_libc).ok_or_else(|| {
        anyhow!("process {pid} has no C library loaded (a static program cannot load the recorder)")
    })?;
    let mut tracee = seize(pid, &objects)?;
    if symbols::find(&objects, |n| n == RECORDER).is_none() {
        let dlopen = ["dlopen", "__libc_dlopen_mode"]
            .iter()
            .find_map(|name| symbols::address(pid, libc, name).transpose())
            .transpose()?
            .ok_or_else(|| anyhow!("{} exports no dlopen", libc.path.display()))?;
        let path = tracee.put(&nul(recorder.as_os_str().as_encoded_bytes()))?;
        if tracee.call(dlopen, &[path, RTLD_NOW])? == 0 {
            let why = dlerror(pid, libc, &mut tracee).unwrap_or_default();
            tracee.release()?;
            bail!("process {pid} could not load {}: {why}", recorder.display());
        }
    }
    let recorder_in = recorder_of(pid)?;
    let entry = entry(pid, &recorder_in, "retype_attach")?;
    let text = tracee.put(&nul(config.as_bytes()))?;
    let rc = tracee.call(entry, &[text])? as i64;
    tracee.release()?;
    match rc {
        0 => Ok(()),
        -1 => bail!(
            "process {pid} runs with the recorder preloaded (retype record): its toggle signal \
             starts and stops recording (kill -USR2 {pid})"
        ),
        -2 => bail!(
            "process {pid} was recorded by --pid before: the recorder attaches once per process \
             (start a program under `retype record --paused` to record it in many windows)"
        ),
        -3 => bail!("process {pid} could not create the trace (its standard error says why)"),
        -4 => {
            bail!("process {pid} makes no malloc-family call through a GOT slot: nothing to record")
        }
        rc => bail!("the recorder in process {pid} refused to attach ({rc})"),
    }
}

/// Ends the recording of process `pid` (the trace is complete; the process
/// runs on); returns the trace's path.
pub fn detach(pid: i32) -> Result<PathBuf> {
    let objects = symbols::loaded(pid).map_err(|e| not_found(pid).unwrap_or(e))?;
    let recorder = recorder_of(pid)?;
    let entry = entry(pid, &recorder, "retype_detach")?;
    let mut tracee = seize(pid, &objects)?;
    const CAP: usize = 4096;
    let buf = tracee.put(&[0; CAP])?;
    let n = tracee.call(entry, &[buf, CAP as u64])? as i64;
    let path = if n > 0 {
        tracee.get(buf, n as usize)?
    } else {
        Vec::new()
    };
    tracee.release()?;
    if n < 0 {
        bail!("process {pid} is not being recorded (retype record --pid {pid} starts it)");
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&path).into_owned()))
}

/// Seizes process `pid`'s main thread at a safe point, or says why it may
/// not be traced. Unsafe to stop in: the C library, the loader, and a
/// preloaded allocator (jemalloc, tcmalloc, mimalloc, ours), whose locks a
/// `dlopen` would take.
fn seize(pid: i32, objects: &[Loaded]) -> Result<Tracee> {
    let unsafe_code: Vec<(u64, u64)> = objects
        .iter()
        .filter(|o| {
            o.path.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                is_libc(&n) || is_loader(&n) || n.contains("malloc")
            })
        })
        .flat_map(|o| o.code.iter().copied())
        .collect();
    Tracee::seize(pid, &unsafe_code).map_err(|e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => anyhow!(why::refused(pid, io)),
        None => e,
    })
}

/// The recorder as loaded in process `pid`.
fn recorder_of(pid: i32) -> Result<Loaded> {
    symbols::find(&symbols::loaded(pid)?, |n| n == RECORDER)
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "the recorder is not loaded in process {pid} (retype record --pid {pid} loads it)"
            )
        })
}

/// The address of the recorder's function `name` in process `pid`.
fn entry(pid: i32, recorder: &Loaded, name: &str) -> Result<u64> {
    symbols::address(pid, recorder, name)?.with_context(|| {
        format!(
            "{} exports no {name}: is it this retype's recorder?",
            recorder.path.display()
        )
    })
}

/// `dlerror()` in the process: why its dlopen failed.
fn dlerror(pid: i32, libc: &Loaded, tracee: &mut Tracee) -> Option<String> {
    let f = symbols::address(pid, libc, "dlerror").ok()??;
    let text = tracee.call(f, &[]).ok().filter(|&p| p != 0)?;
    let bytes = tracee.get(text, 512).ok()?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// "no process PID" when `/proc` does not know it.
fn not_found(pid: i32) -> Option<anyhow::Error> {
    (!Path::new(&format!("/proc/{pid}")).exists()).then(|| anyhow!("no process {pid}"))
}

fn is_libc(name: &str) -> bool {
    name.starts_with("libc.so") || name.starts_with("libc-") || name.starts_with("ld-musl")
}

fn is_loader(name: &str) -> bool {
    name.starts_with("ld-linux") || name.starts_with("ld-2.") || name == "ld.so"
}

fn nul(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.push(0);
    v
}
