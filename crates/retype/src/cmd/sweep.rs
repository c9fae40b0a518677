//! `retype sweep`: a grid of study runs or replays on Dask. The sweep is the
//! Python module's (`python -m retype.sweep`, crates/retype-py): Dask is
//! Python's, and this command runs it with the same arguments.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;

#[derive(ClapArgs)]
pub struct Args {
    /// The grid: a TOML file with one [study] or [replay] table whose values
    /// (one or a list each) are crossed.
    grid: PathBuf,
    /// Where the rows go, one per run: .parquet, or .csv.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// A Dask scheduler's address (default: a local cluster of this machine's cores).
    #[arg(long, value_name = "ADDRESS")]
    scheduler: Option<String>,
    /// Processes of the local cluster.
    #[arg(long, value_name = "N")]
    workers: Option<u32>,
    /// Runs per task (default: 8 tasks per worker).
    #[arg(long, value_name = "N")]
    batch: Option<u32>,
    /// Run in one process, without Dask.
    #[arg(long)]
    serial: bool,
}

/// The interpreter: `RETYPE_PYTHON`, or `python3`.
fn python() -> String {
    std::env::var("RETYPE_PYTHON").unwrap_or_else(|_| "python3".into())
}

pub fn run(a: Args) -> Result<()> {
    let py = python();
    let found = Command::new(&py)
        .args(["-c", "import retype.sweep"])
        .output()
        .with_context(|| format!("cannot run {py} (set RETYPE_PYTHON to another interpreter)"))?;
    if !found.status.success() {
        bail!("retype sweep runs the Python module, which {py} cannot import: install it with `pip install ./crates/retype-py`");
    }
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "retype.sweep"])
        .arg(&a.grid)
        .arg("-o")
        .arg(&a.output);
    if let Some(s) = &a.scheduler {
        cmd.args(["--scheduler", s]);
    }
    if let Some(n) = a.workers {
        cmd.args(["--workers", &n.to_string()]);
    }
    if let Some(n) = a.batch {
        cmd.args(["--batch", &n.to_string()]);
    }
    if a.serial {
        cmd.arg("--serial");
    }
    let status = cmd.status().with_context(|| format!("cannot run {py}"))?;
    if !status.success() {
        // The sweep has said why, in the command line's words.
        std::process::exit(status.code().unwrap_or(2));
    }
    Ok(())
}
