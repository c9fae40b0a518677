//! Operation ids as names, for the model checker's symmetry reduction
//! (docs/model-check.md).
//!
//! The node code uses an operation id only to tell operations apart: it
//! keys maps by ids and looks them up, and where it walks such a map what
//! it does cannot depend on the order (delete jobs are kept in the order
//! they started, see `job::Jobs`, and census records only gain a flag).
//! So renaming the ids throughout a node, its input and its messages gives
//! the renamed step. Every part of a node that names an operation names
//! exactly one, which makes a state's class under renaming cheap to name:
//! what names none, and per id the set of parts that name it, id left out.

use core::hash::{BuildHasher, Hash, Hasher};

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::msg::Msg;
use super::node::Node;
use super::slot::{OpRef, SlotState};

/// What kind of part names an operation, so that equal contents of two
/// kinds hash apart.
#[derive(Hash)]
enum Part {
    Slot,
    KeyLock,
    Revoking,
    Work,
    Job,
    Parked,
    Census,
}

impl SlotState {
    /// The state with the operation left out, and the operation.
    fn split(self) -> (u8, Option<OpRef>) {
        match self {
            SlotState::Ready => (0, None),
            SlotState::Locked(op) => (1, Some(op)),
            SlotState::InDelete(op) => (2, Some(op)),
        }
    }
}

/// `m` with its operation id left out (0): the part of a message that a
/// renaming keeps.
pub fn anonymous(m: &Msg) -> Msg {
    let mut m = m.clone();
    m.op_mut().id = 0;
    m
}

impl Node {
    /// Hashes the node for a search that treats operation ids as names.
    /// What names no operation goes into `h`; each part that names one (a
    /// slot it holds, a key it locks, a revoke marked here, the work it
    /// waits on, its delete job, a parked message, a census record) is hashed alone by `b` with the
    /// id left out, and handed to `part` with the id. Two nodes that differ
    /// by a renaming of ids give the same `h` and, id for renamed id, the
    /// same parts.
    pub fn hash_by_op<H: Hasher>(
        &self,
        h: &mut H,
        b: &impl BuildHasher,
        part: &mut impl FnMut(u64, u64),
    ) {
        debug_assert!(self.local.is_empty() && self.out == Default::default());
        (self.id, self.nodes, &self.caps, self.root, &self.exported).hash(h);
        #[cfg(feature = "mutations")]
        self.mutation.hash(h);
        h.write_usize(self.meta.len());
        for (id, m) in self.meta.iter() {
            let (state, op) = m.state.split();
            (id, m.owner, state).hash(h);
            if let Some(op) = op {
                part(op.id, b.hash_one((Part::Slot, id, state, op.node)));
            }
        }
        let counts = [
            self.key_locks.len(),
            self.revoking.len(),
            self.ops.len(),
            self.jobs.iter().count(),
            self.parked.len(),
            self.recordings.len(),
        ];
        counts.hash(h);
        for (key, op) in &self.key_locks {
            part(op.id, b.hash_one((Part::KeyLock, key, op.node)));
        }
        for (op, key) in &self.revoking {
            part(op.id, b.hash_one((Part::Revoking, key, op.node)));
        }
        for (op, work) in &self.ops {
            part(op.id, b.hash_one((Part::Work, op.node, work)));
        }
        for (i, (op, job)) in self.jobs.iter().enumerate() {
            part(op.id, b.hash_one((Part::Job, i, op.node, job)));
        }
        for (i, (from, m)) in self.parked.iter().enumerate() {
            part(m.op().id, b.hash_one((Part::Parked, i, from, anonymous(m))));
        }
        for ((asker, op), r) in &self.recordings {
            part(op.id, b.hash_one((Part::Census, asker, op.node, r)));
        }
    }

    /// Renames every operation id `i` the node names to `f(i)`: the
    /// symmetry's action on a node, for the model checker's tests.
    pub fn rename_ops(&mut self, f: impl Fn(u64) -> u64) {
        let f = |op: OpRef| OpRef {
            node: op.node,
            id: f(op.id),
        };
        let held: Vec<_> = self.meta.iter().map(|(id, _)| id).collect();
        for id in held {
            let m = self.meta.get_mut(&id).expect("live");
            m.state = match m.state {
                SlotState::Ready => SlotState::Ready,
                SlotState::Locked(op) => SlotState::Locked(f(op)),
                SlotState::InDelete(op) => SlotState::InDelete(f(op)),
            };
        }
        for op in self.key_locks.values_mut() {
            *op = f(*op);
        }
        self.revoking = core::mem::take(&mut self.revoking)
            .into_iter()
            .map(|(op, k)| (f(op), k))
            .collect();
        self.ops = core::mem::take(&mut self.ops)
            .into_iter()
            .map(|(op, w)| (f(op), w))
            .collect();
        for (op, _) in self.jobs.iter_mut() {
            *op = f(*op);
        }
        for (_, m) in &mut self.parked {
            *m.op_mut() = f(m.op());
        }
        self.recordings = core::mem::take(&mut self.recordings)
            .into_iter()
            .map(|((asker, op), r)| ((asker, f(op)), r))
            .collect::<BTreeMap<_, _>>();
    }
}
