//! The recovery's deferred search: a free is put down to a slab only when
//! the logs tell which.
//!
//! Under the kept rule a free that empties no slab moves no watermark, so
//! where later requests go, and every logged counter (bytes and objects in
//! use fall by its size, watermarking rises by it), are the same whichever
//! slab it left. Such frees stay pending here: put down to allocations only
//! when a slab resets (all its other allocations must have gone, each by a
//! pending free of its size made after it was), at a per-slab dump (each
//! slab's watermarking is its freed bytes) and at the end. The depth-first
//! search over frees branches at every free; this one only where the logs
//! tell something, so its states stay few.
//!
//! A free put down must not leave its slab empty at a request its log
//! counts no reset at ([`Occupancy`]); frees still pending only take more
//! away, so a branch that breaks that rule dies. The choices it makes among
//! ways of putting frees down are those no other way beats. So when every
//! branch dies, no choice of frees matches (a proof, unless a cap on steps
//! cut a branch short); a branch that gets to the end is replayed request by
//! request all the same, and counts only if every counter agrees.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use core::hash::Hash;

use retype_core::mm::slab::WatermarkRule;
use retype_core::mm::PolicyKind;
use retype_core::workload::Op;

use crate::dumps::Sums;
use crate::end::{err, Death, Deepest, End, ResolveError};
use crate::log::{delta, LogCounters, LoggedOp, SlabCounters};
use crate::occupancy::Occupancy;
use crate::replay::{Fingerprint, Next, Replay};

/// Requests the deferred search may replay, and steps it may take putting
/// frees down at dumps, before it stops: a few seconds.
pub const BUDGET: u64 = 8_000_000;

/// Ways of putting pending frees down at one dump tried before giving up
/// on the rest (the search's answer is then no proof).
const WAYS: u64 = 1_000_000;

/// Steps one reset may take choosing pending frees for the allocations
/// its slabs held (the search's answer is then no proof).
const COVERS: u64 = 2_000;

/// Steps one way of [`Ctx::put_all`] may take giving its frees allocations
/// (the search's answer is then no proof).
const SETTLE: u64 = 100_000;

/// A free not yet put down to an allocation: its request, bytes, objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Pending {
    op: usize,
    bytes: u64,
    objs: u64,
}

/// One branch: a replay with the frees put down so far, and those pending.
#[derive(Clone)]
struct State {
    r: Replay,
    pending: Vec<Pending>,
    /// Pending frees put down since: request → allocation.
    put: BTreeMap<usize, u32>,
    /// What each slab held since its reset, as far as the frees put down tell.
    held: Occupancy,
    /// Whether an allocation made on this branch spans slabs.
    spans: bool,
}

/// The facts every branch shares.
struct Ctx<'a> {
    logs: &'a [&'a [LoggedOp]],
    /// Request that made each allocation id (ids count allocation requests).
    born: Vec<usize>,
    /// Whether some branch was cut short (a cap, or a path that failed
    /// the replay): its death is then no proof.
    incomplete: bool,
    /// Steps taken putting frees down (see [`BUDGET`]).
    steps: u64,
    /// The branch that agreed best among those the last request killed, and
    /// its score (counters agreeing, summed over the logs).
    dead: Option<(u32, State)>,
}

impl State {
    /// The counters a log prints after request `i` if the pending frees
    /// left slabs that keep objects: one per log.
    fn counters(&self) -> Option<Vec<LogCounters>> {
        let bytes: u64 = self.pending.iter().map(|p| p.bytes).sum();
        let objs: u64 = self.pending.iter().map(|p| p.objs).sum();
        self.r
            .counters()
            .into_iter()
            .map(|mut c| {
                c.bytes_in_use = c.bytes_in_use.checked_sub(bytes)?;
                c.objects_in_use = c.objects_in_use.checked_sub(objs)?;
                c.frag_watermark += bytes;
                Some(c)
            })
            .collect()
    }

    /// How many counters of every log agree after request `i`, summed.
    fn score(&self, logs: &[&[LoggedOp]], i: usize) -> u32 {
        self.counters().map_or(0, |cs| {
            cs.iter()
                .zip(logs)
                .map(|(c, log)| c.agreement(&log[i].after))
                .sum()
        })
    }

