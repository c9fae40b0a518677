//! Retype (seed 001 Algorithm 2): the request, the owner's check of a
//! non-owner's retype (a census of the region, see `census`), and its
//! answer. The objects are made on the requesting node.

use super::msg::Msg;
use super::mutation::Mutation;
use super::node::{Node, Work};
use super::region::Region;
use super::request::{Done, Error};
use super::slot::{Meta, NodeId, OpRef, Slot, SlotState};
use crate::caps::cap::Key;
use crate::caps::mdb::CapId;
use crate::caps::system::RetypePlan;
use crate::caps::types::CapType;
use crate::caps::CapError;

impl Node {
    /// Retype (Algorithm 2): the single-core checks here, then, unless the
    /// source's memory never left this node and this node owns it, the
    /// owner holds the key and takes a census of the region: a descendant
    /// of the source in the way on any node, this one included, or on its
    /// way to one (see `census`).
    pub(crate) fn retype(
        &mut self,
        op: OpRef,
        src: Slot,
        ty: CapType,
        (offset, objsize, count): (u64, u64, u64),
        dest: Slot,
    ) -> Result<Option<Done>, Error> {
        // Locked comes before the single-core checks: it changes nothing.
        let (id, cap) = self.take(src)?;
        let plan = self
            .caps
            .plan_from(cap, ty, offset, objsize, count)
            .map_err(Error::Cap)?;
        let key = cap.key();
        if self.caps.descendant_overlaps(&key, plan.base, plan.bytes()) {
            return Err(Error::Cap(CapError::RevokeFirst));
        }
        let owner = self.meta[&id].owner;
        let ask =
            !(self.is_local(&cap) || self.nodes == 1 || self.mutated(Mutation::RetypeSkipsCheck));
        if owner == self.id && !ask {
            return self.retype_apply(&plan, dest).map(Some);
        }
        self.set_state(id, SlotState::Locked(op));
        let (base, size) = (plan.base, plan.bytes());
        if owner == self.id {
            self.key_locks.insert(key, op);
            self.census(op, Region::in_the_way(self.id, key, base, size));
        } else {
            self.send(
                owner,
                Msg::RetypeReq {
                    op,
                    key,
                    base,
                    size,
                },
            );
        }
        let work = Work::Retype {
            src: id,
            from: src,
            plan,
            dest,
        };
        self.ops.insert(op, work);
        Ok(None)
    }

    /// A retype that waited for other nodes: while it waited, the path to its
    /// source may have gone (a CNode deleted), and with it the reason its
    /// destination is free; then it is refused as if it had come too late.
    fn retype_late(
        &mut self,
        src: CapId,
        from: Slot,
        plan: &RetypePlan,
        dest: Slot,
    ) -> Result<Done, Error> {
        if self.caps.slot_id(self.r(from)) != Ok(src) {
            return Err(Error::Locked);
        }
        self.emptying(from)?;
        self.retype_apply(plan, dest)
    }

    fn retype_apply(&mut self, plan: &RetypePlan, dest: Slot) -> Result<Done, Error> {
        self.emptying(dest)?;
        let first = self
            .caps
            .retype_into(plan, self.r(dest))
            .map_err(Error::Cap)?;
        for i in 0..plan.count as CapId {
            // An object of the source's type and region has the source's
            // key: the mapping database sees a copy, so it shares the owner.
            let mut owner = self.id;
            if plan.ty == plan.src.ty && plan.objsize == plan.src.size {
                let copies = self.caps.copies_of(&plan.src.key());
                owner = copies
                    .iter()
                    .find_map(|id| self.meta.get(id).map(|m| m.owner))
                    .unwrap_or(owner);
            }
            let meta = Meta {
                owner,
                state: SlotState::Ready,
            };
            self.meta.insert(first + i, meta);
        }
        Ok(Done::default())
    }

    /// The owner's side of a non-owner's retype.
    pub(crate) fn retype_request(
        &mut self,
        from: NodeId,
        op: OpRef,
        key: Key,
        base: u64,
        size: u64,
    ) {
        if !self.may_serve(&key) {
            let result = Err(Error::Locked);
            self.send(from, Msg::RetypeGrant { op, result });
            return;
        }
        if self.caps.descendant_overlaps(&key, base, size) {
            let result = Err(Error::Cap(CapError::RevokeFirst));
            self.send(from, Msg::RetypeGrant { op, result });
            return;
        }
        self.key_locks.insert(key, op);
        self.ops.insert(op, Work::Grant { origin: from, key });
        self.census(op, Region::in_the_way(self.id, key, base, size));
    }

    /// The owner's census for a retype is over: `conflict` when a
    /// descendant of the source was in the way somewhere.
    pub(crate) fn retype_checked(&mut self, op: OpRef, conflict: bool) {
        let result = if conflict {
            Err(Error::Cap(CapError::RevokeFirst))
        } else {
            Ok(())
        };
        match self.ops.remove(&op) {
            Some(Work::Retype {
                src,
                from,
                plan,
                dest,
            }) => {
                self.key_locks.remove(&plan.src.key());
                self.set_state(src, SlotState::Ready);
                let r = result.and_then(|()| self.retype_late(src, from, &plan, dest));
                self.finish(op, r);
            }
            Some(Work::Grant { origin, key }) => {
                if conflict {
                    self.key_locks.remove(&key);
                } else {
                    // Held until the origin's RetypeDone.
                    self.ops.insert(op, Work::Grant { origin, key });
                }
                self.send(origin, Msg::RetypeGrant { op, result });
            }
            w => unreachable!("a retype census for {w:?}"),
        }
    }

    /// `RetypeGrant`: the owner's answer to a non-owner's retype. If it
    /// granted, the objects are made here (unless the retype came too late)
    /// and the owner lets go of the key.
    pub(crate) fn retype_granted(&mut self, from: NodeId, op: OpRef, result: Result<(), Error>) {
        let Some(Work::Retype {
            src,
            from: at,
            plan,
            dest,
        }) = self.ops.remove(&op)
        else {
            unreachable!("a grant without a retype")
        };
        self.set_state(src, SlotState::Ready);
        let r = result.and_then(|()| {
            let r = self.retype_late(src, at, &plan, dest);
            let key = plan.src.key();
            self.send(from, Msg::RetypeDone { op, key });
            r
        });
        self.finish(op, r);
    }

    /// `RetypeDone` at the owner: the retype it granted is over.
    pub(crate) fn retype_done(&mut self, op: OpRef, key: Key) {
        self.ops.remove(&op);
        self.unlock(&key, op);
    }
}
