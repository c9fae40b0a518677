//! What the three searches share: how a search ends (a branch that agrees
//! to the end, or a [`Death`] with its proof), the deepest death so far, and
//! the error of a log that no request can explain.

use alloc::vec::Vec;

use crate::log::{Checkpoint, LogCounters, LoggedOp, SlabCounters};
use crate::replay::Replay;

/// Why a log's requests could not be recovered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveError {
    /// 0-based index of the logged request.
    pub op: usize,
    pub message: alloc::string::String,
}

impl core::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "logged request {}: {}", self.op, self.message)
    }
}

impl core::error::Error for ResolveError {}

/// The [`ResolveError`] of logged request `op`, from a message.
pub(crate) fn err(op: usize) -> impl Fn(&'static str) -> ResolveError {
    move |message| ResolveError {
        op,
        message: message.into(),
    }
}

/// Where every branch died, and the proof: how hard the search tried and the
/// counters of the closest branch there. The branches of a free are the
/// sets `Replay` offers: one live allocation of the freed size, else runs of
/// consecutive ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Death {
    /// 0-based index of the logged request no branch got past.
    pub op: usize,
    /// Branches that died (a disagreeing request, or a state equivalent to
    /// one already searched).
    pub branches: u64,
    /// Requests replayed by the search, look-aheads included.
    pub replayed: u64,
    /// Whether every branch was tried (a proof), or a bound of the search ran
    /// out first.
    pub exhaustive: bool,
    /// The closest branch's counters after request `op`, one per log.
    pub closest: Vec<LogCounters>,
    /// The closest branch's slabs after request `op`, one list per log.
    pub closest_slabs: Vec<Vec<SlabCounters>>,
}

impl Death {
    /// The counters on which the closest branch and log `m` disagree: name,
    /// ours, the log's.
    pub fn differences(&self, m: usize, log: &[LoggedOp]) -> Vec<(&'static str, u64, u64)> {
        self.closest[m].differences(&log[self.op].after)
    }

    /// The slabs on which the closest branch and log `m`'s dump after
    /// [`Death::op`] disagree (none if the log has no dump there): slab,
    /// then name, ours, the log's.
    pub fn slab_differences(
        &self,
        m: usize,
        dumps: &[Checkpoint],
    ) -> Vec<(usize, &'static str, u64, u64)> {
        let Some(dump) = dumps.iter().find(|c| c.op == self.op) else {
            return Vec::new();
        };
        self.closest_slabs[m]
            .iter()
            .zip(&dump.slabs)
            .enumerate()
            .flat_map(|(s, (ours, log))| {
                ours.differences(log)
                    .into_iter()
                    .map(move |(name, a, b)| (s, name, a, b))
            })
            .collect()
    }
}

/// How a search ended.
pub(crate) enum End {
    /// A branch agreed with the logs to their end.
    Done(Replay),
    /// No branch got past [`Death::op`]: the closest branch, and the request
    /// it is to replay next.
    Died(Replay, usize, Death),
}

/// The deepest death so far: request, score of the closest branch there, and
/// that branch (the depth-first search keeps none when no set of
/// allocations added up to the free).
pub(crate) struct Deepest<T> {
    pub op: usize,
    pub score: u32,
    pub closest: T,
}

impl<T> Deepest<T> {
    /// Keeps the branch that died at `op` with `score` if it got further
    /// than the deepest in `slot`, or as far and closer.
    pub fn offer(slot: &mut Option<Deepest<T>>, op: usize, score: u32, closest: T) {
        if slot.as_ref().is_none_or(|d| (op, score) > (d.op, d.score)) {
            *slot = Some(Deepest { op, score, closest });
        }
    }
}