    /// Whether every log's counters after request `i` agree.
    fn agrees(&self, logs: &[&[LoggedOp]], i: usize) -> bool {
        self.score(logs, i) == LogCounters::COMPARED * logs.len() as u32
    }

    /// Equal keys before the same request: equal managers, live allocations
    /// (by id, so by age) and pending frees; then the same requests to come
    /// do the same to both (`the_deferred_search_never_proves_a_possible_log_impossible`
    /// fails if not).
    fn key(&self, i: usize) -> u128 {
        let mut h = Fingerprint::default();
        self.r.key(i).hash(&mut h);
        for (id, _, _) in self.r.live() {
            id.hash(&mut h);
        }
        self.pending.hash(&mut h);
        self.held.hash(&mut h);
        h.finish128()
    }

    /// Puts the pending frees in `put` (request, allocation) down: those
    /// allocations go, as requests already logged. False if that empties a
    /// slab at a request its log counts no reset at (the state is spoilt).
    fn put_down(&mut self, put: &[(usize, u32)]) -> bool {
        for &(op, id) in put {
            let kind = self.kind(id).expect("no allocation spans slabs");
            if !self.held.leave_all(&kind, op) {
                return false;
            }
        }
        let ids: Vec<u32> = put.iter().map(|p| p.1).collect();
        self.r.release(&ids);
        self.pending.retain(|p| put.iter().all(|q| q.0 != p.op));
        self.put.extend(put.iter().copied());
        true
    }

    /// Counts allocation `id`, made at request `i`, in the slabs it lies
    /// in (none if a manager refused it); false if it spans slabs.
    fn arrive(&mut self, id: u32, i: usize) -> bool {
        if !self.r.holds(id) {
            return true;
        }
        let Some(kind) = self.kind(id) else {
            return false;
        };
        for (m, slab) in kind.into_iter().enumerate() {
            self.held.arrive(m, slab, i);
        }
        true
    }

    /// Frees allocation `id` as request `i`, which the logs count resets
    /// at: the slabs it leaves empty reset.
    fn free_now(&mut self, logs: &[&[LoggedOp]], i: usize, id: u32) {
        let slabs = self.kind(id).expect("no allocation spans slabs");
        self.r.apply_free(logs, i, alloc::vec![id]);
        for (m, slab) in slabs.into_iter().enumerate() {
            if self.r.mms[m].slabs()[slab as usize].live_objects() == 0 {
                self.held.reset(m, slab);
            } else {
                let kept = self.held.leave(m, slab, i);
                debug_assert!(kept, "the slab holds objects");
            }
        }
    }

    /// The slab of allocation `id` in each manager.
    fn kind(&self, id: u32) -> Option<Vec<u32>> {
        (0..self.r.mms.len())
            .map(|m| self.r.slab_of(m, id))
            .collect()
    }

    /// The requests replayed so far, pending frees put down where they were.
    fn script(&self) -> Vec<Op> {
        let mut ops = self.r.script();
        for (&op, &id) in &self.put {
            ops[op] = Op::Free {
                ids: alloc::vec![id],
            };
        }
        ops
    }
}

