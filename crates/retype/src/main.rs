//! `retype`: the command-line laboratory.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses
//! the command line, dispatches, and turns errors into a message and exit code 2.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use retype::cmd;

#[derive(Parser)]
#[command(
    name = "retype",
    version,
    about = "Capability-based memory management and the laboratory that measures it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Memory-manager workloads under placement policies (seed 000's study);
    /// `study tlm`: seed 003's real-time experiment on real allocators.
    Study(cmd::study::Args),
    /// A grid of study runs or replays on Dask, one row per run (Parquet):
    /// needs the Python module (`pip install ./crates/retype-py`).
    Sweep(cmd::sweep::Args),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(cmd::bench::Bench),
    /// Replay malloc-lab traces on the heap allocators and score them as mdriver does.
    Replay(cmd::replay::ReplayArgs),
    /// Record every malloc-family call of a program into a trace (LD_PRELOAD)
    Record(cmd::record::Args),
    /// Inspect, convert and analyse allocation traces: info, sites, leaks, diff, flame graphs
    #[command(subcommand)]
    Trace(cmd::trace::Command),
    /// Barrelfish-style capabilities: the cross-core protocol model-checked.
    Caps(cmd::caps::CapsArgs),
    /// One HTML page with the study, the heap replays and the benchmarks, drawn.
    Report(cmd::report::Args),
    /// The old name of `retype bench vm` (until the next release).
    Vm(cmd::vm::VmArgs),
    /// CHERI compressed capabilities (seed 004): set bounds, decode.
    Cheri(cmd::cheri::CheriArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Study(args) => cmd::study::run(args),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::Bench(b) => cmd::bench::run(b),
        Command::Replay(args) => cmd::replay::run_cmd(args),
        Command::Record(a) => cmd::record::run(a),
        Command::Trace(c) => cmd::trace::run(c),
        Command::Caps(a) => cmd::caps::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Vm(a) => cmd::vm::run(a),
        Command::Cheri(a) => cmd::cheri::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`| head`) is not an error.
        Err(e) if closed_output(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("retype: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Whether `e` is a write to an output whose reader has gone away.
fn closed_output(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
