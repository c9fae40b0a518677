//! One branch of the recovery: the logs' requests replayed so far, one
//! manager per log, and what one more logged request can make of it.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::hash::{Hash, Hasher};

use retype_core::mm::slab::{Slab, WatermarkRule};
use retype_core::mm::{AllocId, MemoryManager, ObjDesc, Stats};
use retype_core::rng::mix;
use retype_core::workload::Op;

use crate::dumps::Dumps;
use crate::log::{delta, descriptor, Checkpoint, LogCounters, LoggedOp, SlabCounters};

/// The requests recovered so far, newest first, shared between branches.
pub(crate) struct History {
    pub op: Op,
    pub prev: Option<Rc<History>>,
}

/// One replay of the logs in progress, one manager per log.
#[derive(Clone)]
pub(crate) struct Replay {
    pub mms: Vec<MemoryManager>,
    /// Each log's per-slab dumps (shared by all branches).
    dumps: Rc<[Dumps]>,
    /// Live allocations: id → (handle in each manager, bytes, objects).
    live: BTreeMap<u32, (Vec<AllocId>, u64, u64)>,
    /// The multiset of where live allocations lie, as a sum of one hash per
    /// allocation ([`Replay::signature`]): kept as they come and go, so that
    /// [`Replay::key`] costs no sort of the live allocations.
    live_sum: u128,
    next_id: u32,
    pub history: Option<Rc<History>>,
    /// Frees on this branch for which several sets of allocations agreed.
    pub ambiguous_frees: usize,
    pub unsized_refusals: usize,
    /// Requests after which a log's bytes in use, slab resets and both
    /// fragmentations equal ours, summed over the logs: what the study
    /// reports as exact agreement.
    pub matched: usize,
}

/// What logged request `i` makes of a branch.
pub(crate) enum Next {
    /// An allocation (or a refused one), replayed; whether every log agrees.
    Alloc(Replay, bool),
    /// A free, not yet replayed: the sets of live allocations adding up to
    /// its drop that agree best with the logs (none if no set adds up), and
    /// whether they agree fully.
    Free(Replay, Vec<Vec<u32>>, bool),
}

impl Replay {
    pub fn new(mms: Vec<MemoryManager>, dumps: Vec<Dumps>) -> Replay {
        Replay {
            mms,
            dumps: dumps.into(),
            live: BTreeMap::new(),
            live_sum: 0,
            next_id: 0,
            history: None,
            ambiguous_frees: 0,
            unsized_refusals: 0,
            matched: 0,
        }
    }

    /// The counters of every manager, as a log would print them.
    pub fn counters(&self) -> Vec<LogCounters> {
        self.mms
            .iter()
            .map(|mm| LogCounters::of(mm.stats()))
            .collect()
    }

    /// Every manager's slabs, as a per-slab dump would print them.
    pub fn slabs(&self) -> Vec<Vec<SlabCounters>> {
        self.mms.iter().map(SlabCounters::all).collect()
    }

    /// Log `m`'s per-slab dump after op `i`, if it has one.
    pub fn checkpoint(&self, m: usize, i: usize) -> Option<&Checkpoint> {
        self.dumps[m].at(i)
    }

    /// How many of the logs' checks the managers pass after op `i` (see
    /// [`Replay::score`]).
    pub fn agreement(&self, logs: &[&[LoggedOp]], i: usize) -> u32 {
        self.mms
            .iter()
            .enumerate()
            .map(|(m, mm)| {
                self.score(
                    logs,
                    m,
                    i,
                    mm.stats(),
                    &mm.slabs().iter().collect::<Vec<_>>(),
                )
            })
            .sum()
    }

    /// How far the slabs are from every log's next dump after op `i`: the
    /// bytes by which watermarks and fragmentations differ, summed. Zero when
    /// no dump follows.
    pub fn distance(&self, i: usize) -> u64 {
        self.mms
            .iter()
            .enumerate()
            .map(|(m, mm)| {
                self.dumps[m].next(i).map_or(0, |d| {
                    SlabCounters::all(mm)
                        .iter()
                        .zip(&d.slabs)
                        .map(|(s, d)| {
                            s.watermark.abs_diff(d.watermark)
                                + s.frag_watermark.abs_diff(d.frag_watermark)
                                + s.frag_alignment.abs_diff(d.frag_alignment)
                        })
                        .sum::<u64>()
                })
            })
            .sum()
    }

    /// The score at which every check of every log passes after op `i`.
    fn full(&self, i: usize) -> u32 {
        let dumps = (0..self.mms.len())
            .filter(|&m| self.checkpoint(m, i).is_some())
            .count() as u32;
        (LogCounters::COMPARED + 1) * self.mms.len() as u32 + dumps
    }