impl Ctx<'_> {
    /// Keeps `c` in `out` if it agrees with the logs after request `i`, else
    /// as the closest dead branch if it is.
    fn keep(&mut self, out: &mut Vec<State>, mut c: State, i: usize) {
        let open = c.pending.first().map_or(i + 1, |p| p.op);
        c.held.forget_before(open);
        let score = c.score(self.logs, i);
        if score == LogCounters::COMPARED * self.logs.len() as u32 {
            out.push(c);
        } else if self.dead.as_ref().is_none_or(|d| score > d.0) {
            self.dead = Some((score, c));
        }
    }

    /// What request `i` makes of `parent`: the branches that agree with every
    /// log after it; when none does, the closest is left in `self.dead`
    /// (`parent` itself when no branch was made). `None` when the logs need
    /// what this search does not model (a free of several allocations).
    fn children(&mut self, parent: State, i: usize) -> Result<Option<Vec<State>>, ResolveError> {
        let logs = self.logs;
        let (bytes, objs, refused) = delta(logs[0], i).expect("op in range");
        let mut out = Vec::new();
        if refused || bytes > 0 {
            let mut s = parent;
            s.r = match s.r.next(logs, i).map_err(err(i))? {
                Next::Alloc(r, _) => r,
                Next::Free(..) => unreachable!("an allocation"),
            };
            let id = self.born.binary_search(&i).expect("an allocation");
            // A free while an allocation spans slabs (whose bytes may stay
            // counted) is beyond this search.
            s.spans |= !s.arrive(id as u32, i);
            self.keep(&mut out, s, i);
        } else {
            let (bytes, objs) = ((-bytes) as u64, (-objs) as u64);
            let pending = parent
                .pending
                .iter()
                .filter(|p| (p.bytes, p.objs) == (bytes, objs))
                .count();
            let live = parent
                .r
                .live()
                .filter(|l| (l.1, l.2) == (bytes, objs))
                .count();
            // A free of several allocations is beyond this search.
            if live <= pending || parent.spans {
                return Ok(None);
            }
            let resets: Vec<bool> = (0..logs.len())
                .map(|m| i > 0 && logs[m][i].after.slab_resets > logs[m][i - 1].after.slab_resets)
                .collect();
            match resets.contains(&true) {
                false => {
                    let mut s = parent;
                    s.pending.push(Pending { op: i, bytes, objs });
                    s.r.record(Op::Free { ids: Vec::new() });
                    self.keep(&mut out, s, i);
                }
                true => {
                    out = self.resets(&parent, i, &resets, bytes, objs);
                    if out.is_empty() && self.dead.is_none() {
                        self.dead = Some((0, parent));
                    }
                }
            }
        }
        if (0..logs.len()).any(|m| out.first().is_some_and(|s| s.r.checkpoint(m, i).is_some())) {
            let before = core::mem::take(&mut out);
            for s in before {
                let met = self.at_dump(&s, i);
                let score = s.score(logs, i);
                if met.is_empty() && self.dead.as_ref().is_none_or(|d| d.0 <= score) {
                    self.dead = Some((score, s));
                }
                out.extend(met);
            }
        }
        Ok(Some(out))
    }

    /// The branches of a free of `bytes` and `objs` at request `i` that
    /// empties a slab of each manager whose log counts a reset there
    /// (`resets`): per kind of allocation of that size (where it lies in
    /// every manager), the youngest of its kind freed (the others of its
    /// slabs must have gone before it, by frees made after them: the
    /// youngest is the hardest to cover), and per way of putting pending
    /// frees down to those others that keeps their slabs an object until
    /// now, one branch. Ways that use the earliest frees come first: they
    /// leave the latest, which can cover the most.
    fn resets(
        &mut self,
        s: &State,
        i: usize,
        resets: &[bool],
        bytes: u64,
        objs: u64,
    ) -> Vec<State> {
        let lives: Vec<Other> =
            s.r.live()
                .map(|(id, b, o)| Other {
                    id,
                    born: self.born[id as usize],
                    size: (b, o),
                    kind: s.kind(id).expect("no allocation spans slabs"),
                })
                .collect();
        let mut kinds: BTreeMap<&[u32], u32> = BTreeMap::new();
        for l in lives.iter().filter(|l| l.size == (bytes, objs)) {
            kinds.insert(&l.kind, l.id);
        }
        let mut out = Vec::new();
        for (kind, freed) in kinds {
            // Oldest first, each the earliest free it can take: the first
            // way found leaves the latest frees.
            let others: Vec<&Other> = lives
                .iter()
                .filter(|l| {
                    l.id != freed && (0..resets.len()).any(|m| resets[m] && l.kind[m] == kind[m])
                })
                .collect();
            if !coverable(&s.pending, &others) {
                continue;
            }
            // The ways that keep every slab an object, none beaten by
            // another (see [`Left::beats`]).
            let mut best: Vec<(Vec<(usize, u32)>, Left)> = Vec::new();
            // When every slab the others leave resets, what they leave
            // behind is only the pending frees; then the first way, if no
            // free was turned away before it, leaves the latest of them and
            // beats every other.
            let reset_all = others
                .iter()
                .all(|o| (0..resets.len()).all(|m| resets[m] && o.kind[m] == kind[m]));
            let mut cover = Cover {
                pending: &s.pending,
                others: &others,
                put: Vec::new(),
                held: s.held.clone(),
                turned: false,
                steps: 0,
            };
            cover.from(&mut |way| {
                let (put, turned) = (&way.put, way.turned);
                let mut held = way.held.clone();
                for (m, &slab) in kind.iter().enumerate() {
                    if resets[m] {
                        held.reset(m, slab);
                    }
                }
                let mut pending: BTreeMap<(u64, u64), Vec<usize>> = BTreeMap::new();
                for p in s.pending.iter().filter(|p| put.iter().all(|q| q.0 != p.op)) {
                    pending.entry((p.bytes, p.objs)).or_default().push(p.op);
                }
                let left = Left { pending, held };
                if best.iter().all(|b| !b.1.beats(&left)) {
                    best.retain(|b| !left.beats(&b.1));
                    best.push((put.to_vec(), left));
                }
                !reset_all || turned
            });
            self.incomplete |= cover.steps >= COVERS;
            self.steps += cover.steps;
            for (put, _) in best {
                let mut c = s.clone();
                let kept = c.put_down(&put);
                debug_assert!(kept, "checked above");
                c.free_now(self.logs, i, freed);
                self.keep(&mut out, c, i);
            }
        }
        out
    }

    /// The ways to put every pending frees of `s` down so that each slab of
    /// each log with a dump after request `i` frees what the dump says, and
    /// every slab keeps an object: each pending free, oldest first, goes to
    /// the oldest allocation of its size, made before it, of one kind.
    fn at_dump(&mut self, s: &State, i: usize) -> Vec<State> {
        let deficits: Vec<Option<Vec<i64>>> = (0..s.r.mms.len())
            .map(|m| {
                s.r.checkpoint(m, i).map(|d| {
                    SlabCounters::all(&s.r.mms[m])
                        .iter()
                        .zip(&d.slabs)
                        .map(|(ours, log)| log.frag_watermark as i64 - ours.frag_watermark as i64)
                        .collect()
                })
            })
            .collect();
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let logs = self.logs;
        self.put_all(s, &deficits, &mut |c: State| {
            let fits = (0..c.r.mms.len()).all(|m| {
                c.r.checkpoint(m, i)
                    .is_none_or(|d| SlabCounters::all(&c.r.mms[m]) == d.slabs)
            });
            if fits && c.agrees(logs, i) {
                let mut c = c;
                c.held.forget_before(i + 1);
                if seen.insert(c.key(i + 1)) {
                    out.push(c);
                }
            }
            true
        });
        out
    }

    /// Calls `each` with `s` for every way of putting all its pending frees
    /// down (see [`Ctx::at_dump`]) that leaves every slab of every manager
    /// an object and, where `deficits` has a slab's, exactly that many bytes
    /// freed from it, until `each` returns false. Gives up after [`WAYS`]
    /// steps, marking the search incomplete.
    fn put_all(
        &mut self,
        s: &State,
        deficits: &[Option<Vec<i64>>],
        each: &mut dyn FnMut(State) -> bool,
    ) {
        let mms = s.r.mms.len();
        // The live allocations by kind and size, oldest first.
        let mut groups: BTreeMap<Group, Vec<usize>> = BTreeMap::new();
        let mut ids: BTreeMap<Group, Vec<u32>> = BTreeMap::new();
        for (id, b, o) in s.r.live() {
            let Some(kind) = (0..mms)
                .map(|m| s.r.slab_of(m, id))
                .collect::<Option<Vec<u32>>>()
            else {
                continue;
            };
            groups
                .entry((kind.clone(), b, o))
                .or_default()
                .push(self.born[id as usize]);
            ids.entry((kind, b, o)).or_default().push(id);
        }
        let mut frees = s.pending.clone();
        // Largest first: the fewest slabs can take them.
        frees.sort_by_key(|p| (core::cmp::Reverse(p.bytes), p.op));
        // Per free, manager and slab: the bytes that free and those after it
        // could take from the slab.
        let mut room = alloc::vec![s.r.mms.iter().map(|mm| alloc::vec![0i64; mm.slabs().len()]).collect::<Vec<_>>(); frees.len() + 1];
        for k in (0..frees.len()).rev() {
            room[k] = room[k + 1].clone();
            let p = frees[k];
            let mut slabs = BTreeSet::new();
            for (kind, _, _) in groups.keys().filter(|g| (g.1, g.2) == (p.bytes, p.objs)) {
                slabs.extend(kind.iter().enumerate().map(|(m, &sl)| (m, sl as usize)));
            }
            for (m, sl) in slabs {
                room[k][m][sl] += p.bytes as i64;
            }
        }
        let mut ways = Ways {
            groups: groups
                .into_iter()
                .map(|(k, born)| (k, born, Vec::new()))
                .collect(),
            frees,
            room,
            need: deficits
                .iter()
                .zip(&s.r.mms)
                .map(|(d, mm)| {
                    d.clone()
                        .unwrap_or_else(|| alloc::vec![i64::MAX / 2; mm.slabs().len()])
                })
                .collect(),
            bounded: deficits.iter().map(Option::is_some).collect(),
            left: s
                .r
                .mms
                .iter()
                .map(|mm| mm.slabs().iter().map(|sl| sl.live_objects()).collect())
                .collect(),
            chosen: Vec::new(),
            steps: 0,
        };
        let ids: Vec<Vec<u32>> = ids.into_values().collect();
        let mut oldest = s.pending.clone();
        oldest.sort_by_key(|p| p.op);
        let mut settled = 0;
        let mut capped = false;
        ways.from(0, &mut |ways: &Ways| {
            let mut settle = Settle {
                frees: &oldest,
                groups: &ways.groups,
                took: alloc::vec![Vec::new(); ways.groups.len()],
                dead: BTreeSet::new(),
                steps: 0,
            };
            // Every settling of one way frees the same allocations and
            // leaves no free pending: what follows is the same, one will do.
            let mut held = s.held.clone();
            let mut put = None;
            settle.from(0, &mut held, &mut |took| {
                put = Some(
                    took.iter()
                        .zip(&ids)
                        .flat_map(|(frees, ids)| frees.iter().copied().zip(ids.iter().copied()))
                        .collect::<Vec<(usize, u32)>>(),
                );
                false
            });
            settled += settle.steps;
            capped |= settle.steps >= SETTLE || settled >= WAYS;
            let Some(put) = put else {
                return settled < WAYS;
            };
            let mut c = s.clone();
            let kept = c.put_down(&put);
            debug_assert!(kept, "settled frees keep every slab an object");
            each(c) && settled < WAYS
        });
        self.incomplete |= capped || ways.steps >= WAYS;
        self.steps += ways.steps + settled;
    }
}

