//! The look-ahead: a free's agreeing sets ordered by how far each gets when
//! replayed [`LOOKAHEAD`] requests further, greedily; and the recovery by that
//! order alone, which goes on past a request no branch got past.

use alloc::vec::Vec;

use crate::end::{err, ResolveError};
use crate::log::LoggedOp;
use crate::replay::{Next, Replay};

/// How many logged requests the look-ahead replays to order the sets.
pub const LOOKAHEAD: usize = 48;

/// Replays requests `from..` choosing by look-ahead alone: at a free, the
/// sets that agree best now, ordered by [`order`]; the closest when none
/// agrees.
pub(crate) fn walk(
    logs: &[&[LoggedOp]],
    mut r: Replay,
    from: usize,
) -> Result<Replay, ResolveError> {
    let mut work = 0;
    for i in from..logs[0].len() {
        r = match r.next(logs, i).map_err(err(i))? {
            Next::Alloc(r, _) => r,
            Next::Free(mut r, sets, _) => {
                // No set adds up when our manager refused an allocation the
                // log's served: the walk goes on with a free of nothing.
                r.ambiguous_frees += (sets.len() > 1) as usize;
                let ids = if sets.is_empty() {
                    Vec::new()
                } else {
                    order(logs, &r, i, sets, false, &mut work).swap_remove(0)
                };
                r.apply_free(logs, i, ids);
                r
            }
        };
    }
    Ok(r)
}

/// `sets` (freeing which all agree equally with logged request `i`) best
/// first: each is replayed [`LOOKAHEAD`] requests further ([`greedy`]), most
/// requests agreeing first, the oldest allocations on ties.
pub(crate) fn order(
    logs: &[&[LoggedOp]],
    r: &Replay,
    i: usize,
    sets: Vec<Vec<u32>>,
    toward_dumps: bool,
    work: &mut u64,
) -> Vec<Vec<u32>> {
    if sets.len() < 2 {
        return sets;
    }
    let horizon = (i + 1 + LOOKAHEAD).min(logs[0].len());
    let mut sets = sets;
    sets.sort_by_cached_key(|ids| {
        let mut b = r.clone();
        b.apply_free(logs, i, ids.clone());
        let distance = if toward_dumps { b.distance(i) } else { 0 };
        let agreed = greedy(logs, b, i + 1..horizon, work);
        (distance, core::cmp::Reverse(agreed))
    });
    sets
}

/// Replays `ops` taking the first of the best sets at every free; returns
/// after how many of them every log agrees fully.
fn greedy(
    logs: &[&[LoggedOp]],
    mut r: Replay,
    ops: core::ops::Range<usize>,
    work: &mut u64,
) -> usize {
    let mut agreed = 0;
    for j in ops {
        *work += 1;
        let ok = match r.next(logs, j) {
            Ok(Next::Alloc(next, ok)) => {
                r = next;
                ok
            }
            Ok(Next::Free(mut next, mut sets, ok)) if !sets.is_empty() => {
                next.apply_free(logs, j, sets.swap_remove(0));
                r = next;
                ok
            }
            _ => break,
        };
        agreed += ok as usize;
    }
    agreed
}
