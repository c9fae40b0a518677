//! `retype bench`: the benchmarks, one subcommand each, printing what the
//! measurements of `crate::bench` (and the protocol's latency study) give.

pub mod mdb;
pub mod mm;
pub mod protocol;
pub mod vm;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Bench {
    /// Time per memory-manager request, per policy and number of slabs.
    Mm(mm::Args),
    /// Mapping database latencies and workload scores, tree and list (seed 001 §4.5).
    Mdb(mdb::Args),
    /// Latency of the cross-core protocol's operations, nodes on threads (§4.7).
    Protocol(protocol::Args),
    /// Seed 001 §3.6: ours beside raw Linux (Figures 3.2, 3.3, Tables 3.1, 3.4).
    Vm(vm::Args),
}

pub fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Mm(a) => mm::run(a),
        Bench::Mdb(a) => mdb::run(a),
        Bench::Protocol(a) => protocol::run(a),
        Bench::Vm(a) => vm::run(a),
    }
}

/// Tells, on standard error, that `retype OLD` is now `retype NEW`.
pub fn renamed(old: &str, new: &str) {
    eprintln!(
        "retype: 'retype {old}' is now 'retype {new}'; the old name goes in the next release"
    );
}
