//! Revoke (seed 001 Algorithm 5): the revoking node taking ownership (the
//! owner's side is in `ownership`), then its marks and commits, and every
//! node's mark and commit, which deletes by a delete job (see `delete`).

use alloc::vec::Vec;

use super::job::JobReply;
use super::msg::Msg;
use super::mutation::Mutation;
use super::node::{Node, RevokePhase, Work};
use super::request::{Done, Error};
use super::slot::{NodeId, OpRef, Slot, SlotState};
use crate::caps::cap::Key;
use crate::caps::mdb::CapId;

impl Node {
    /// Revoke (Algorithm 5): a foreign copy first takes ownership; then every
    /// node that may hold a copy or descendant marks them, and once all have,
    /// deletes them. Memory that never left this node is revoked here alone.
    pub(crate) fn revoke(&mut self, op: OpRef, s: Slot) -> Result<Option<Done>, Error> {
        let (id, cap) = self.take(s)?;
        let key = cap.key();
        self.set_state(id, SlotState::Locked(op));
        let owner = self.meta[&id].owner;
        let work = Work::Revoke {
            slot: id,
            key,
            targets: Vec::new(),
            phase: RevokePhase::Retrieve,
            pending: 0,
            reclaimed: Vec::new(),
        };
        self.ops.insert(op, work);
        if owner == self.id {
            self.revoke_marks(op);
        } else {
            self.send(owner, Msg::Retrieve { op, key });
        }
        Ok(None)
    }

    /// The revoking node owns the key: holds it, and asks every node that
    /// may hold a copy or descendant (this one alone if the memory never
    /// left it) to mark them.
    fn revoke_marks(&mut self, op: OpRef) {
        let Some(&Work::Revoke { slot, key, .. }) = self.ops.get(&op) else {
            unreachable!("a revoke in flight")
        };
        let cap = self.caps.cap(slot).expect("the revoked slot is locked");
        let to: Vec<NodeId> = if self.is_local(&cap) {
            Vec::from([self.id])
        } else {
            (0..self.nodes).collect()
        };
        if let Some(Work::Revoke { targets, .. }) = self.ops.get_mut(&op) {
            targets.clone_from(&to);
        }
        self.key_locks.insert(key, op);
        self.revoke_phase(op, RevokePhase::Mark, to.len());
        for n in to {
            self.send(n, Msg::Mark { op, key });
        }
    }

    /// The revoke moves to phase `to` and waits for `n` replies.
    fn revoke_phase(&mut self, op: OpRef, to: RevokePhase, n: usize) {
        if let Some(Work::Revoke { phase, pending, .. }) = self.ops.get_mut(&op) {
            *phase = to;
            *pending = n;
        }
    }

    /// `Retrieved`: the owner's answer to the revoke of a foreign copy. With
    /// ownership the marks start; without it the revoke is refused, to be
    /// asked again.
    pub(crate) fn retrieved(&mut self, op: OpRef, ok: bool) {
        let Some(Work::Revoke { slot, key, .. }) = self.ops.get(&op) else {
            unreachable!("retrieved without a revoke")
        };
        let (slot, key) = (*slot, *key);
        if ok {
            self.set_owner(&key, self.id);
            self.revoke_marks(op);
        } else {
            self.ops.remove(&op);
            self.set_state(slot, SlotState::Ready);
            self.finish(op, Err(Error::Locked));
        }
    }

    /// What a revoke of `key` deletes here, but for the revoked slot itself
    /// and what other deletes already hold.
    fn scope(&self, op: OpRef, key: &Key) -> Vec<CapId> {
        self.caps
            .revoke_scope(key)
            .into_iter()
            .filter(|id| match self.meta[id].state {
                SlotState::Ready => true,
                SlotState::InDelete(o) => o == op,
                SlotState::Locked(o) => o != op,
            })
            .collect()
    }

    /// A revoke's mark: waits while an operation in flight holds a slot in
    /// its scope (that operation finishes without waiting for anyone).
    /// Slots another delete holds are left to it: merged, as in §4.3. Until
    /// the commit, what of the scope arrives is marked as it lands.
    pub(crate) fn mark(&mut self, from: NodeId, op: OpRef, key: Key) {
        let scope = self.scope(op, &key);
        if scope
            .iter()
            .any(|id| matches!(self.meta[id].state, SlotState::Locked(_)))
        {
            self.parked.push((from, Msg::Mark { op, key }));
            return;
        }
        for id in scope {
            self.set_state(id, SlotState::InDelete(op));
        }
        self.revoking.insert(op, key);
        self.send(from, Msg::Marked { op });
    }

    /// `Commit`: deletes what the mark marked here, and what of the revoke's
    /// scope arrived since, by a delete job that answers node `from`.
    pub(crate) fn commit(&mut self, from: NodeId, op: OpRef, key: Key) {
        self.revoking.remove(&op);
        // Slots another delete holds join the list too: the commit
        // waits until that delete has taken them (§4.3: a delete
        // that meets one in progress waits for it).
        let mut scope: Vec<CapId> = self
            .caps
            .revoke_scope(&key)
            .into_iter()
            .filter(|id| self.meta[id].state != SlotState::Locked(op))
            .collect();
        if self.mutated(Mutation::RevokeSkipsSweep) {
            scope.clear();
        }
        for &id in &scope {
            if self.meta[&id].state == SlotState::Ready {
                self.set_state(id, SlotState::InDelete(op));
            }
        }
        self.start_job(op, scope, JobReply::Commit { to: from });
    }

    /// A mark or commit acknowledged, at the revoking node.
    pub(crate) fn revoke_reply(&mut self, op: OpRef, got: Vec<(u64, u64)>) {
        let Some(Work::Revoke {
            pending,
            phase,
            reclaimed,
            targets,
            key,
            ..
        }) = self.ops.get_mut(&op)
        else {
            unreachable!("a revoke reply without a revoke")
        };
        reclaimed.extend(got);
        *pending -= 1;
        if *pending > 0 {
            return;
        }
        match phase {
            RevokePhase::Mark => {
                *phase = RevokePhase::Commit;
                *pending = targets.len();
                let (key, targets) = (*key, targets.clone());
                for n in targets {
                    self.send(n, Msg::Commit { op, key });
                }
            }
            RevokePhase::Commit => {
                let Some(Work::Revoke {
                    slot,
                    key,
                    reclaimed,
                    ..
                }) = self.ops.remove(&op)
                else {
                    unreachable!()
                };
                self.key_locks.remove(&key);
                if let Some(m) = self.meta.get_mut(&slot) {
                    m.state = SlotState::Ready;
                }
                self.finish(op, Ok(Done { reclaimed }));
            }
            RevokePhase::Retrieve => unreachable!("acks before ownership"),
        }
    }
}