/// An allocation a reset needs gone: id, request that made it, bytes and
/// objects, slab in every manager.
struct Other {
    id: u32,
    born: usize,
    size: (u64, u64),
    kind: Vec<u32>,
}

/// What a way of putting frees down at a reset leaves: the frees still
/// pending and what each slab held.
struct Left {
    /// The pending frees' requests by size, in order.
    pending: BTreeMap<(u64, u64), Vec<usize>>,
    held: Occupancy,
}

impl Left {
    /// Whether this leaves every size's pending frees, in order, no older
    /// than `other`'s and every slab holding no less: then whatever requests
    /// come next, any way of putting frees down that `other` can go on
    /// with, this can (a later free covers what an earlier one can, and
    /// empties a slab no sooner).
    fn beats(&self, other: &Left) -> bool {
        let (mine, theirs) = (&self.pending, &other.pending);
        mine.len() == theirs.len()
            && mine.iter().zip(theirs).all(|((a, ops), (b, other_ops))| {
                a == b
                    && ops.len() == other_ops.len()
                    && ops.iter().zip(other_ops).all(|(x, y)| x >= y)
            })
            && self.held.holds_no_less(&other.held)
    }
}

/// Whether `pending` has, for every allocation of `others` (oldest first), a free of its
/// size made after it, none twice (slabs aside): the oldest allocations
/// first, each the earliest free left that it can take, as such matchings
/// go.
fn coverable(pending: &[Pending], others: &[&Other]) -> bool {
    let mut used = alloc::vec![false; pending.len()];
    others.iter().all(|o| {
        let free = (0..pending.len()).find(|&k| {
            !used[k] && (pending[k].bytes, pending[k].objs) == o.size && pending[k].op > o.born
        });
        free.inspect(|&k| used[k] = true).is_some()
    })
}

