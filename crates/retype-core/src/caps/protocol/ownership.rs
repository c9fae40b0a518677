//! Ownership (seed 001 §4.6): what a node does when ownership of a
//! capability moves. An owner deleting its last copy asks the other nodes
//! whether they hold one (`FindCopies`), hands ownership to one that does
//! (`Move`) and tells the rest (`OwnerUpdate`); that side is the delete
//! job's (`delete`). A node revoking a foreign copy first takes ownership
//! from the owner (`Retrieve`), which tells the others the same way; that
//! side is the revoke's (`revoke`). Here are the other nodes' answers and
//! the owner's side of a retrieve.

use super::msg::Msg;
use super::node::{Node, Work};
use super::slot::{NodeId, OpRef, SlotState};
use crate::caps::cap::Key;

impl Node {
    /// This node holds a copy of `key` that is not being deleted.
    fn holds_live_copy(&self, key: &Key) -> bool {
        self.caps
            .copies_of(key)
            .iter()
            .any(|id| !matches!(self.meta[id].state, SlotState::InDelete(_)))
    }

    /// `FindCopies`: whether a copy of `key` stays here.
    pub(crate) fn answer_copies(&mut self, from: NodeId, op: OpRef, key: Key) {
        let found = self.holds_live_copy(&key);
        self.send(from, Msg::Copies { op, found });
    }

    /// `Move`: takes ownership of `key` if a copy stays here and no other
    /// operation holds the key, and holds it until `MoveDone`.
    pub(crate) fn take_ownership(&mut self, from: NodeId, op: OpRef, key: Key) {
        let ok = self.holds_live_copy(&key) && !self.key_locks.contains_key(&key);
        if ok {
            self.set_owner(&key, self.id);
            self.key_locks.insert(key, op);
        }
        self.send(from, Msg::Moved { op, ok });
    }

    /// `OwnerUpdate`: the copies of `key` here are owned by `owner` now.
    pub(crate) fn owner_update(&mut self, from: NodeId, op: OpRef, key: Key, owner: NodeId) {
        self.set_owner(&key, owner);
        self.send(from, Msg::OwnerAck { op });
    }

    /// `Retrieve` at the owner: hands ownership of `key` to `from` and tells
    /// the other nodes, unless another operation holds the key.
    pub(crate) fn retrieve(&mut self, from: NodeId, op: OpRef, key: Key) {
        if !self.may_serve(&key) {
            self.send(from, Msg::Retrieved { op, ok: false });
            return;
        }
        self.set_owner(&key, from);
        let pending = self.broadcast(from, || Msg::OwnerUpdate {
            op,
            key,
            owner: from,
        });
        self.ops.insert(
            op,
            Work::Retrieve {
                origin: from,
                pending,
            },
        );
        if pending == 0 {
            self.retrieve_ack_done(op);
        }
    }

    /// `OwnerAck` at the owner handing ownership on: one more node knows.
    pub(crate) fn retrieve_ack(&mut self, op: OpRef) {
        let Some(Work::Retrieve { pending, .. }) = self.ops.get_mut(&op) else {
            unreachable!("an owner ack without a retrieve")
        };
        *pending -= 1;
        if *pending == 0 {
            self.retrieve_ack_done(op);
        }
    }

    /// Every other node knows the new owner: the revoking node may go on.
    fn retrieve_ack_done(&mut self, op: OpRef) {
        let Some(Work::Retrieve { origin, .. }) = self.ops.remove(&op) else {
            unreachable!()
        };
        self.send(origin, Msg::Retrieved { op, ok: true });
    }
}
