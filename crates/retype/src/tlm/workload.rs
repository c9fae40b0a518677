//! The TLM workload, `bench/src/tlm.c`: its plan (which calls each worker
//! makes), building it, and reading the samples it prints.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

/// The program's source, built by the study when needed.
const SOURCE: &str = include_str!("../../../../bench/src/tlm.c");

/// One configuration of the workload: every worker runs `rounds` growing
/// rounds of `k × blocks` blocks (k = 1..rounds), then `steady` rounds of
/// `rounds × blocks` blocks, each block of `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub threads: u32,
    pub size: u64,
    pub rounds: u32,
    pub steady: u32,
    pub blocks: u32,
}

impl Plan {
    /// The blocks round `k` (1-based) allocates and frees.
    pub fn blocks_in(&self, k: u32) -> u64 {
        u64::from(k.min(self.rounds)) * u64::from(self.blocks)
    }

    /// Every round, 1-based.
    pub fn all_rounds(&self) -> std::ops::RangeInclusive<u32> {
        1..=self.rounds + self.steady
    }

    /// Whether round `k` is a steady one (the program's memory no longer grows).
    pub fn is_steady(&self, k: u32) -> bool {
        k > self.rounds
    }

    /// The bytes all workers hold at most: each its largest round's blocks.
    pub fn peak_bytes(&self) -> u64 {
        u64::from(self.threads) * self.blocks_in(self.rounds) * self.size
    }

    /// The mallocs one worker makes (as many frees follow).
    pub fn mallocs_per_thread(&self) -> u64 {
        self.all_rounds().map(|k| self.blocks_in(k)).sum()
    }

    /// The program's arguments.
    pub fn args(&self) -> [String; 5] {
        [
            self.threads.to_string(),
            self.size.to_string(),
            self.rounds.to_string(),
            self.steady.to_string(),
            self.blocks.to_string(),
        ]
    }
}

