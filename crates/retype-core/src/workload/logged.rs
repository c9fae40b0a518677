//! Recovering the requests of a CantripOS log (seed 000's evaluation).
//!
//! The logs print the manager's counters after every request, not the
//! requests. An allocation shows as growth of bytes and objects in use: `b`
//! bytes over `k` objects are `k` objects of `b/k` bytes (every logged bundle
//! is uniform). A refused allocation shows as one more OOM; its size comes
//! from the kernel's "Insufficient memory (k * s bytes needed" message when
//! the log has one. A free shows as a drop of bytes and objects but does not
//! say *which* allocation went: we take the live allocations that add up to
//! exactly that drop (one allocation, or a run of consecutive ones: an
//! application exiting frees everything it holds), replay each candidate on a
//! copy of the manager with the log's own policy, and keep the one whose
//! counters agree best with the log's (oldest first on ties).
//!
//! The log does not name object types; only sizes matter for placement, and a
//! recovered descriptor names its type by its size (see [`type_for_size`]).

use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;

use super::script::Script;
use super::Op;
use crate::mm::{AllocId, MemoryManager, ObjDesc, Stats};
use crate::objects::ObjectType;

/// The counters a CantripOS log prints after each request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub bytes_in_use: u64,
    pub objects_in_use: u64,
    pub slab_resets: u64,
    pub failed_retypes: u64,
    pub ooms: u64,
    pub bytes_requested: u64,
    pub frag_watermark: u64,
    pub frag_alignment: u64,
}

impl LogCounters {
    /// The same counters of one of our runs.
    pub fn of(s: &Stats) -> LogCounters {
        LogCounters {
            bytes_in_use: s.bytes_in_use,
            objects_in_use: s.objects_in_use,
            slab_resets: s.slab_resets,
            failed_retypes: s.failed_retypes,
            ooms: s.ooms,
            bytes_requested: s.bytes_requested,
            frag_watermark: s.frag_watermark,
            frag_alignment: s.frag_alignment,
        }
    }

    /// How many of the counters that place objects agree (0..=5).
    fn agreement(&self, other: &LogCounters) -> u32 {
        (self.bytes_in_use == other.bytes_in_use) as u32
            + (self.objects_in_use == other.objects_in_use) as u32
            + (self.slab_resets == other.slab_resets) as u32
            + (self.frag_watermark == other.frag_watermark) as u32
            + (self.frag_alignment == other.frag_alignment) as u32
    }
}

/// One logged request: the counters after it, and the size of the last
/// retype the kernel refused while serving it, `(count, object bytes)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoggedOp {
    pub after: LogCounters,
    pub refused: Option<(u64, u64)>,
    /// Retired instructions of the request, in `latency_*` logs.
    pub instructions: Option<u64>,
}

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

/// A log's recovered requests, and how sure the recovery is.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub script: Script,
    /// Frees for which more than one set of allocations fitted the drop.
    pub ambiguous_frees: usize,
    /// Refused allocations whose size the log did not give (replayed as one
    /// page: the smallest object that still fails when memory is full).
    pub unsized_refusals: usize,
}

/// The object type a recovered descriptor is named by, from its size.
/// RISC-V 32 sizes: 16 B endpoint, 32 B notification (MCS), 512 B TCB,
/// 4 KiB page; any other size becomes an untyped of that size.
pub fn type_for_size(bytes: u64) -> ObjDesc {
    let bits = bytes.trailing_zeros();
    match bits {
        4 => ObjDesc::new(ObjectType::Endpoint, 0, 1),
        5 => ObjDesc::new(ObjectType::Notification, 0, 1),
        9 => ObjDesc::new(ObjectType::Tcb, 0, 1),
        12 => ObjDesc::new(ObjectType::SmallPage, 0, 1),
        b => ObjDesc::new(ObjectType::Untyped, b, 1),
    }
}

/// How many logged requests a choice between frees looks ahead.
pub const LOOKAHEAD: usize = 48;