/// The search of [`Ctx::resets`]: every way to put pending frees down to
/// the allocations a reset needs gone, each a free of its size made after
/// it, none twice, none leaving a slab empty.
struct Cover<'a> {
    pending: &'a [Pending],
    /// The allocations, oldest first.
    others: &'a [&'a Other],
    /// The frees put down so far (request, allocation), one per other.
    put: Vec<(usize, u32)>,
    /// What the slabs held, as the frees in `put` left them.
    held: Occupancy,
    /// Whether a free was turned away for emptying a slab.
    turned: bool,
    steps: u64,
}

impl Cover<'_> {
    /// Puts frees down to the others from `put.len()` on, calling `each`
    /// with every way found; false once `each` asked to stop or [`COVERS`]
    /// steps ran out.
    fn from(&mut self, each: &mut dyn FnMut(&Cover) -> bool) -> bool {
        self.steps += 1;
        let k = self.put.len();
        let Some(&o) = self.others.get(k) else {
            return each(self);
        };
        // Of one size and kind, the older takes the older free: any other
        // order is the same way.
        let twin = (0..k)
            .rev()
            .find(|&j| (self.others[j].size, &self.others[j].kind) == (o.size, &o.kind));
        let after = twin.map_or(o.born, |j| o.born.max(self.put[j].0));
        for p in self.pending {
            if self.steps >= COVERS {
                return false;
            }
            if (p.bytes, p.objs) != o.size || p.op <= after || self.put.iter().any(|q| q.0 == p.op)
            {
                continue;
            }
            if !self.held.leave_all(&o.kind, p.op) {
                self.turned = true;
                continue;
            }
            self.put.push((p.op, o.id));
            let go_on = self.from(each);
            self.put.pop();
            self.held.take_back_all(&o.kind, p.op);
            if !go_on {
                return false;
            }
        }
        true
    }
}

