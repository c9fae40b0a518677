//! Seed 001 §3.6 rebuilt, each benchmark against raw Linux in the same run,
//! the two alternated round by round (medians reported).
//!
//! - [`shadow`]: the memory of shadow page tables, list or array (Figure 3.1).
//! - [`mpu`]: map, protect and unmap of buffers (Figure 3.3).
//! - [`appel`]: Appel and Li's trap benchmarks (Figure 3.2).
//! - [`gups`]: HPCC RandomAccess by page size (Table 3.1), and every run's
//!   GUPS (Figure 3.5) summarised by [`dist`].
//! - [`pagerank`]: PageRank with its arrays on chosen page sizes (Table 3.3).
//! - [`gc`]: a GCBench-like collector, dirty bits against traps (Table 3.4),
//!   the traps also on raw Linux ([`linux_traps`]).

pub mod appel;
pub mod dist;
pub mod gc;
pub mod gups;
pub mod linux_traps;
pub mod mpu;
pub mod pagerank;
pub mod shadow;

use std::time::Instant;

use retype_vm::VmError;

/// Nanoseconds `f` takes.
fn timed(f: impl FnOnce() -> Result<(), VmError>) -> Result<f64, VmError> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_nanos() as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