    /// How many of log `m`'s checks manager `m` passes after op `i` with
    /// counters `stats` and slabs `slabs`: each compared counter; the dump
    /// after `i`, if the log has one, with every slab agreeing; and whether
    /// the log's next dump can still be reached ([`Dumps::reachable`]).
    fn score(
        &self,
        logs: &[&[LoggedOp]],
        m: usize,
        i: usize,
        stats: &Stats,
        slabs: &[&Slab],
    ) -> u32 {
        let counters = LogCounters::of(stats).agreement(&logs[m][i].after);
        let dump = self.checkpoint(m, i).is_some_and(|d| {
            d.slabs.len() == slabs.len()
                && slabs
                    .iter()
                    .zip(&d.slabs)
                    .all(|(s, d)| SlabCounters::of(s) == *d)
        });
        let reachable =
            self.mms[m].rule() == WatermarkRule::Lifted || self.dumps[m].reachable(slabs, i);
        counters + dump as u32 + reachable as u32
    }

    /// Counts op `i` in [`Replay::matched`], once replayed.
    fn settle(&mut self, logs: &[&[LoggedOp]], i: usize) {
        self.matched += self
            .counters()
            .iter()
            .zip(logs)
            .filter(|(c, log)| c.exact(&log[i].after))
            .count();
    }

