//! Seed 003's experiment (TLM, Coleman and Zalewski 2013): allocators judged
//! for real-time use by per-thread timing.
//!
//! N worker threads each allocate, touch and free blocks of one size in
//! growing rounds, then in steady rounds at the largest size
//! ([`workload::Plan`]). Each configuration runs under every allocator in
//! turn (allocators alternate run by run), three ways:
//!
//! - **plain** (`LD_PRELOAD` = the allocator): the workers' own timers after
//!   every round give lifetime, user, kernel and wait time ([`times`]), as
//!   TLM's did; no recorder's cost counts as the allocator's;
//! - **recorded** (the recorder in front of the allocator, as `retype
//!   record` runs it): every worker's calls are checked against the plan
//!   call for call and the latency of each call of the steady rounds is kept
//!   ([`calls`]);
//! - **under strace**, once: the calls that map or return memory
//!   ([`syscalls`]).
//!
//! [`row::Row`] gathers them per allocator, thread count and size.

pub mod calls;
pub mod goals;
pub mod row;
pub mod syscalls;
pub mod times;
pub mod workload;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd::record::{allocator_lib, beside_exe, ld_preload, Allocator};
use crate::progress::Progress;
use row::{Row, Runs};
use workload::Plan;

/// What a study runs.
pub struct Config {
    pub allocators: Vec<Allocator>,
    pub threads: Vec<u32>,
    pub sizes: Vec<u64>,
    pub rounds: u32,
    pub steady: u32,
    pub blocks: u32,
    /// Plain and recorded runs of each configuration.
    pub runs: u32,
    /// Count system calls under strace.
    pub syscalls: bool,
}

impl Config {
    /// Every configuration of the workload, thread count first.
    pub fn plans(&self) -> Vec<Plan> {
        let mut out = Vec::new();
        for &threads in &self.threads {
            for &size in &self.sizes {
                out.push(Plan {
                    threads,
                    size,
                    rounds: self.rounds,
                    steady: self.steady,
                    blocks: self.blocks,
                });
            }
        }
        out
    }
}

/// A directory of this process's, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let d = std::env::temp_dir().join(format!("retype-tlm-run-{}", std::process::id()));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Ok(Scratch(d))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the study; one row per allocator, thread count and size, in the
/// order of the plans, allocators in the order given.
pub fn run(c: &Config) -> Result<Vec<Row>> {
    if c.syscalls && !syscalls::available() {
        bail!("strace is needed to count system calls: install it (scripts/install-deps strace), or pass --no-syscalls");
    }
    let exe = workload::build()?;
    let recorder = beside_exe("libretype_recorder.so", "retype-recorder")?;
    let libs = c
        .allocators
        .iter()
        .map(allocator_lib)
        .collect::<Result<Vec<_>>>()?;
    let scratch = Scratch::new()?;
    let plans = c.plans();
    let mut runs: Vec<Vec<Runs>> = plans
        .iter()
        .map(|_| c.allocators.iter().map(|_| Runs::default()).collect())
        .collect();
    let steps = c.runs as usize * plans.len() * c.allocators.len();
    let mut progress = Progress::new(steps as u64, "study tlm");
    for run in 0..c.runs {
        for (p, plan) in plans.iter().enumerate() {
            for (a, allocator) in c.allocators.iter().enumerate() {
                progress.step(&format!(
                    "{allocator}, {} threads, {} B, run {}",
                    plan.threads,
                    plan.size,
                    run + 1
                ));
                let lib = libs[a].as_deref();
                let r = &mut runs[p][a];
                let what = || format!("{allocator}, {} threads, {} B", plan.threads, plan.size);
                let plain = ld_preload([lib]);
                let out =
                    workload::run(&exe, plan, &[("LD_PRELOAD", &plain)]).with_context(what)?;
                r.plain
                    .push(workload::parse(&out, plan).with_context(what)?);
                let recorded =
                    record(&exe, plan, &recorder, lib, allocator, &scratch.0).with_context(what)?;
                r.recorded_calls.push(recorded.calls);
                r.latencies.extend(recorded.steady_latencies);
                if run == 0 && c.syscalls {
                    let log = scratch.0.join("strace.txt");
                    r.syscalls =
                        Some(syscalls::count(&exe, plan, &plain, &log).with_context(what)?);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for (plan, per_allocator) in plans.iter().zip(runs) {
        for (allocator, r) in c.allocators.iter().zip(per_allocator) {
            rows.push(Row::of(&allocator.to_string(), plan, r));
        }
    }
    Ok(rows)
}

/// One recorded run of `plan` on `lib`, checked against the plan.
fn record(
    exe: &Path,
    plan: &Plan,
    recorder: &Path,
    lib: Option<&Path>,
    allocator: &Allocator,
    dir: &Path,
) -> Result<calls::Recorded> {
    let trace = dir.join("tlm.rtr");
    match std::fs::remove_file(&trace) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot replace {}", trace.display()))
        }
        _ => {}
    }
    let name = allocator.to_string();
    let out = workload::run(
        exe,
        plan,
        &[
            ("LD_PRELOAD", &ld_preload([Some(recorder), lib])),
            ("RETYPE_TRACE_FILE", trace.as_os_str()),
            ("RETYPE_ALLOCATOR", OsStr::new(&name)),
        ],
    )?;
    let workers = workload::parse(&out, plan)?;
    let tids: Vec<u32> = workers.iter().map(|w| w.tid).collect();
    let recorded = calls::check(&trace, plan, &tids)?;
    std::fs::remove_file(&trace).ok();
    Ok(recorded)
}