/// The built program: compiled once per source into the temporary
/// directory, so an installed `retype` needs only a C compiler (`$CC`, else
/// `cc`).
pub fn build() -> Result<PathBuf> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    SOURCE.hash(&mut h);
    let dir = std::env::temp_dir().join(format!("retype-tlm-{:016x}", h.finish()));
    let exe = dir.join("tlm");
    if exe.is_file() {
        return Ok(exe);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let src = dir.join("tlm.c");
    std::fs::write(&src, SOURCE).with_context(|| format!("cannot write {}", src.display()))?;
    // Built under a name of its own, then renamed: runs in parallel never
    // see half a program.
    let part = dir.join(format!("tlm.{}", std::process::id()));
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = Command::new(&cc)
        .args(["-O2", "-pthread", "-o"])
        .arg(&part)
        .arg(&src)
        .output()
        .with_context(|| {
            format!(
                "cannot run the C compiler {:?} to build the TLM workload (install gcc)",
                cc
            )
        })?;
    if !out.status.success() {
        bail!(
            "cannot build the TLM workload {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::rename(&part, &exe).with_context(|| format!("cannot write {}", exe.display()))?;
    Ok(exe)
}

/// What a worker's timers said at the start (round 0) or after a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub round: u32,
    pub blocks: u64,
    /// CLOCK_MONOTONIC.
    pub mono_ns: u64,
    /// CLOCK_THREAD_CPUTIME_ID: the thread's CPU time, exact.
    pub cpu_ns: u64,
    /// getrusage(RUSAGE_THREAD): user and system time as the kernel splits them.
    pub user_us: u64,
    pub sys_us: u64,
    pub minor_faults: u64,
}

/// One worker's samples, round 0 first.
#[derive(Clone, Debug)]
pub struct Worker {
    pub tid: u32,
    pub samples: Vec<Sample>,
}

/// Reads the program's output for `plan`: every worker with a sample per
/// round, in order, with the blocks the plan gives.
pub fn parse(text: &str, plan: &Plan) -> Result<Vec<Worker>> {
    let mut lines = text.lines();
    let header = format!(
        "tlm threads={} size={} rounds={} steady={} blocks={}",
        plan.threads, plan.size, plan.rounds, plan.steady, plan.blocks
    );
    ensure!(
        lines.next() == Some(header.as_str()),
        "the TLM workload's output does not start with {header:?}"
    );
    let mut workers: Vec<Worker> = Vec::new();
    for (i, line) in lines.enumerate() {
        let bad = || format!("line {} of the TLM workload's output: {line:?}", i + 2);
        let f: Vec<u64> = line
            .strip_prefix("sample ")
            .with_context(bad)?
            .split(' ')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(bad)?;
        ensure!(f.len() == 9, "{}: 9 numbers expected", bad());
        let (thread, tid) = (f[0] as usize, f[1] as u32);
        if thread == workers.len() {
            workers.push(Worker {
                tid,
                samples: Vec::new(),
            });
        }
        let w = workers.get_mut(thread).with_context(bad)?;
        let round = w.samples.len() as u32;
        let s = Sample {
            round: f[2] as u32,
            blocks: f[3],
            mono_ns: f[4],
            cpu_ns: f[5],
            user_us: f[6],
            sys_us: f[7],
            minor_faults: f[8],
        };
        let blocks = if round == 0 { 0 } else { plan.blocks_in(round) };
        ensure!(
            w.tid == tid && s.round == round && s.blocks == blocks,
            "{}: expected thread {thread}'s round {round} of {blocks} blocks",
            bad()
        );
        w.samples.push(s);
    }
    ensure!(
        workers.len() == plan.threads as usize
            && workers
                .iter()
                .all(|w| w.samples.len() == plan.rounds as usize + plan.steady as usize + 1),
        "the TLM workload printed {} of {} threads' samples, or not every round",
        workers.len(),
        plan.threads
    );
    Ok(workers)
}

/// Runs `exe` for `plan` with `env` and returns its standard output.
pub fn run(exe: &Path, plan: &Plan, env: &[(&str, &std::ffi::OsStr)]) -> Result<String> {
    run_command(
        Command::new(exe)
            .args(plan.args())
            .envs(env.iter().copied()),
    )
}

/// Runs `cmd`, failing with its standard error when it fails.
pub fn run_command(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("the TLM workload printed something other than text")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: Plan = Plan {
        threads: 2,
        size: 4096,
        rounds: 3,
        steady: 2,
        blocks: 4,
    };

    #[test]
    fn rounds_grow_then_stay_at_the_largest() {
        let n: Vec<u64> = PLAN.all_rounds().map(|k| PLAN.blocks_in(k)).collect();
        assert_eq!(n, [4, 8, 12, 12, 12]);
        assert_eq!(PLAN.mallocs_per_thread(), 48);
        assert!(!PLAN.is_steady(3) && PLAN.is_steady(4));
    }

    #[test]
    fn the_program_prints_every_round_of_every_thread() {
        let exe = build().unwrap();
        let text = run(&exe, &PLAN, &[]).unwrap();
        let w = parse(&text, &PLAN).unwrap();
        assert_eq!(w.len(), 2);
        assert_ne!(w[0].tid, w[1].tid);
        for s in w.iter().flat_map(|w| w.samples.windows(2)) {
            assert!(s[1].mono_ns >= s[0].mono_ns && s[1].cpu_ns >= s[0].cpu_ns);
        }
    }

    #[test]
    fn output_that_breaks_the_plan_is_refused() {
        let good = "tlm threads=1 size=4096 rounds=1 steady=0 blocks=2\nsample 0 7 0 0 1 1 0 0 0\nsample 0 7 1 2 9 5 3 1 2\n";
        let plan = Plan {
            threads: 1,
            rounds: 1,
            steady: 0,
            blocks: 2,
            ..PLAN
        };
        assert!(parse(good, &plan).is_ok());
        let short = good.replace("sample 0 7 1 2 9 5 3 1 2\n", "");
        assert!(parse(&short, &plan).is_err());
        let wrong_blocks = good.replace(" 1 2 9", " 1 3 9");
        assert!(parse(&wrong_blocks, &plan)
            .unwrap_err()
            .to_string()
            .contains("round 1 of 2 blocks"));
        assert!(parse(good, &PLAN).is_err(), "another plan's header");
    }
}