/// Allocations of one kind and size: their slab in each manager, bytes,
/// objects.
type Group = (Vec<u32>, u64, u64);

/// The search of [`Ctx::put_all`].
struct Ways {
    /// Live allocations of one kind (slab in every manager) and size: the
    /// kind and size, when each was made (oldest first), and the requests
    /// of the pending frees put down to them.
    groups: Vec<(Group, Vec<usize>, Vec<usize>)>,
    /// The pending frees, in the order they are put down.
    frees: Vec<Pending>,
    /// Per free `k`, manager and slab: the bytes frees `k..` could take from it.
    room: Vec<Vec<Vec<i64>>>,
    /// Per manager and slab: bytes still to free.
    need: Vec<Vec<i64>>,
    /// Per manager: whether its slabs must free exactly [`Ways::need`].
    bounded: Vec<bool>,
    /// Per manager and slab: objects left.
    left: Vec<Vec<u64>>,
    /// The group each free put down so far went to.
    chosen: Vec<usize>,
    steps: u64,
}

impl Ways {
    /// Puts free `k` and those after it down; false once `each` asked to
    /// stop or the steps ran out.
    fn from(&mut self, k: usize, each: &mut dyn FnMut(&Ways) -> bool) -> bool {
        self.steps += 1;
        if self.steps >= WAYS {
            return false;
        }
        let short = self
            .need
            .iter()
            .zip(&self.bounded)
            .zip(&self.room[k])
            .any(|((need, &b), room)| b && need.iter().zip(room).any(|(n, r)| n > r));
        if short || (!same_size(&self.frees, k) && !self.composable(k)) {
            return true;
        }
        let Some(&p) = self.frees.get(k) else {
            let met = self
                .need
                .iter()
                .zip(&self.bounded)
                .all(|(n, &b)| !b || n.iter().all(|&n| n == 0));
            return !met || each(self);
        };
        // Frees of one size go to groups in order: which free takes which
        // allocation is settled at the end ([`Ways::matched`]).
        let first = if same_size(&self.frees, k) {
            self.chosen[k - 1]
        } else {
            0
        };
        for g in first..self.groups.len() {
            let ((ref kind, b, o), ref born, ref frees) = self.groups[g];
            if (b, o) != (p.bytes, p.objs) || frees.len() >= born.len() {
                continue;
            }
            let kind = kind.clone();
            let fits = kind.iter().enumerate().all(|(m, &sl)| {
                self.left[m][sl as usize] > o && self.need[m][sl as usize] >= b as i64
            });
            if !fits {
                continue;
            }
            self.shift(&kind, b, o, true);
            self.groups[g].2.push(p.op);
            self.chosen.push(g);
            let go_on = self.from(k + 1, each);
            self.chosen.pop();
            self.groups[g].2.pop();
            self.shift(&kind, b, o, false);
            if !go_on {
                return false;
            }
        }
        true
    }