/// Recovers the requests of one or more logs that got the same requests
/// (seed 000's runs without OOMs, and its applications), each replayed on a
/// fresh manager with the policy that produced it. Every free must then agree
/// with all the logs at once, which settles most ambiguities.
///
/// Which allocation a free released may show only later: when several
/// choices agree with the logs now, each is replayed [`LOOKAHEAD`] requests
/// further (choosing greedily there) and the one that agrees on the most of
/// them wins, the oldest allocation on ties.
pub fn resolve(logs: Vec<(&[LoggedOp], MemoryManager)>) -> Result<Resolved, ResolveError> {
    let n = logs.first().map_or(0, |l| l.0.len());
    let (logs, mms): (Vec<&[LoggedOp]>, Vec<MemoryManager>) = logs.into_iter().unzip();
    for (i, pair) in logs.windows(2).enumerate() {
        if let Some(op) =
            (0..n.max(pair[1].len())).find(|&j| delta(pair[0], j) != delta(pair[1], j))
        {
            return Err(ResolveError {
                op,
                message: alloc::format!("logs {i} and {} did not get the same requests", i + 1),
            });
        }
    }
    let err = |op: usize| {
        move |message: &str| ResolveError {
            op,
            message: message.into(),
        }
    };
    let mut replay = Replay::new(mms);
    for i in 0..n {
        let mut options = replay.expand(&logs, i, false).map_err(err(i))?;
        replay = if options.len() == 1 {
            options.pop().expect("one option")
        } else {
            let horizon = (i + 1 + LOOKAHEAD).min(n);
            let scores: Vec<usize> = options
                .iter()
                .map(|r| r.clone().greedy(&logs, i + 1..horizon))
                .collect();
            let best = (0..options.len())
                .max_by_key(|&k| (scores[k], core::cmp::Reverse(k)))
                .expect("options");
            options.swap_remove(best)
        };
    }
    let mut ops = Vec::with_capacity(n);
    let mut node = replay.history.clone();
    while let Some(h) = node {
        ops.push(h.op.clone());
        node = h.prev.clone();
    }
    ops.reverse();
    Ok(Resolved {
        script: Script::new(ops),
        ambiguous_frees: replay.ambiguous_frees,
        unsized_refusals: replay.unsized_refusals,
    })
}

/// What request `i` of a log did to bytes and objects in use, and whether it
/// was refused: what two logs of the same requests share.
fn delta(log: &[LoggedOp], i: usize) -> Option<(i64, i64, bool)> {
    let now = log.get(i)?.after;
    let prev = if i == 0 {
        LogCounters::default()
    } else {
        log[i - 1].after
    };
    Some((
        now.bytes_in_use as i64 - prev.bytes_in_use as i64,
        now.objects_in_use as i64 - prev.objects_in_use as i64,
        now.ooms > prev.ooms,
    ))
}

/// The requests recovered so far, newest first, shared between replays.
struct History {
    op: Op,
    prev: Option<Rc<History>>,
}

/// One replay of the logs in progress, one manager per log.
#[derive(Clone)]
struct Replay {
    mms: Vec<MemoryManager>,
    /// Live allocations: id → (handle in each manager, bytes, objects).
    live: BTreeMap<u32, (Vec<AllocId>, u64, u64)>,
    next_id: u32,
    history: Option<Rc<History>>,
    ambiguous_frees: usize,
    unsized_refusals: usize,
}

impl Replay {
    fn new(mms: Vec<MemoryManager>) -> Replay {
        Replay {
            mms,
            live: BTreeMap::new(),
            next_id: 0,
            history: None,
            ambiguous_frees: 0,
            unsized_refusals: 0,
        }
    }

    /// How many counters of all managers agree with their logs after op `i`.
    fn agreement(&self, logs: &[&[LoggedOp]], i: usize) -> u32 {
        self.mms
            .iter()
            .zip(logs)
            .map(|(mm, log)| LogCounters::of(mm.stats()).agreement(&log[i].after))
            .sum()
    }

    /// Replays `ops` choosing the first best option at every free; returns on
    /// how many of them all managers agree fully with their logs.
    fn greedy(mut self, logs: &[&[LoggedOp]], ops: core::ops::Range<usize>) -> usize {
        let full = 5 * self.mms.len() as u32;
        let mut agreed = 0;
        for j in ops {
            match self.expand(logs, j, true) {
                Ok(mut next) => self = next.swap_remove(0),
                Err(_) => break,
            }
            agreed += (self.agreement(logs, j) == full) as usize;
        }
        agreed
    }

    fn record(&mut self, op: Op) {
        self.history = Some(Rc::new(History {
            op,
            prev: self.history.take(),
        }));
    }

