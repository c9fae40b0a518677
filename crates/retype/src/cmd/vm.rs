//! `retype vm bench`: the old name of `retype bench vm`, kept for one release.

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::cmd::bench;

#[derive(Args)]
pub struct VmArgs {
    #[command(subcommand)]
    command: VmCommand,
}

#[derive(Subcommand)]
enum VmCommand {
    /// The old name of `retype bench vm` (until the next release).
    Bench(bench::vm::Args),
}

pub fn run(args: VmArgs) -> Result<()> {
    let VmCommand::Bench(a) = args.command;
    bench::renamed("vm bench", "bench vm");
    bench::vm::run(a)
}