    /// Whether what each slab must still free is a sum of some of frees
    /// `k..`, of the sizes it holds, each size at most as often as it holds
    /// it: checked where the frees change size.
    fn composable(&self, k: usize) -> bool {
        let mut count: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for p in &self.frees[k..] {
            *count.entry((p.bytes, p.objs)).or_default() += 1;
        }
        (0..self.need.len()).filter(|&m| self.bounded[m]).all(|m| {
            self.need[m].iter().enumerate().all(|(sl, &need)| {
                if need <= 0 {
                    return need == 0;
                }
                let mut held: BTreeMap<(u64, u64), u64> = BTreeMap::new();
                for ((kind, b, o), born, got) in &self.groups {
                    if kind[m] as usize == sl {
                        *held.entry((*b, *o)).or_default() += (born.len() - got.len()) as u64;
                    }
                }
                let mut sums = Sums::zero(need as usize / 16 + 1);
                for (size, n) in held {
                    let n = n.min(count.get(&size).copied().unwrap_or(0));
                    sums = sums.add(size.0 / 16, n);
                }
                sums.contains(need as u64 / 16)
            })
        })
    }

    /// Takes (or gives back) `o` objects of `b` bytes from slabs `kind`.
    fn shift(&mut self, kind: &[u32], b: u64, o: u64, take: bool) {
        for (m, &sl) in kind.iter().enumerate() {
            let (left, need) = (
                &mut self.left[m][sl as usize],
                &mut self.need[m][sl as usize],
            );
            if take {
                (*left, *need) = (*left - o, *need - b as i64);
            } else {
                (*left, *need) = (*left + o, *need + b as i64);
            }
        }
    }
}

/// The search that gives each pending free of one way (the frees each group
/// of [`Ways`] takes, counted) its allocation: a free goes to the oldest
/// allocation of its group not yet taken, which must be older than it, and
/// must leave the group's slabs an object at every request
/// ([`Occupancy`]).
struct Settle<'a> {
    /// The pending frees, oldest first.
    frees: &'a [Pending],
    groups: &'a [(Group, Vec<usize>, Vec<usize>)],
    /// Per group: the requests of the frees it took so far, oldest first.
    took: Vec<Vec<usize>>,
    /// Points known to lead nowhere: the next free, and how many each group
    /// took. They say all that matters for what is left: with the frees
    /// taken older than those left, every slab's count after every request
    /// still open follows from how many it lost.
    dead: BTreeSet<(usize, Vec<usize>)>,
    steps: u64,
}

impl Settle<'_> {
    /// Settles free `k` and those after it, calling `each` with what every
    /// group took; false once `each` asked to stop or [`SETTLE`] steps ran out.
    fn from(
        &mut self,
        k: usize,
        held: &mut Occupancy,
        each: &mut dyn FnMut(&[Vec<usize>]) -> bool,
    ) -> bool {
        self.steps += 1;
        if self.steps >= SETTLE {
            return false;
        }
        let Some(&p) = self.frees.get(k) else {
            return each(&self.took);
        };
        let point = (k, self.took.iter().map(Vec::len).collect::<Vec<_>>());
        if self.dead.contains(&point) {
            return true;
        }
        for g in 0..self.groups.len() {
            let ((ref kind, b, o), ref born, ref got) = self.groups[g];
            let n = self.took[g].len();
            if (b, o) != (p.bytes, p.objs) || n >= got.len() || born[n] >= p.op {
                continue;
            }
            if !held.leave_all(kind, p.op) {
                continue;
            }
            self.took[g].push(p.op);
            let go_on = self.from(k + 1, held, each);
            self.took[g].pop();
            held.take_back_all(kind, p.op);
            if !go_on {
                return false;
            }
        }
        self.dead.insert(point);
        true
    }
}

/// Whether free `k` has the size of the one before it.
fn same_size(frees: &[Pending], k: usize) -> bool {
    k > 0
        && k < frees.len()
        && (frees[k - 1].bytes, frees[k - 1].objs) == (frees[k].bytes, frees[k].objs)
}