    /// The replays that logged request `i` can lead to: one for an
    /// allocation; for a free, one per set of allocations it may have
    /// released, keeping only those that agree best with the logs.
    fn expand(
        mut self,
        logs: &[&[LoggedOp]],
        i: usize,
        first_only: bool,
    ) -> Result<Vec<Replay>, &'static str> {
        let (bytes, objs, refused) = delta(logs[0], i).expect("op in range");
        if refused {
            let (count, size) = logs.iter().find_map(|l| l[i].refused).unwrap_or_else(|| {
                self.unsized_refusals += 1;
                (1, 4096)
            });
            let desc = descriptor(count, size)
                .ok_or("refused request of a size that is no power of two")?;
            self.alloc(desc);
            return Ok(vec![self]);
        }
        if bytes > 0 {
            if objs <= 0 || bytes % objs != 0 {
                return Err("bytes grew but objects did not grow in proportion");
            }
            let desc = descriptor(objs as u64, (bytes / objs) as u64)
                .ok_or("allocated objects are not a power of two in size")?;
            self.alloc(desc);
            return Ok(vec![self]);
        }
        if bytes == 0 || objs >= 0 {
            return Err("the counters show neither an allocation, a free nor an OOM");
        }
        let cands = self.candidates((-bytes) as u64, (-objs) as u64);
        let scored: Vec<(u32, Vec<u32>)> = cands
            .into_iter()
            .map(|ids| {
                let score = self
                    .mms
                    .iter()
                    .enumerate()
                    .map(|(m, mm)| {
                        let handles: Vec<AllocId> =
                            ids.iter().map(|id| self.live[id].0[m]).collect();
                        let after = mm.preview_free(&handles).expect("live allocations");
                        LogCounters::of(&after).agreement(&logs[m][i].after)
                    })
                    .sum();
                (score, ids)
            })
            .collect();
        let top = scored
            .iter()
            .map(|s| s.0)
            .max()
            .ok_or("no live allocations add up to the freed bytes and objects")?;
        let mut best: Vec<Vec<u32>> = scored
            .into_iter()
            .filter(|s| s.0 == top)
            .map(|s| s.1)
            .collect();
        if first_only {
            best.truncate(1);
        }
        self.ambiguous_frees += (best.len() > 1) as usize;
        let mut out = Vec::with_capacity(best.len());
        let last = best.len() - 1;
        for (k, ids) in best.into_iter().enumerate() {
            let mut r = if k == last {
                core::mem::replace(&mut self, Replay::new(Vec::new()))
            } else {
                self.clone()
            };
            r.free(&ids);
            r.record(Op::Free { ids });
            out.push(r);
        }
        Ok(out)
    }

    fn alloc(&mut self, desc: ObjDesc) {
        let request = vec![desc];
        let id = self.next_id;
        self.next_id += 1;
        // A request the log refused may still fit in our model, and the other
        // way round: either way it stays an allocation of that size. An
        // allocation is live only if every manager served it.
        let handles: Vec<AllocId> = self
            .mms
            .iter_mut()
            .filter_map(|mm| mm.alloc(&request).ok())
            .collect();
        if handles.len() == self.mms.len() {
            let bytes = u64::from(desc.count)
                << self.mms[0]
                    .placement(handles[0])
                    .expect("just allocated")
                    .map(|(_, b, _)| b)
                    .next()
                    .unwrap_or(0);
            self.live
                .insert(id, (handles, bytes, u64::from(desc.count)));
        }
        self.record(Op::Alloc { id, request });
    }

    fn free(&mut self, ids: &[u32]) {
        let handles: Vec<Vec<AllocId>> = ids
            .iter()
            .map(|id| self.live.remove(id).expect("live id").0)
            .collect();
        for (m, mm) in self.mms.iter_mut().enumerate() {
            let mine: Vec<AllocId> = handles.iter().map(|h| h[m]).collect();
            mm.free_request(&mine).expect("live allocations");
        }
    }

    /// The sets of live allocations whose bytes and objects add up to a free:
    /// single allocations (oldest first), else runs of consecutive ones. Sets
    /// whose objects lie in the same slabs with the same sizes, in every
    /// manager, leave the managers in the same state; only the oldest is kept.
    fn candidates(&self, bytes: u64, objs: u64) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = self
            .live
            .iter()
            .filter(|(_, (_, b, o))| *b == bytes && *o == objs)
            .map(|(&id, _)| vec![id])
            .collect();
        if out.is_empty() {
            let order: Vec<(u32, u64, u64)> = self
                .live
                .iter()
                .map(|(&id, (_, b, o))| (id, *b, *o))
                .collect();
            for start in 0..order.len() {
                let (mut b, mut o) = (0, 0);
                for (end, &(_, bb, oo)) in order.iter().enumerate().skip(start) {
                    b += bb;
                    o += oo;
                    if b == bytes && o == objs {
                        out.push(order[start..=end].iter().map(|x| x.0).collect());
                    }
                    if b >= bytes || o >= objs {
                        break;
                    }
                }
            }
        }
        let mut seen = alloc::collections::BTreeSet::new();
        out.retain(|ids| {
            let mut sig: Vec<(usize, u32, u32, u32)> = Vec::new();
            for (m, mm) in self.mms.iter().enumerate() {
                for id in ids {
                    sig.extend(
                        mm.placement(self.live[id].0[m])
                            .expect("live")
                            .map(|(s, b, c)| (m, s, b, c)),
                    );
                }
            }
            sig.sort_unstable();
            seen.insert(sig)
        });
        out
    }
}

/// `count` objects of `size` bytes as one descriptor.
fn descriptor(count: u64, size: u64) -> Option<ObjDesc> {
    if !size.is_power_of_two() || size < 16 || count == 0 || count > u64::from(u32::MAX) {
        return None;
    }
    Some(ObjDesc {
        count: count as u32,
        ..type_for_size(size)
    })
}
