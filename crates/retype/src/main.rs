//! `retype`: the command-line laboratory.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses
//! the command line, dispatches, and turns errors into a message and exit code 2.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

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
    /// Barrelfish-style capabilities: the mapping database benchmark.
    Caps(cmd::caps::CapsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Caps(a) => cmd::caps::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("retype: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
