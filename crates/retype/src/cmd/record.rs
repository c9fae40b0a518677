//! `retype record`: runs a program with the LD_PRELOAD recorder
//! (libretype_recorder.so) in front of the chosen allocator.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};
use retype_trace::summary::Summary;
use retype_trace::Trace;

use crate::preload::{allocator_lib, beside_exe, ld_preload, Allocator};

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
    /// Print what was recorded as JSON
    #[arg(long)]
    json: bool,
    /// The program and its arguments
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

pub fn run(a: Args) -> Result<()> {
    let recorder = beside_exe("libretype_recorder.so", "retype-recorder")?;
    let lib = allocator_lib(&a.allocator)?;
    let output = absolute(&a.output)?;
    match std::fs::remove_file(&output) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot replace {}", output.display()))
        }
        _ => {}
    }
    let preload = ld_preload([Some(recorder.as_path()), lib.as_deref()]);
    let (program, args) = a.command.split_first().context("no command to record")?;
    let before = child_traces(&output)?;
    let status = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", &preload)
        .env("RETYPE_TRACE_FILE", &output)
        .env("RETYPE_ALLOCATOR", a.allocator.to_string())
        .env(
            "RETYPE_STACK_DEPTH",
            if a.no_stacks { 0 } else { a.stack_depth }.to_string(),
        )
        .status()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
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
        let v = serde_json::json!({
            "trace": output,
            "allocator": a.allocator.to_string(),
            "events": s.events,
            "threads": s.threads.len(),
            "peak_live_bytes": s.peak_live_bytes,
            "stacks": trace.stacks.len(),
            "child_traces": children,
            "exit_status": status.code(),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        eprintln!(
            "retype: recorded {} events of {} threads into {} (allocator {}); peak live {} bytes",
            s.events,
            s.threads.len(),
            output.display(),
            a.allocator,
            s.peak_live_bytes
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
