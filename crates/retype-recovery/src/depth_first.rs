//! The depth-first search over which live allocations each logged free
//! released.
//!
//! Every set of live allocations that adds up to a free's drop and agrees
//! with the logs is a branch; a branch dies as soon as a replayed counter
//! disagrees with a log, and the search backtracks to the latest free that
//! had another set left. The sets are tried in the order of the look-ahead
//! (`lookahead::order`), so the search's first descent is the look-ahead's
//! own choice. Branches that reach the same state before the same request are
//! equivalent (`Replay::key`): once one was searched, the others are not.
//! A bound on the requests replayed ([`BUDGET`]) makes every search end.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::end::{err, Death, Deepest, End, ResolveError};
use crate::log::LoggedOp;
use crate::lookahead::order;
use crate::replay::{Next, Replay};

/// Requests the search may replay after its first death, look-aheads
/// included, before it stops: a few seconds on the evaluation's logs. The
/// first descent (the look-ahead's own choices) always runs to its death.
pub const BUDGET: u64 = 150_000;

/// A free with several agreeing sets: the branch before it, and the sets not
/// yet tried (next on top).
struct Choice {
    op: usize,
    before: Replay,
    untried: Vec<Vec<u32>>,
}

/// Searches depth-first from `root` (before request 0) until a branch
/// agrees to the end, every branch died, or `budget` more requests were
/// replayed after the first death.
pub(crate) fn search(logs: &[&[LoggedOp]], root: Replay, budget: u64) -> Result<End, ResolveError> {
    let n = logs[0].len();
    let mut seen: BTreeSet<u128> = BTreeSet::new();
    let mut stack: Vec<Choice> = Vec::new();
    let mut deepest: Option<Deepest<Option<Replay>>> = None;
    let (mut branches, mut work) = (0u64, 0u64);
    // Work done when the first branch died: the budget counts from there.
    let mut first_death = None;
    let mut current = Some((root, 0));
    loop {
        if let Some((r, i)) = current.take() {
            if i == n {
                return Ok(End::Done(r));
            }
            work += 1;
            let dead = match r.next(logs, i).map_err(err(i))? {
                Next::Alloc(r, true) => {
                    current = Some((r, i + 1));
                    continue;
                }
                Next::Alloc(r, false) => Some(Some(r)),
                Next::Free(mut r, mut sets, true) if sets.len() == 1 => {
                    r.apply_free(logs, i, sets.swap_remove(0));
                    current = Some((r, i + 1));
                    continue;
                }
                Next::Free(r, sets, true) => {
                    // A state searched before dies here: it did there.
                    if seen.insert(r.key(i)) {
                        let mut untried = order(logs, &r, i, sets, true, &mut work);
                        untried.reverse();
                        stack.push(Choice {
                            op: i,
                            before: r,
                            untried,
                        });
                    } else {
                        branches += 1;
                    }
                    None
                }
                Next::Free(mut r, mut sets, false) => Some((!sets.is_empty()).then(|| {
                    r.apply_free(logs, i, sets.swap_remove(0));
                    r
                })),
            };
            if let Some(closest) = dead {
                branches += 1;
                first_death.get_or_insert(work);
                let score = closest.as_ref().map_or(0, |c| c.agreement(logs, i) + 1);
                Deepest::offer(&mut deepest, i, score, closest);
            }
        }
        let exhaustive = stack.is_empty();
        if exhaustive || first_death.is_some_and(|w| work - w >= budget) {
            let d = deepest.expect("a search that ends died somewhere");
            let closest = d.closest.ok_or_else(|| {
                err(d.op)("no live allocations add up to the freed bytes and objects")
            })?;
            let death = Death {
                op: d.op,
                branches,
                replayed: work,
                exhaustive,
                closest: closest.counters(),
                closest_slabs: closest.slabs(),
            };
            return Ok(End::Died(closest, d.op + 1, death));
        }
        let choice = stack.last_mut().expect("not exhausted");
        let ids = choice.untried.pop().expect("a choice keeps a set");
        let op = choice.op;
        let mut r = if choice.untried.is_empty() {
            stack.pop().expect("the choice").before
        } else {
            choice.before.clone()
        };
        r.ambiguous_frees += 1;
        r.apply_free(logs, op, ids);
        current = Some((r, op + 1));
    }
}
