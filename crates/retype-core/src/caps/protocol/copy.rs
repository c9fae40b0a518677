//! Copy (seed 001 Algorithm 1): the request, the capability landing on the
//! other node (`Transfer`), and the owner passing on a non-owner's copy
//! (`CopyVia`), so that the owner knows where its copies are. The source
//! slot stays locked until the copy has landed or failed.

use super::msg::Msg;
use super::mutation::Mutation;
use super::node::{Node, Work};
use super::request::{Done, Error};
use super::slot::{Meta, NodeId, OpRef, Slot, SlotState};
use crate::caps::cap::Cap;
use crate::caps::system::revoked_by;
use crate::caps::CapError;

impl Node {
    /// Copy (Algorithm 1). On one node it is the single-core copy; to
    /// another node the capability travels, from the owner.
    pub(crate) fn copy(
        &mut self,
        op: OpRef,
        src: Slot,
        node: NodeId,
        dest: Slot,
    ) -> Result<Option<Done>, Error> {
        let (id, cap) = self.take(src)?;
        if cap.ty.is_mapping() {
            return Err(Error::Cap(CapError::WrongType {
                op: "copy",
                found: cap.ty,
            }));
        }
        if node >= self.nodes {
            return Err(Error::NoSuchNode(node));
        }
        let owner = self.meta[&id].owner;
        if node == self.id {
            self.emptying(dest)?;
            self.caps
                .copy(self.r(src), self.r(dest))
                .map_err(Error::Cap)?;
            let new = self.caps.slot_id(self.r(dest)).expect("just filled");
            let meta = Meta {
                owner,
                state: SlotState::Ready,
            };
            self.meta.insert(new, meta);
            return Ok(Some(Done::default()));
        }
        if cap.ty.is_cnode() || cap.ty.is_vnode() {
            return Err(Error::NotTransferable(cap.ty));
        }
        self.set_state(id, SlotState::Locked(op));
        self.exported.add(cap.base, cap.size);
        self.ops.insert(op, Work::Copy { src: id });
        let msg = if owner == self.id {
            Msg::Transfer {
                op,
                cap,
                owner,
                dest,
            }
        } else {
            Msg::CopyVia {
                op,
                cap,
                node,
                dest,
            }
        };
        self.send(if owner == self.id { node } else { owner }, msg);
        Ok(None)
    }

    /// `Transfer`: the capability lands in slot `dest`, owned by `owner`,
    /// and the census records it if one records the channel it came on.
    pub(crate) fn transfer(
        &mut self,
        from: NodeId,
        op: OpRef,
        cap: Cap,
        owner: NodeId,
        dest: Slot,
    ) {
        let result = self
            .emptying(dest)
            .and_then(|()| self.caps.install_at(self.r(dest), cap).map_err(Error::Cap));
        let result = result.map(|id| {
            // Revokes of one key do not overlap in time: the
            // innermost one whose scope it is in marks it.
            let state = (self.revoking.iter())
                .filter(|(_, k)| revoked_by(&cap.key(), k))
                .max_by_key(|(_, k)| **k)
                .map_or(SlotState::Ready, |(&op, _)| SlotState::InDelete(op));
            let meta = Meta { owner, state };
            self.meta.insert(id, meta);
            self.exported.add(cap.base, cap.size);
            self.record(from, &cap);
        });
        self.send(from, Msg::TransferDone { op, result });
    }

    /// `CopyVia` at the owner: sends a non-owner's copy on to node `node`,
    /// unless another operation holds the capability.
    pub(crate) fn copy_via(&mut self, from: NodeId, op: OpRef, cap: Cap, node: NodeId, dest: Slot) {
        if !self.may_serve(&cap.key()) {
            let result = Err(Error::Locked);
            self.send(from, Msg::CopyDone { op, result });
            return;
        }
        self.exported.add(cap.base, cap.size);
        self.ops.insert(op, Work::Route { origin: from });
        let owner = self.id;
        self.send(
            node,
            Msg::Transfer {
                op,
                cap,
                owner,
                dest,
            },
        );
    }

    /// `TransferDone` or `CopyDone`: the copy landed or failed; the source
    /// slot is free again, or the owner passes the answer on.
    pub(crate) fn copy_done(&mut self, op: OpRef, result: Result<(), Error>) {
        match self.ops.remove(&op) {
            Some(Work::Copy { src }) => {
                if result.is_ok() || !self.mutated(Mutation::LockKeptOnError) {
                    self.set_state(src, SlotState::Ready);
                }
                self.finish(op, result.map(|_| Done::default()));
            }
            Some(Work::Route { origin }) => self.send(origin, Msg::CopyDone { op, result }),
            w => unreachable!("copy reply for {w:?}"),
        }
    }
}
