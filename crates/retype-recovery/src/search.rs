//! The exact recovery: a depth-first search over which live allocations each
//! logged free released.
//!
//! Every set of live allocations that adds up to a free's drop and agrees
//! with the logs is a branch; a branch dies as soon as a replayed counter
//! disagrees with a log, and the search backtracks to the latest free that
//! had another set left. The sets are tried in the order of a look-ahead
//! (each replayed [`LOOKAHEAD`] requests further, greedily, the one agreeing
//! on most first), so the search's first descent is the look-ahead's own
//! choice. Branches that reach the same state before the same request are
//! equivalent (`Replay::key`): once one was searched, the others are not.
//! A bound on the requests replayed ([`BUDGET`]) makes every search end.
//!
//! The search that defers frees (`deferred`) runs first: where the logs
//! allow it (the kept rule, one allocation per free) it ends fast with a
//! match or a proof. Only when it cannot does this search run; when its
//! bound stops it, the breadth-first `sweep` over distinct states tries
//! again without look-aheads: a proof when the states stay few.
//!
//! When no branch gets past some request, that request and the proof (how
//! many branches died, whether all were tried, the closest counters) are
//! reported, and the rest of the log is recovered as well as it can be: by
//! the look-ahead alone from the closest branch, or from the start, whichever
//! matches more requests — never fewer than the look-ahead alone.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use super::replay::{Next, Replay};
use super::{deferred, sweep};
use super::{Checkpoint, LogCounters, LoggedOp, ResolveError, SlabCounters};

/// How many logged requests the look-ahead replays to order the sets.
pub const LOOKAHEAD: usize = 48;

/// Requests the search may replay after its first death, look-aheads
/// included, before it stops: a few seconds on the evaluation's logs. The
/// first descent (the look-ahead's own choices) always runs to its death.
pub const BUDGET: u64 = 150_000;

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
    /// Whether every branch was tried (a proof), or [`BUDGET`] ran out first.
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

/// The outcome of a whole recovery.
pub(super) struct Found {
    pub replay: Replay,
    pub death: Option<Death>,
}

pub(super) fn err(op: usize) -> impl Fn(&'static str) -> ResolveError {
    move |message| ResolveError {
        op,
        message: message.into(),
    }
}

/// Recovers every logged request from `root` (before request 0).
pub(super) fn recover(logs: &[&[LoggedOp]], root: Replay) -> Result<Found, ResolveError> {
    // The search that defers frees first: it ends fast, with a match or a
    // proof, when the logs allow it.
    let deferred = deferred::defer(logs, root.clone())?;
    let settled = |e: &End| match e {
        End::Done(_) => true,
        End::Died(_, _, d) => d.exhaustive,
    };
    let end = match deferred {
        Some(e) if settled(&e) => e,
        _ => {
            let mut end = search(logs, root.clone(), BUDGET)?;
            // A bounded search proves nothing; the sweep may, when few states differ.
            if matches!(&end, End::Died(_, _, d) if !d.exhaustive) {
                if let Some(swept) = sweep::sweep(logs, root.clone())? {
                    end = swept;
                }
            }
            end
        }
    };
    let (closest, from, death) = match end {
        End::Done(replay) => {
            return Ok(Found {
                replay,
                death: None,
            })
        }
        End::Died(closest, from, death) => (closest, from, death),
    };
    let continued = walk(logs, closest, from)?;
    let plain = walk(logs, root, 0)?;
    let replay = if plain.matched > continued.matched {
        plain
    } else {
        continued
    };
    Ok(Found {
        replay,
        death: Some(death),
    })
}

/// Replays requests `from..` choosing by look-ahead alone: at a free, the
/// sets that agree best now, ordered by [`order`]; the closest when none
/// agrees.
fn walk(logs: &[&[LoggedOp]], mut r: Replay, from: usize) -> Result<Replay, ResolveError> {
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
fn order(
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

/// How a search ended.
pub(super) enum End {
    /// A branch agreed with the logs to their end.
    Done(Replay),
    /// No branch got past [`Death::op`]: the closest branch, and the request
    /// it is to replay next.
    Died(Replay, usize, Death),
}

/// A free with several agreeing sets: the branch before it, and the sets not
/// yet tried (next on top).
struct Choice {
    op: usize,
    before: Replay,
    untried: Vec<Vec<u32>>,
}

/// The deepest death so far: request, score of the closest branch there, and
/// that branch (in this search, none if no set of allocations added up to
/// the free).
pub(super) struct Deepest<T> {
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

/// Searches depth-first from `root` (before request 0) until a branch
/// agrees to the end, every branch died, or `budget` more requests were
/// replayed after the first death.
fn search(logs: &[&[LoggedOp]], root: Replay, budget: u64) -> Result<End, ResolveError> {
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
