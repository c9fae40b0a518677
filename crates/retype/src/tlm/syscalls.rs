//! The system calls that map or return memory, counted in a separate run
//! under `strace -f` (ptrace, no seccomp filter): each worker names its
//! phases (`prctl(PR_SET_NAME, "tlm-grow" | "tlm-steady" | "tlm-done")`), so
//! the calls each worker makes in its rounds, and in its steady rounds, are
//! told apart from the main thread's (thread stacks) and the exit's.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

use super::workload::{self, Plan};

/// Calls of each kind, summed over the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub mmap: u64,
    pub munmap: u64,
    pub mremap: u64,
    pub madvise: u64,
    pub mprotect: u64,
    pub brk: u64,
    pub total: u64,
}

impl Counts {
    /// Counts one call named `name`; false if it is not one that maps or
    /// returns memory.
    fn add(&mut self, name: &str) -> bool {
        let slot = match name {
            "mmap" => &mut self.mmap,
            "munmap" => &mut self.munmap,
            "mremap" => &mut self.mremap,
            "madvise" => &mut self.madvise,
            "mprotect" => &mut self.mprotect,
            "brk" => &mut self.brk,
            _ => return false,
        };
        *slot += 1;
        self.total += 1;
        true
    }
}

/// The workers' calls over all their rounds, and over the steady ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Syscalls {
    pub rounds: Counts,
    pub steady: Counts,
}

/// What `strace -e trace=…` follows.
const TRACED: &str = "trace=mmap,munmap,mremap,madvise,mprotect,brk,prctl";

/// Whether strace can be run.
pub fn available() -> bool {
    Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `exe` for `plan` with `LD_PRELOAD=preload` and the variables `extra`
/// under strace, the trace written to `log`, and counts the workers' calls.
pub fn count(
    exe: &Path,
    plan: &Plan,
    preload: &OsStr,
    extra: &[(&str, &OsStr)],
    log: &Path,
) -> Result<Syscalls> {
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", TRACED, "-o"]).arg(log);
    for (k, v) in [("LD_PRELOAD", preload)].iter().chain(extra) {
        let mut var = std::ffi::OsString::from(k);
        var.push("=");
        var.push(v);
        cmd.arg("-E").arg(var);
    }
    workload::run_command(cmd.arg(exe).args(plan.args()))
        .context("counting system calls under strace (install it: scripts/install-deps strace)")?;
    let text =
        std::fs::read_to_string(log).with_context(|| format!("cannot read {}", log.display()))?;
    let (s, finished) = parse(&text)?;
    ensure!(
        finished == plan.threads as usize,
        "strace saw {finished} of {} workers finish",
        plan.threads
    );
    Ok(s)
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Growing,
    Steady,
    Done,
}

/// Counts the calls in `strace -f -o` output (`TID name(args) = result`
/// lines; a call interrupted by another thread's is counted at its
/// `<unfinished ...>` line, not at its `<... name resumed>`); also returns
/// how many workers finished.
pub fn parse(text: &str) -> Result<(Syscalls, usize)> {
    let mut phase: HashMap<&str, Phase> = HashMap::new();
    let mut s = Syscalls::default();
    for line in text.lines() {
        let (tid, call) = line
            .split_once(' ')
            .filter(|(tid, _)| tid.bytes().all(|b| b.is_ascii_digit()))
            .with_context(|| format!("not a line of strace -f: {line:?}"))?;
        let call = call.trim_start();
        let Some((name, args)) = call.split_once('(') else {
            continue; // signals, exits
        };
        if name == "prctl" {
            for (marker, p) in [
                ("\"tlm-grow\"", Phase::Growing),
                ("\"tlm-steady\"", Phase::Steady),
                ("\"tlm-done\"", Phase::Done),
            ] {
                if args.contains(marker) {
                    phase.insert(tid, p);
                }
            }
            continue;
        }
        let steady = match phase.get(tid) {
            Some(Phase::Growing) => false,
            Some(Phase::Steady) => true,
            _ => continue,
        };
        if s.rounds.add(name) && steady {
            s.steady.add(name);
        }
    }
    let finished = phase.values().filter(|&&p| p == Phase::Done).count();
    Ok((s, finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_worker_and_phase() {
        let log = r#"100 mmap(NULL, 8392704, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK, -1, 0) = 0x7f0
101 prctl(PR_SET_NAME, "tlm-grow")    = 0
101 mmap(NULL, 134217728, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0 <unfinished ...>
102 prctl(PR_SET_NAME, "tlm-grow")    = 0
101 <... mmap resumed>)               = 0x7f5
102 brk(0x5566d8c5e000)               = 0x5566d8c5e000
101 prctl(PR_SET_NAME, "tlm-steady")  = 0
101 madvise(0x7f54e8028000, 8368128, MADV_DONTNEED) = 0
101 munmap(0x7f54dc000000, 67108864) = 0
101 prctl(PR_SET_NAME, "tlm-done")    = 0
101 madvise(0x7f54e8028000, 8368128, MADV_DONTNEED) = 0
101 --- SIGSEGV {si_signo=SIGSEGV} ---
"#;
        let (s, finished) = parse(log).unwrap();
        assert_eq!(finished, 1);
        assert_eq!(
            (
                s.rounds.mmap,
                s.rounds.brk,
                s.rounds.madvise,
                s.rounds.munmap,
                s.rounds.total
            ),
            (1, 1, 1, 1, 4)
        );
        assert_eq!(
            (s.steady.madvise, s.steady.munmap, s.steady.total),
            (1, 1, 2)
        );
        assert!(parse("strace: no such file\n").is_err());
    }
}
