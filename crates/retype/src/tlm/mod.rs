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
//!   ([`syscalls`]);
//! - **with snapshots**, once: the allocator's address space at the peak,
//!   from `/proc/PID/smaps` ([`space`]).
//!
//! [`row::Row`] gathers them per allocator, thread count and size.
//!
//! With [`Config::reserve`], retype-malloc runs a second time as a real-time
//! program would set it up (issue 17 point 4): with `RETYPE_MALLOC_RESERVE`
//! sized for the configuration ([`reserve_for`]), so its memory is mapped and
//! faulted in before the workers start; its rows are [`goals::RESERVED`]'s.

pub mod calls;
pub mod goals;
pub mod row;
pub mod space;
pub mod syscalls;
pub mod times;
pub mod workload;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::preload::{allocator_lib, beside_exe, ld_preload, Allocator, Named};
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
    /// Also run retype-malloc with a reserve (see the module's doc).
    pub reserve: bool,
}

/// What one run is given: an allocator's name, its library (none: glibc), and
/// whether it runs with a reserve.
struct Entry {
    name: String,
    lib: Option<PathBuf>,
    reserve: bool,
}

/// The reserve retype-malloc is given for `plan`: twice the bytes its workers
/// hold at most (blocks, their pages' slack, and the heaps' pages of other
/// classes fit), and 32 MiB for the program's own and the threads' start-up.
pub fn reserve_for(plan: &Plan) -> u64 {
    2 * plan.peak_bytes() + (32 << 20)
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

/// An allocator's name in the rows: a library given by its path is named by
/// its file (`libhoard.so`), which the tables have room for.
fn entry_name(a: &Allocator) -> String {
    match a {
        Allocator::Library(path) => path
            .file_name()
            .map_or_else(|| a.to_string(), |f| f.to_string_lossy().into_owned()),
        Allocator::Named(_) => a.to_string(),
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
    let mut entries = Vec::new();
    for a in &c.allocators {
        entries.push(Entry {
            name: entry_name(a),
            lib: allocator_lib(a)?,
            reserve: false,
        });
    }
    if c.reserve {
        entries.push(Entry {
            name: goals::RESERVED.into(),
            lib: allocator_lib(&Allocator::Named(Named::Retype))?,
            reserve: true,
        });
    }
    let scratch = Scratch::new()?;
    let plans = c.plans();
    let mut runs: Vec<Vec<Runs>> = plans
        .iter()
        .map(|_| entries.iter().map(|_| Runs::default()).collect())
        .collect();
    let steps = c.runs as usize * plans.len() * entries.len();
    let mut progress = Progress::new(steps as u64, "study tlm");
    for run in 0..c.runs {
        for (p, plan) in plans.iter().enumerate() {
            let reserve = OsString::from(reserve_for(plan).to_string());
            for (e, entry) in entries.iter().enumerate() {
                let name = &entry.name;
                progress.step(&format!(
                    "{name}, {} threads, {} B, run {}",
                    plan.threads,
                    plan.size,
                    run + 1
                ));
                let lib = entry.lib.as_deref();
                let r = &mut runs[p][e];
                let what = || format!("{name}, {} threads, {} B", plan.threads, plan.size);
                let plain = ld_preload([lib]);
                let extra: &[(&str, &OsStr)] = if entry.reserve {
                    &[("RETYPE_MALLOC_RESERVE", &reserve)]
                } else {
                    &[]
                };
                let env = [&[("LD_PRELOAD", plain.as_os_str())], extra].concat();
                let out = workload::run(&exe, plan, &env).with_context(what)?;
                r.plain
                    .push(workload::parse(&out, plan).with_context(what)?);
                let recorded = record(&exe, plan, &recorder, lib, extra, name, &scratch.0)
                    .with_context(what)?;
                r.recorded_calls.push(recorded.calls);
                r.latencies.extend(recorded.steady_latencies);
                r.descheduled.push(recorded.descheduled);
                if run == 0 && c.syscalls {
                    let log = scratch.0.join("strace.txt");
                    r.syscalls =
                        Some(syscalls::count(&exe, plan, &plain, extra, &log).with_context(what)?);
                }
                if run == 0 {
                    r.space =
                        Some(space::measure(&exe, plan, &env, &scratch.0).with_context(what)?);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for (plan, per_entry) in plans.iter().zip(runs) {
        for (entry, r) in entries.iter().zip(per_entry) {
            rows.push(Row::of(&entry.name, plan, r));
        }
    }
    Ok(rows)
}

/// One recorded run of `plan` on `lib` (none: glibc), with the variables
/// `extra` set too, checked against the plan.
fn record(
    exe: &Path,
    plan: &Plan,
    recorder: &Path,
    lib: Option<&Path>,
    extra: &[(&str, &OsStr)],
    name: &str,
    dir: &Path,
) -> Result<calls::Recorded> {
    let trace = dir.join("tlm.rtr");
    match std::fs::remove_file(&trace) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot replace {}", trace.display()))
        }
        _ => {}
    }
    let preload = ld_preload([Some(recorder), lib]);
    let env = [
        &[
            ("LD_PRELOAD", preload.as_os_str()),
            ("RETYPE_TRACE_FILE", trace.as_os_str()),
            ("RETYPE_ALLOCATOR", OsStr::new(name)),
            // Its percentiles and maxima are of every call.
            ("RETYPE_LATENCY_EVERY", OsStr::new("1")),
        ],
        extra,
    ]
    .concat();
    let out = workload::run(exe, plan, &env)?;
    let workers = workload::parse(&out, plan)?;
    let tids: Vec<u32> = workers.iter().map(|w| w.tid).collect();
    let recorded = calls::check(&trace, plan, &tids)?;
    std::fs::remove_file(&trace).ok();
    Ok(recorded)
}