    /// Replays logged request `i` if it is an allocation; a free is left to
    /// the caller ([`Replay::apply_free`]) with the sets to choose from.
    /// Errors are the log's own: counters no request can produce.
    pub fn next(mut self, logs: &[&[LoggedOp]], i: usize) -> Result<Next, &'static str> {
        let (bytes, objs, refused) = delta(logs[0], i).expect("op in range");
        let desc = if refused {
            let (count, size) = logs.iter().find_map(|l| l[i].refused).unwrap_or_else(|| {
                self.unsized_refusals += 1;
                (1, 4096)
            });
            Some(
                descriptor(count, size)
                    .ok_or("refused request of a size that is no power of two")?,
            )
        } else if bytes > 0 {
            if objs <= 0 || bytes % objs != 0 {
                return Err("bytes grew but objects did not grow in proportion");
            }
            Some(
                descriptor(objs as u64, (bytes / objs) as u64)
                    .ok_or("allocated objects are not a power of two in size")?,
            )
        } else {
            None
        };
        if let Some(desc) = desc {
            self.alloc(desc);
            self.settle(logs, i);
            let agrees = self.agreement(logs, i) == self.full(i);
            return Ok(Next::Alloc(self, agrees));
        }
        if bytes == 0 || objs >= 0 {
            return Err("the counters show neither an allocation, a free nor an OOM");
        }
        let scored: Vec<(u32, Vec<u32>)> = self
            .candidates((-bytes) as u64, (-objs) as u64)
            .into_iter()
            .map(|ids| (self.preview_agreement(logs, i, &ids), ids))
            .collect();
        let top = scored.iter().map(|s| s.0).max().unwrap_or(0);
        let best = scored
            .into_iter()
            .filter(|s| s.0 == top)
            .map(|s| s.1)
            .collect();
        let agrees = top == self.full(i);
        Ok(Next::Free(self, best, agrees))
    }

    /// Replays logged request `i` as the free of `ids`.
    pub fn apply_free(&mut self, logs: &[&[LoggedOp]], i: usize, ids: Vec<u32>) {
        self.free(ids);
        self.settle(logs, i);
    }

    /// How many of the logs' checks the managers would pass after freeing
    /// `ids` as request `i` (as [`Replay::agreement`]), previewed.
    fn preview_agreement(&self, logs: &[&[LoggedOp]], i: usize, ids: &[u32]) -> u32 {
        self.mms
            .iter()
            .enumerate()
            .map(|(m, mm)| {
                let handles: Vec<AllocId> = ids.iter().map(|id| self.live[id].0[m]).collect();
                let (stats, touched) = mm.preview_free_slabs(&handles).expect("live allocations");
                let slabs: Vec<&Slab> = (0..mm.slabs().len())
                    .map(|s| touched.get(&(s as u32)).unwrap_or(&mm.slabs()[s]))
                    .collect();
                self.score(logs, m, i, &stats, &slabs)
            })
            .sum()
    }

    /// Whether every check of every log passes after op `i`, replayed.
    pub fn agrees(&self, logs: &[&[LoggedOp]], i: usize) -> bool {
        self.agreement(logs, i) == self.full(i)
    }

    /// The live allocations: id, bytes, objects.
    pub fn live(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.live.iter().map(|(&id, (_, b, o))| (id, *b, *o))
    }

    /// Whether allocation `id` is live.
    pub fn holds(&self, id: u32) -> bool {
        self.live.contains_key(&id)
    }

    /// The one slab of manager `m` that allocation `id` lies in; `None` if
    /// it spans several.
    pub fn slab_of(&self, m: usize, id: u32) -> Option<u32> {
        let mut slabs = self.mms[m].placement(self.live[&id].0[m])?.map(|p| p.0);
        let first = slabs.next()?;
        slabs.all(|s| s == first).then_some(first)
    }

    /// Frees `ids` as requests already logged (their ops are recorded
    /// apart): no history, no settling.
    pub fn release(&mut self, ids: &[u32]) {
        for &id in ids {
            self.live_sum = self.live_sum.wrapping_sub(self.signature_hash(id));
            let handles = self.live.remove(&id).expect("live id").0;
            for (mm, h) in self.mms.iter_mut().zip(handles) {
                mm.free_request(&[h]).expect("live allocation");
            }
        }
    }

    /// The requests replayed so far, oldest first.
    pub fn script(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut node = self.history.clone();
        while let Some(h) = node {
            ops.push(h.op.clone());
            node = h.prev.clone();
        }
        ops.reverse();
        ops
    }

    pub fn record(&mut self, op: Op) {
        self.history = Some(Rc::new(History {
            op,
            prev: self.history.take(),
        }));
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
            self.live_sum = self.live_sum.wrapping_add(self.signature_hash(id));
        }
        self.record(Op::Alloc { id, request });
    }

    /// Frees the live allocations `ids` as one request.
    fn free(&mut self, ids: Vec<u32>) {
        for &id in &ids {
            self.live_sum = self.live_sum.wrapping_sub(self.signature_hash(id));
        }
        let handles: Vec<Vec<AllocId>> = ids
            .iter()
            .map(|id| self.live.remove(id).expect("live id").0)
            .collect();
        for (m, mm) in self.mms.iter_mut().enumerate() {
            let mine: Vec<AllocId> = handles.iter().map(|h| h[m]).collect();
            mm.free_request(&mine).expect("live allocations");
        }
        self.record(Op::Free { ids });
    }

    /// Where allocation `id`'s objects lie in every manager: what freeing it
    /// does, whatever its id.
    fn signature(&self, id: u32) -> Vec<(usize, u32, u32, u32)> {
        let mut sig = Vec::new();
        for (m, mm) in self.mms.iter().enumerate() {
            sig.extend(
                mm.placement(self.live[&id].0[m])
                    .expect("live")
                    .map(|(s, b, c)| (m, s, b, c)),
            );
        }
        sig
    }

    /// [`Replay::signature`] of `id` as a 128-bit hash.
    fn signature_hash(&self, id: u32) -> u128 {
        let mut h = Fingerprint::default();
        self.signature(id).hash(&mut h);
        // Mixed to the last bit: sums of raw lanes would cancel too easily.
        (u128::from(mix(h.a)) << 64) | u128::from(mix(h.b ^ 0x2545_f491_4f6c_dd1d))
    }

    /// What makes two branches before the same request equivalent: the
    /// managers (counters, slabs, policies) and the multiset of where live
    /// allocations lie. Ids and the requests that led there do not matter:
    /// the same requests to come do the same to both. 128 bits, so that two
    /// different states practically never share a key.
    pub fn key(&self, i: usize) -> u128 {
        let mut h = Fingerprint::default();
        i.hash(&mut h);
        for mm in &self.mms {
            mm.fingerprint(&mut h);
        }
        self.live_sum.hash(&mut h);
        h.finish128()
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
        let mut seen = BTreeSet::new();
        out.retain(|ids| {
            let mut sig: Vec<(usize, u32, u32, u32)> =
                ids.iter().flat_map(|&id| self.signature(id)).collect();
            sig.sort_unstable();
            seen.insert(sig)
        });
        out
    }
}

/// A deterministic 128-bit hash (two multiply-rotate lanes), for the memo of
/// dead states: no_std has no hasher of its own to rely on.
#[derive(Default)]
pub(crate) struct Fingerprint {
    a: u64,
    b: u64,
}

impl Fingerprint {
    pub fn finish128(&self) -> u128 {
        (u128::from(self.a) << 64) | u128::from(self.b)
    }
}

impl Hasher for Fingerprint {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.a = (self.a.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        self.b = (self.b.rotate_left(23) ^ x ^ 0x9e37_79b9_7f4a_7c15)
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
    }

    fn finish(&self) -> u64 {
        self.a ^ self.b
    }
}
