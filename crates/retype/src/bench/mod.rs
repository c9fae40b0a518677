//! The benchmarks' measurements, kept out of the library crates' public API:
//! each times what its library does and returns rows, printing nothing.
//!
//! - [`mm`]: one memory-manager request per policy and number of slabs.
//! - [`mdb`]: the mapping database of seed 001 §4.5, tree against list.
//! - [`vm`]: seed 001 §3.6, `retype-vm` against raw Linux.
//!
//! The protocol's latency study is the protocol's own (`crate::protocol`).

pub mod mdb;
pub mod mm;
pub mod vm;