/// Searches depth-first from `root` (before request 0), frees deferred.
/// `None` when the logs need what it does not model (the watermark lifted,
/// a policy that looks at what slabs hold, a free of several allocations).
pub(crate) fn defer(logs: &[&[LoggedOp]], root: Replay) -> Result<Option<End>, ResolveError> {
    let kept = root
        .mms
        .iter()
        .all(|mm| mm.rule() == WatermarkRule::Kept && mm.policy() != PolicyKind::ClassFit);
    if !kept {
        return Ok(None);
    }
    let n = logs[0].len();
    let born = (0..n)
        .filter(|&i| delta(logs[0], i).is_some_and(|(b, _, refused)| refused || b > 0))
        .collect();
    let mut ctx = Ctx {
        logs,
        born,
        incomplete: false,
        steps: 0,
        dead: None,
    };
    let mut seen: BTreeSet<u128> = BTreeSet::new();
    let mut stack: Vec<(State, usize)> = alloc::vec![(
        State {
            r: root.clone(),
            pending: Vec::new(),
            put: BTreeMap::new(),
            held: Occupancy::new(root.mms.len()),
            spans: false,
        },
        0
    )];
    let mut deepest: Option<Deepest<State>> = None;
    let (mut branches, mut work) = (0u64, 0u64);
    while let Some((s, i)) = stack.pop() {
        if work + ctx.steps >= BUDGET {
            ctx.incomplete = true;
            break;
        }
        if i == n {
            if let Some(r) = ctx.finish(&root, &s)? {
                return Ok(Some(End::Done(r)));
            }
            ctx.incomplete = true;
            continue;
        }
        work += 1;
        let Some(children) = ctx.children(s, i)? else {
            return Ok(None);
        };
        let dead = ctx.dead.take();
        if children.is_empty() {
            branches += 1;
            let (score, closest) = dead.expect("the closest dead branch is kept");
            Deepest::offer(&mut deepest, i, score, closest);
            continue;
        }
        let many = children.len() > 1;
        for c in children.into_iter().rev() {
            if many && !seen.insert(c.key(i + 1)) {
                branches += 1;
                continue;
            }
            stack.push((c, i + 1));
        }
    }
    // No death: every branch that got to the end failed its replay.
    let Some(d) = deepest else {
        return Ok(None);
    };
    let closest = d
        .closest
        .counters()
        .unwrap_or_else(|| d.closest.r.counters());
    let death = Death {
        op: d.op,
        branches,
        replayed: work,
        exhaustive: !ctx.incomplete,
        closest,
        closest_slabs: d.closest.r.slabs(),
    };
    let (replay, from) = ctx.replayed(&root, &d.closest)?;
    Ok(Some(End::Died(replay, from, death)))
}

impl Ctx<'_> {
    /// The replay of a branch that got to the end, its pending frees put
    /// down, if every request agrees with the logs.
    fn finish(&mut self, root: &Replay, s: &State) -> Result<Option<Replay>, ResolveError> {
        let mut done = None;
        self.put_all(s, &alloc::vec![None; s.r.mms.len()], &mut |c| {
            done = Some(c);
            false
        });
        let Some(c) = done else {
            return Ok(None);
        };
        let (r, agreed) = self.replayed(root, &c)?;
        Ok((agreed == self.logs[0].len()).then_some(r))
    }

    /// Replays a branch's requests on `root`, its pending frees put down
    /// where they can be, as long as every log agrees: the replay and how
    /// many requests it got through.
    fn replayed(&mut self, root: &Replay, s: &State) -> Result<(Replay, usize), ResolveError> {
        let mut s = s.clone();
        if !s.pending.is_empty() {
            let mut done = None;
            self.put_all(&s, &alloc::vec![None; s.r.mms.len()], &mut |c| {
                done = Some(c);
                false
            });
            s = done.unwrap_or(s);
        }
        let mut r = root.clone();
        let script = s.script();
        let n = script.len();
        for (i, op) in script.into_iter().enumerate() {
            let next = r.clone().next(self.logs, i).map_err(err(i))?;
            let (b, ok) = match (next, op) {
                (Next::Alloc(b, ok), _) => (b, ok),
                (Next::Free(mut b, sets, _), Op::Free { ids }) if !ids.is_empty() => {
                    b.ambiguous_frees += (sets.len() > 1) as usize;
                    b.apply_free(self.logs, i, ids);
                    let ok = b.agrees(self.logs, i);
                    (b, ok)
                }
                _ => return Ok((r, i)),
            };
            if !ok {
                return Ok((r, i));
            }
            r = b;
        }
        Ok((r, n))
    }
}
