//! The recovery's proof phase: every distinct state, request by request.
//!
//! The depth-first search orders its branches by look-aheads, which finds a
//! path fast but spends some hundred replayed requests per choice, so its
//! bound runs out long before the distinct states do. The sweep keeps, before
//! each request, every state that agrees with the logs so far, merged by
//! [`Replay::key`] (equal managers, same multiset of where live allocations
//! lie), and replays each once, without look-ahead. If the states never
//! exceed [`STATES`] nor the work [`WORK`], its end is exact: a path that
//! agrees to the end, or the request where the last state died, every branch
//! tried (a proof). Otherwise it gives up and the search's answer stands.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::end::{err, Death, End, ResolveError};
use crate::log::LoggedOp;
use crate::replay::{Next, Replay};

/// Most distinct states kept before one request: beyond, the sweep gives up.
pub const STATES: usize = 2048;

/// Most requests the sweep replays, summed over its states: a few seconds.
pub const WORK: u64 = 300_000;

/// Sweeps the logs from `root` (before request 0); `None` when it gave up.
pub(crate) fn sweep(logs: &[&[LoggedOp]], root: Replay) -> Result<Option<End>, ResolveError> {
    let mut states = alloc::vec![root];
    let (mut branches, mut work) = (0u64, 0u64);
    for i in 0..logs[0].len() {
        let mut next = Vec::new();
        let mut seen = BTreeSet::new();
        // The dead state agreeing best with the logs, and its score.
        let mut closest: Option<(u32, Option<Replay>)> = None;
        for r in core::mem::take(&mut states) {
            work += 1;
            let mut keep = |r: Replay, i: usize| {
                if seen.insert(r.key(i + 1)) {
                    next.push(r);
                }
            };
            let dead = match r.next(logs, i).map_err(err(i))? {
                Next::Alloc(r, true) => {
                    keep(r, i);
                    None
                }
                Next::Alloc(r, false) => Some(Some(r)),
                Next::Free(r, sets, true) => {
                    let many = sets.len() > 1;
                    for ids in sets {
                        let mut b = r.clone();
                        b.ambiguous_frees += many as usize;
                        b.apply_free(logs, i, ids);
                        keep(b, i);
                    }
                    None
                }
                Next::Free(mut r, mut sets, false) => Some((!sets.is_empty()).then(|| {
                    r.apply_free(logs, i, sets.swap_remove(0));
                    r
                })),
            };
            if let Some(c) = dead {
                branches += 1;
                let score = c.as_ref().map_or(0, |c| c.agreement(logs, i) + 1);
                if closest.as_ref().is_none_or(|d| score > d.0) {
                    closest = Some((score, c));
                }
            }
        }
        if next.is_empty() {
            let (_, c) = closest.expect("every state died");
            let c = c.ok_or_else(|| {
                err(i)("no live allocations add up to the freed bytes and objects")
            })?;
            let death = Death {
                op: i,
                branches,
                replayed: work,
                exhaustive: true,
                closest: c.counters(),
                closest_slabs: c.slabs(),
            };
            return Ok(Some(End::Died(c, i + 1, death)));
        }
        if next.len() > STATES || work > WORK {
            return Ok(None);
        }
        states = next;
    }
    Ok(states.pop().map(End::Done))
}
