//! Workloads for the memory manager: streams of allocation and free requests.
//!
//! - [`uniform`]: seed 000's uniform random generator (§4.1.2);
//! - [`script`]: fixed sequences, in a small text format: the four CantripOS
//!   applications, the three sequences of Table 4.2, and the op sequences
//!   recovered from the CantripOS logs (by the crate `retype-recovery`).
//!
//! A workload may adapt to refusals, as the thesis's generator does: an
//! allocation that failed is not live, so it is never freed.

pub mod script;
pub mod uniform;

use alloc::vec::Vec;

use crate::mm::ObjDesc;

/// One request of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate `request`, known from now on as `id`.
    Alloc { id: u32, request: Vec<ObjDesc> },
    /// Free the allocations `ids` in one request (an application exiting frees
    /// everything it holds at once).
    Free { ids: Vec<u32> },
}

/// A stream of requests.
pub trait Workload {
    /// The next request, or `None` at the end.
    fn next_op(&mut self) -> Option<Op>;

    /// The allocation `id` was refused; it will not be live.
    fn refused(&mut self, _id: u32) {}
}

use crate::mm::{AllocError, AllocId, MemoryManager, Stats};

/// What one request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Alloc,
    Free,
    /// Refused for lack of memory (an OOM).
    OutOfMemory,
}

/// One request as it ran: the outcome, the manager's counters after it, and
/// its latency as measured by the caller's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub outcome: Outcome,
    pub stats: Stats,
    pub ticks: u64,
}

/// Why a workload could not run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError {
    /// A request the manager refuses outright (not an OOM), at op `op`.
    Refused { op: usize, error: AllocError },
    /// A free of an id that was never allocated or is already free.
    UnknownId { op: usize, id: u32 },
}

impl core::fmt::Display for DriveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DriveError::Refused { op, error } => write!(f, "request {op}: {error}"),
            DriveError::UnknownId { op, id } => write!(f, "request {op}: id {id} is not live"),
        }
    }
}

impl core::error::Error for DriveError {}

/// Runs `workload` on `mm` to its end, calling `each` after every request
/// with the step and the manager as it is then. `clock` is read before and
/// after each call into the manager.
pub fn drive(
    mm: &mut MemoryManager,
    workload: &mut dyn Workload,
    mut clock: impl FnMut() -> u64,
    mut each: impl FnMut(&Step, &MemoryManager),
) -> Result<(), DriveError> {
    let mut ids: alloc::collections::BTreeMap<u32, AllocId> = alloc::collections::BTreeMap::new();
    let mut op = 0;
    while let Some(next) = workload.next_op() {
        let (outcome, ticks) = match next {
            Op::Alloc { id, request } => {
                let t0 = clock();
                let r = mm.alloc(&request);
                let ticks = clock().wrapping_sub(t0);
                match r {
                    Ok(a) => {
                        ids.insert(id, a);
                        (Outcome::Alloc, ticks)
                    }
                    Err(AllocError::OutOfMemory { .. }) => {
                        workload.refused(id);
                        (Outcome::OutOfMemory, ticks)
                    }
                    Err(error) => return Err(DriveError::Refused { op, error }),
                }
            }
            Op::Free { ids: free } => {
                let handles = free
                    .iter()
                    .map(|id| ids.remove(id).ok_or(DriveError::UnknownId { op, id: *id }))
                    .collect::<Result<Vec<_>, _>>()?;
                let t0 = clock();
                mm.free_request(&handles).expect("live handles free");
                (Outcome::Free, clock().wrapping_sub(t0))
            }
        };
        let step = Step {
            outcome,
            stats: *mm.stats(),
            ticks,
        };
        each(&step, mm);
        op += 1;
    }
    Ok(())
}
