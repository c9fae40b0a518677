//! Where the study's inputs come from: the applications shipped in the
//! binary, the CantripOS logs under `traces/`, and files named by the user.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use retype_core::mm::{Accounting, Layout, MemoryManager, PolicyKind};
use retype_core::objects::Config;
use retype_core::workload::script::{self, Script};
use retype_core::workload::uniform::{Uniform, UniformParams};
use retype_core::workload::Workload;
use retype_recovery::{Checkpoint, Log, LoggedOp, Resolved};

use super::spec::{App, PolicySpec, WorkloadSpec};

/// The four applications of seed 000 §4.1.3, recovered from its logs
/// (`traces/cantrip/apps/`, built into the binary).
pub fn app(app: App) -> Script {
    let text = match app {
        App::Hello => include_str!("../../../../traces/cantrip/apps/hello.txt"),
        App::Timer => include_str!("../../../../traces/cantrip/apps/timer.txt"),
        App::Fibonacci => include_str!("../../../../traces/cantrip/apps/fibonacci.txt"),
        App::Mltest => include_str!("../../../../traces/cantrip/apps/mltest.txt"),
    };
    Script::parse(text).expect("shipped application scripts parse")
}

/// Sequence `n` (1..=3) of Table 4.2.
pub fn sequence(n: usize) -> Script {
    let by_name = |name: &str| name.parse().ok().map(app);
    script::sequence(script::SEQUENCES[n - 1], by_name)
        .expect("Table 4.2 sequences are well formed")
}

/// The directory holding `cantrip/logs`: `--data`, else `$RETYPE_DATA`, else
/// `traces/` in the working directory, in a directory above the binary (a
/// workspace's `target/release/retype`, moved or not), or beside the
/// repository the binary was built in.
pub fn data_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(d) = explicit {
        return Ok(d.to_path_buf());
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("RETYPE_DATA")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(PathBuf::from("traces"));
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|d| d.join("traces")));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces"));
    candidates
        .into_iter()
        .find(|d| d.join("cantrip/logs").is_dir())
        .context("cannot find the study data (traces/cantrip/logs): run from the repository root or pass --data DIR")
}

/// A CantripOS log and the policy that produced it.
#[derive(Clone, Debug)]
pub struct LogRun {
    pub path: PathBuf,
    pub policy: PolicySpec,
    pub ops: Vec<LoggedOp>,
    /// Per-slab dumps of the same run, from `memory_stats_NAME` beside it
    /// when there is one (the uniform runs).
    pub checkpoints: Vec<Checkpoint>,
}

/// Reads a CantripOS log, and the per-slab dumps of its run when a
/// `memory_stats_` log of the same name lies beside it; the policy is told
/// by the command the log records (`… best_fit` or `… next_fit`).
pub fn load_log(path: &Path) -> anyhow::Result<LogRun> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let ops = super::log::parse(&text).with_context(|| format!("{}", path.display()))?;
    let policy = if text.contains("best_fit") {
        PolicySpec::kept(PolicyKind::BestFit)
    } else if text.contains("next_fit") {
        PolicySpec::kept(PolicyKind::BlindNextFit)
    } else {
        bail!(
            "{}: cannot tell which policy made this log (no best_fit or next_fit command in it)",
            path.display()
        );
    };
    let checkpoints = match path.file_name().and_then(|n| n.to_str()) {
        Some(name) if !name.starts_with("memory_stats_") => {
            let stats = path.with_file_name(format!("memory_stats_{name}"));
            match std::fs::read(&stats) {
                Ok(bytes) => super::log::parse_dumps(&String::from_utf8_lossy(&bytes), ops.len())
                    .with_context(|| format!("{}", stats.display()))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot read {}", stats.display()))
                }
            }
        }
        _ => Vec::new(),
    };
    Ok(LogRun {
        path: path.to_path_buf(),
        policy,
        ops,
        checkpoints,
    })
}

/// A fresh manager for `policy`, counting under `accounting`.
pub fn manager(
    config: Config,
    layout: &Layout,
    policy: PolicySpec,
    accounting: Accounting,
) -> MemoryManager {
    MemoryManager::new(config, layout, policy.rule, policy.kind).with_accounting(accounting)
}

/// Recovers the requests of logs that got the same requests, replaying each
/// under its own policy and the logs' own accounting.
pub fn resolve(runs: &[&LogRun], config: Config, layout: &Layout) -> anyhow::Result<Resolved> {
    let logs = runs
        .iter()
        .map(|r| Log {
            ops: &r.ops,
            checkpoints: &r.checkpoints,
            manager: manager(config, layout, r.policy, Accounting::LOGS),
        })
        .collect();
    let names: Vec<String> = runs.iter().map(|r| r.path.display().to_string()).collect();
    retype_recovery::resolve(logs).with_context(|| names.join(" + "))
}

/// A workload ready to run any number of times.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub name: String,
    source: Source,
    /// The log it came from, to compare runs with.
    pub log: Option<LogRun>,
}

#[derive(Clone, Debug)]
enum Source {
    Uniform(UniformParams),
    Script(Script),
}

impl Prepared {
    pub fn script(name: String, script: Script, log: Option<LogRun>) -> Prepared {
        Prepared {
            name,
            source: Source::Script(script),
            log,
        }
    }

    /// A fresh stream of the workload's requests.
    pub fn workload(&self) -> Box<dyn Workload> {
        match &self.source {
            Source::Uniform(p) => Box::new(Uniform::new(*p)),
            Source::Script(s) => Box::new(s.clone()),
        }
    }

    /// Prepares a workload named on the command line.
    pub fn from_spec(
        spec: &WorkloadSpec,
        config: Config,
        layout: &Layout,
    ) -> anyhow::Result<Prepared> {
        let name = spec.to_string();
        Ok(match spec {
            WorkloadSpec::Uniform(p) => Prepared {
                name,
                source: Source::Uniform(*p),
                log: None,
            },
            WorkloadSpec::App(a) => Prepared::script(name, app(*a), None),
            WorkloadSpec::Seq(n) => Prepared::script(name, sequence(*n), None),
            WorkloadSpec::Script(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let s =
                    Script::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                Prepared::script(name, s, None)
            }
            WorkloadSpec::Log(path) => {
                let run = load_log(path)?;
                let resolved = resolve(&[&run], config, layout)?;
                Prepared::script(name, resolved.script, Some(run))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 48 % run's per-slab dumps are read beside its logs, and the
    /// requests recovered from both logs together meet every counter and
    /// every dump to the end (the run no search got past request 894 of
    /// before slabs were kept from emptying between resets).
    #[test]
    fn the_48_percent_run_is_matched_with_its_dumps() {
        let dir = data_dir(None).unwrap().join("cantrip/logs");
        let name = "random_uniform_{}_seed_42_count_1000_dealloc_chance_48.log";
        let load = |p: &str| load_log(&dir.join(p).join(name.replace("{}", p))).unwrap();
        let (bf, nf) = (load("best_fit"), load("next_fit"));
        assert!(!bf.checkpoints.is_empty() && !nf.checkpoints.is_empty());
        let r = resolve(&[&bf, &nf], Config::CANTRIP, &Layout::cantrip()).unwrap();
        assert!(r.death.is_none(), "{:?}", r.death);
        assert!(r.set_aside.is_none(), "{:?}", r.set_aside.map(|s| s.dumps));
    }
}
