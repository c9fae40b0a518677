//! A node: one core's replica and the protocol steps it takes.
//!
//! Per live slot a node keeps what the protocol adds to a capability (the
//! owner node and the slot state of Figure 4.7); per capability key the
//! operation that holds it at its owner; and the operations it coordinates,
//! each waiting for replies. Messages a node sends to itself are handled in
//! the same step, so a request whose work is all local finishes at once.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use super::census::{Recording, Region};
use super::delete::{JobReply, Jobs};
use super::exported::Exported;
use super::mutation::Mutation;
use super::{Done, Error, Input, Msg, NodeId, OpRef, Outcome, Output, Request, Slot};
use crate::caps::cap::{Cap, Key};
use crate::caps::cow_vec::CowVec;
use crate::caps::cspace::{CSpace, CapRef};
use crate::caps::mdb::{AaTree, CapId, Mdb};
use crate::caps::system::{revoked_by, Caps, Fate, RetypePlan};
use crate::caps::types::{CapType, SLOT_BYTES};
use crate::caps::CapError;
use crate::objects::Config;

/// The state of one slot (seed 001 Figure 4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotState {
    Ready,
    /// An operation in flight uses it (a copy leaving, a retype, a revoke's
    /// own capability); other operations on it are refused.
    Locked(OpRef),
    /// Marked for deletion by a delete or revoke; it will go.
    InDelete(OpRef),
}

/// What the protocol keeps per slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Meta {
    pub owner: NodeId,
    pub state: SlotState,
}

/// The protocol state of every slot, indexed by slot id like the slots
/// (and, like them, shared by copies where unchanged).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Table(CowVec<Option<Meta>>);

impl Table {
    pub fn get(&self, id: &CapId) -> Option<&Meta> {
        self.0.get(*id as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, id: &CapId) -> Option<&mut Meta> {
        self.0.get_mut(*id as usize)?.as_mut()
    }

    pub fn insert(&mut self, id: CapId, m: Meta) {
        let i = id as usize;
        self.0.grow(i + 1);
        self.0[i] = Some(m);
    }

    pub fn remove(&mut self, id: &CapId) -> Option<Meta> {
        self.0.get_mut(*id as usize)?.take()
    }

    pub fn values(&self) -> impl Iterator<Item = &Meta> {
        self.0.occupied().filter_map(|(_, m)| m.as_ref())
    }

    /// Every live slot's protocol state, by slot id.
    pub fn iter(&self) -> impl Iterator<Item = (CapId, &Meta)> {
        (self.0.occupied()).filter_map(|(i, m)| m.as_ref().map(|m| (i as CapId, m)))
    }

    /// Slot ids below this one may hold state.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl core::ops::Index<&CapId> for Table {
    type Output = Meta;

    fn index(&self, id: &CapId) -> &Meta {
        self.get(id).expect("a live slot has its protocol state")
    }
}

/// Whether relations of a capability may exist on other nodes (Barrelfish's
/// remote copies, descendants and ancestors bits), from [`Exported`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relations {
    pub copies: bool,
    pub descendants: bool,
    pub ancestors: bool,
}

/// An operation this node coordinates, waiting for replies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Work {
    /// A copy to another node: its source slot, locked until the reply.
    Copy { src: CapId },
    /// The owner routing a non-owner's copy; the reply goes to `origin`.
    Route { origin: NodeId },
    /// A retype waiting for the owner's grant or, at the owner, for its
    /// census of the region.
    Retype {
        src: CapId,
        from: Slot,
        plan: RetypePlan,
        dest: Slot,
    },
    /// The owner checking a non-owner's retype by a census of the region;
    /// it holds the key until the retype is done.
    Grant { origin: NodeId, key: Key },
    /// The owner handing ownership to `origin`, waiting for the updates.
    Retrieve { origin: NodeId, pending: usize },
    /// A revoke of the capability in `slot`: first ownership, then the
    /// marks, then the commits.
    Revoke {
        slot: CapId,
        key: Key,
        targets: Vec<NodeId>,
        phase: RevokePhase,
        pending: usize,
        reclaimed: Vec<(u64, u64)>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RevokePhase {
    Retrieve,
    Mark,
    Commit,
}

/// One core's replica of the capability system.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Node {
    pub(crate) id: NodeId,
    pub(crate) nodes: u8,
    pub(crate) caps: Caps<AaTree>,
    pub(crate) root: CSpace,
    pub(crate) meta: Table,
    pub(crate) exported: Exported,
    /// The censuses this node takes part in (see `census`).
    pub(crate) recordings: BTreeMap<(NodeId, OpRef), Recording>,
    /// Keys held at their owner by a multi-step operation.
    pub(crate) key_locks: BTreeMap<Key, OpRef>,
    /// Revokes marked here whose commit has not come: a capability of their
    /// scope that arrives now is marked too, so that it can be neither
    /// copied on nor retyped before the commit deletes it.
    pub(crate) revoking: BTreeMap<OpRef, Key>,
    pub(crate) ops: BTreeMap<OpRef, Work>,
    /// Delete jobs in progress, oldest first.
    pub(crate) jobs: Jobs,
    /// Marks waiting for a locked slot: (from, message).
    pub(crate) parked: Vec<(NodeId, Msg)>,
    /// Messages to itself, handled within the step.
    pub(crate) local: VecDeque<Msg>,
    pub(crate) out: Output,
    #[cfg(feature = "mutations")]
    pub(crate) mutation: Option<Mutation>,
}

/// Boots `nodes` nodes on a machine with `ram` bytes of RAM: node 0 as
/// [`Caps::boot`] (its root CNode of `root_slots` slots at the end of RAM,
/// PhysAddr in slot 1, the RAM below in slot 2), and every other node `k` a
/// root CNode of its own, retyped from node 0's RAM just below node 0's,
/// owned by `k` and held in its slot 0.
pub fn boot(config: Config, ram: u64, root_slots: u32, nodes: u8) -> Result<Vec<Node>, CapError> {
    let cnode = root_slots as u64 * SLOT_BYTES;
    if nodes == 0 || nodes as u64 * cnode >= ram {
        return Err(CapError::InvalidCount {
            count: nodes as u64,
            max: (ram - 1) / cnode,
        });
    }
    let (caps, boot) = Caps::boot(config, ram, root_slots)?;
    let mut first = Node::new(0, nodes, caps, boot.cspace);
    let mut out = Vec::with_capacity(nodes as usize);
    for k in 1..nodes {
        let root = Cap::new(CapType::L1CNode, root_base(ram, cnode, k), cnode);
        first.exported.add(root.base, root.size);
        let (caps, cspace) = Caps::with_root(config, root);
        let mut node = Node::new(k, nodes, caps, cspace);
        node.exported.add(root.base, root.size);
        out.push(node);
    }
    out.insert(0, first);
    Ok(out)
}

/// Where node `k`'s root CNode is (`k` ≥ 1): below node 0's.
pub fn root_base(ram: u64, cnode_bytes: u64, k: u8) -> u64 {
    ram - (k as u64 + 1) * cnode_bytes
}

impl Node {
    fn new(id: NodeId, nodes: u8, caps: Caps<AaTree>, root: CSpace) -> Node {
        let mut meta = Table::default();
        for (slot, _) in caps.live() {
            let m = Meta {
                owner: id,
                state: SlotState::Ready,
            };
            meta.insert(slot, m);
        }
        Node {
            id,
            nodes,
            caps,
            root,
            meta,
            exported: Exported::default(),
            recordings: BTreeMap::new(),
            key_locks: BTreeMap::new(),
            revoking: BTreeMap::new(),
            ops: BTreeMap::new(),
            jobs: Jobs::default(),
            parked: Vec::new(),
            local: VecDeque::new(),
            out: Output::default(),
            #[cfg(feature = "mutations")]
            mutation: None,
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's capability system.
    pub fn caps(&self) -> &Caps<AaTree> {
        &self.caps
    }

    /// The node's own CSpace.
    pub fn cspace(&self) -> CSpace {
        self.root
    }

    /// The reference to `s` in this node's CSpace.
    pub fn r(&self, s: Slot) -> CapRef {
        CapRef {
            cspace: self.root,
            addr: s.addr,
            level: s.level,
        }
    }

    /// The owner and state of the capability in `s`.
    pub fn slot(&self, s: Slot) -> Result<(Cap, NodeId, SlotState), CapError> {
        let (id, cap) = self.caps.lookup(self.r(s))?;
        let m = self.meta[&id];
        Ok((cap, m.owner, m.state))
    }

    /// Whether relations of the capability in `s` may be on other nodes.
    pub fn relations(&self, s: Slot) -> Result<Relations, CapError> {
        let (_, c) = self.caps.lookup(self.r(s))?;
        let x = &self.exported;
        Ok(Relations {
            copies: x.contains(c.base, c.size),
            descendants: x.inside(c.base, c.size),
            ancestors: x.around(c.base, c.size),
        })
    }

    /// Every live slot with its capability, owner and state.
    pub fn live(&self) -> impl Iterator<Item = (CapId, Cap, NodeId, SlotState)> + '_ {
        self.caps.live().map(|(id, c)| {
            let m = self.meta[&id];
            (id, *c, m.owner, m.state)
        })
    }

    /// No operation in flight, nothing held, nothing waiting.
    pub fn is_idle(&self) -> bool {
        self.ops.is_empty()
            && self.jobs.is_empty()
            && self.key_locks.is_empty()
            && self.revoking.is_empty()
            && self.parked.is_empty()
            && self.recordings.is_empty()
            && self.meta.values().all(|m| m.state == SlotState::Ready)
    }

    /// Takes one request or message; returns what to send and what finished.
    pub fn step(&mut self, input: Input) -> Output {
        match input {
            Input::Request(id, req) => self.request(OpRef { node: self.id, id }, req),
            Input::Message(from, msg) => self.message(from, msg),
        }
        self.settle();
        core::mem::take(&mut self.out)
    }

    /// Handles messages to itself, and retries what waits for a slot (parked
    /// marks in arrival order, then delete jobs oldest first), until nothing
    /// moves.
    fn settle(&mut self) {
        loop {
            while let Some(m) = self.local.pop_front() {
                self.message(self.id, m);
            }
            let parked = core::mem::take(&mut self.parked);
            let before = parked.len();
            for (from, m) in parked {
                self.message(from, m);
            }
            let jobs: Vec<OpRef> = self.jobs.keys().copied().collect();
            let mut moved = self.parked.len() < before;
            for op in jobs {
                moved |= self.advance(op);
            }
            if !moved && self.local.is_empty() {
                return;
            }
        }
    }

    pub(crate) fn send(&mut self, to: NodeId, msg: Msg) {
        if to == self.id {
            self.local.push_back(msg);
        } else {
            self.out.sends.push((to, msg));
        }
    }

    /// Sends one message per other node; returns how many.
    pub(crate) fn broadcast(&mut self, except: NodeId, msg: impl Fn() -> Msg) -> usize {
        let to: Vec<NodeId> = (0..self.nodes)
            .filter(|&n| n != self.id && n != except)
            .collect();
        for &n in &to {
            self.send(n, msg());
        }
        to.len()
    }

    pub(crate) fn finish(&mut self, op: OpRef, r: Outcome) {
        debug_assert_eq!(op.node, self.id);
        self.out.done.push((op.id, r));
    }

    pub(crate) fn set_state(&mut self, id: CapId, state: SlotState) {
        self.meta.get_mut(&id).expect("a live slot").state = state;
    }

    fn set_owner(&mut self, key: &Key, owner: NodeId) {
        for id in self.caps.copies_of(key) {
            self.meta.get_mut(&id).expect("a live slot").owner = owner;
        }
    }

    /// A delete is emptying the CNode of `s`: its slots are neither here nor
    /// gone yet, so no request may use them.
    fn emptying(&self, s: Slot) -> Result<(), Error> {
        if self.caps.in_emptied_cnode(self.r(s)) {
            Err(Error::Locked)
        } else {
            Ok(())
        }
    }

    /// The slot `s` names, if no operation holds it or its capability.
    fn take(&self, s: Slot) -> Result<(CapId, Cap), Error> {
        self.emptying(s)?;
        let (id, cap) = self.caps.lookup(self.r(s)).map_err(Error::Cap)?;
        if self.meta[&id].state != SlotState::Ready || self.key_locks.contains_key(&cap.key()) {
            return Err(Error::Locked);
        }
        Ok((id, cap))
    }

    /// This node owns `key`, holds a copy that is not going, and no other
    /// operation holds the key: it may serve an operation on it.
    fn may_serve(&self, key: &Key) -> bool {
        !self.key_locks.contains_key(key)
            && self.caps.copies_of(key).iter().any(|id| {
                let m = self.meta[id];
                m.owner == self.id && !matches!(m.state, SlotState::InDelete(_))
            })
    }

    /// Whether this node was given the planted bug named `m` (see
    /// `mutation`); always false outside the model checker's tests.
    #[inline]
    pub(crate) fn mutated(&self, _m: Mutation) -> bool {
        #[cfg(feature = "mutations")]
        return self.mutation == Some(_m);
        #[cfg(not(feature = "mutations"))]
        false
    }

    /// Capability `cap` left this node: forget the regions that crossed
    /// which no capability here overlaps any more (see [`Exported`]).
    pub(crate) fn forget(&mut self, cap: &Cap) {
        let caps = &self.caps;
        self.exported.retain(|b, s| {
            !(b < cap.end() && cap.base < b + s) || caps.overlaps(cap.ty.root(), b, s)
        });
    }

    /// Memory outside every region that crossed: no relation elsewhere.
    fn is_local(&self, c: &Cap) -> bool {
        !self.exported.overlaps(c.base, c.size)
    }

    // ----- requests -----

    fn request(&mut self, op: OpRef, req: Request) {
        let started = match req {
            Request::Noop => Ok(Some(Done::default())),
            Request::Copy { src, node, dest } => self.copy(op, src, node, dest),
            Request::Delete(s) => self.take(s).map(|(id, cap)| self.delete(op, id, &cap)),
            Request::Revoke(s) => self.revoke(op, s),
            Request::Retype {
                src,
                ty,
                offset,
                objsize,
                count,
                dest,
            } => self.retype(op, src, ty, (offset, objsize, count), dest),
        };
        match started {
            Ok(Some(done)) => self.finish(op, Ok(done)),
            Ok(None) => {}
            Err(e) => self.finish(op, Err(e)),
        }
    }

    /// Copy (Algorithm 1). On one node it is the single-core copy; to
    /// another node the capability travels, from the owner.
    fn copy(
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

    /// Delete (Algorithm 3). A foreign copy, a copy with local copies, and
    /// the last copy of memory that never left this node go at once; the
    /// rest (the owner's last copy of memory that crossed, a CNode) is a job.
    fn delete(&mut self, op: OpRef, id: CapId, cap: &Cap) -> Option<Done> {
        let copy = self.meta[&id].owner != self.id || self.caps.mdb().has_copies(id);
        if cap.ty.is_cnode() || !(copy || self.is_local(cap)) {
            self.start_job(op, Vec::from([id]), JobReply::User);
            return None;
        }
        let fate = if copy {
            Fate::COPY
        } else {
            self.caps.last_fate(id)
        };
        self.meta.remove(&id);
        let mut marked = Vec::new();
        self.caps.remove_as(id, fate, &mut marked);
        self.forget(cap);
        debug_assert!(marked.is_empty(), "only CNodes are marked");
        Some(Done {
            reclaimed: self.caps.take_reclaimed(),
        })
    }

    /// Retype (Algorithm 2): the single-core checks here, then, unless the
    /// source's memory never left this node and this node owns it, the
    /// owner holds the key and takes a census of the region: a descendant
    /// of the source in the way on any node, this one included, or on its
    /// way to one (see `census`).
    fn retype(
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

    /// Revoke (Algorithm 5): a foreign copy first takes ownership; then every
    /// node that may hold a copy or descendant marks them, and once all have,
    /// deletes them. Memory that never left this node is revoked here alone.
    fn revoke(&mut self, op: OpRef, s: Slot) -> Result<Option<Done>, Error> {
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

    fn revoke_phase(&mut self, op: OpRef, to: RevokePhase, n: usize) {
        if let Some(Work::Revoke { phase, pending, .. }) = self.ops.get_mut(&op) {
            *phase = to;
            *pending = n;
        }
    }

    // ----- messages -----

    fn message(&mut self, from: NodeId, msg: Msg) {
        use Msg::*;
        match msg {
            Transfer {
                op,
                cap,
                owner,
                dest,
            } => {
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
                self.send(from, TransferDone { op, result });
            }
            TransferDone { op, result } | CopyDone { op, result } => match self.ops.remove(&op) {
                Some(Work::Copy { src }) => {
                    if result.is_ok() || !self.mutated(Mutation::LockKeptOnError) {
                        self.set_state(src, SlotState::Ready);
                    }
                    self.finish(op, result.map(|_| Done::default()));
                }
                Some(Work::Route { origin }) => self.send(origin, CopyDone { op, result }),
                w => unreachable!("copy reply for {w:?}"),
            },
            CopyVia {
                op,
                cap,
                node,
                dest,
            } => {
                if !self.may_serve(&cap.key()) {
                    let result = Err(Error::Locked);
                    self.send(from, CopyDone { op, result });
                    return;
                }
                self.exported.add(cap.base, cap.size);
                self.ops.insert(op, Work::Route { origin: from });
                let owner = self.id;
                self.send(
                    node,
                    Transfer {
                        op,
                        cap,
                        owner,
                        dest,
                    },
                );
            }
            FindCopies { op, key } => {
                let found = self
                    .caps
                    .copies_of(&key)
                    .iter()
                    .any(|id| !matches!(self.meta[id].state, SlotState::InDelete(_)));
                self.send(from, Copies { op, found });
            }
            Move { op, key } => {
                let live = self
                    .caps
                    .copies_of(&key)
                    .iter()
                    .any(|id| !matches!(self.meta[id].state, SlotState::InDelete(_)));
                let ok = live && !self.key_locks.contains_key(&key);
                if ok {
                    self.set_owner(&key, self.id);
                    self.key_locks.insert(key, op);
                }
                self.send(from, Moved { op, ok });
            }
            MoveDone { op, key } => {
                if self.key_locks.get(&key) == Some(&op) {
                    self.key_locks.remove(&key);
                }
            }
            FindRelations { op, q } | Marker { op, q } => self.census_marker(from, op, q),
            OwnerUpdate { op, key, owner } => {
                self.set_owner(&key, owner);
                self.send(from, OwnerAck { op });
            }
            Copies { op, found } => self.job_copies(op, from, found),
            Moved { op, ok } => self.job_moved(op, ok),
            Relations { op, found, last } => {
                let Some(found) = self.census_answer(from, op, found, last) else {
                    return;
                };
                if self.jobs.contains_key(&op) {
                    self.job_relations(op, found);
                } else {
                    self.retype_checked(op, found);
                }
            }
            OwnerAck { op } => {
                if self.jobs.contains_key(&op) {
                    self.job_owner_ack(op);
                } else {
                    self.retrieve_ack(op);
                }
            }
            Retrieve { op, key } => {
                if !self.may_serve(&key) {
                    self.send(from, Retrieved { op, ok: false });
                    return;
                }
                self.set_owner(&key, from);
                let pending = self.broadcast(from, || OwnerUpdate {
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
            Retrieved { op, ok } => {
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
            RetypeReq {
                op,
                key,
                base,
                size,
            } => self.retype_request(from, op, key, base, size),
            RetypeGrant { op, result } => {
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
                    self.send(from, RetypeDone { op, key });
                    r
                });
                self.finish(op, r);
            }
            RetypeDone { op, key } => {
                self.ops.remove(&op);
                if self.key_locks.get(&key) == Some(&op) {
                    self.key_locks.remove(&key);
                }
            }
            Mark { op, key } => self.mark(from, op, key),
            Marked { op } => self.revoke_reply(op, Vec::new()),
            Commit { op, key } => {
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
            Committed { op, reclaimed } => self.revoke_reply(op, reclaimed),
        }
    }

    /// The owner's side of a non-owner's retype.
    fn retype_request(&mut self, from: NodeId, op: OpRef, key: Key, base: u64, size: u64) {
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
    fn retype_checked(&mut self, op: OpRef, conflict: bool) {
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

    fn retrieve_ack(&mut self, op: OpRef) {
        let Some(Work::Retrieve { pending, .. }) = self.ops.get_mut(&op) else {
            unreachable!("an owner ack without a retrieve")
        };
        *pending -= 1;
        if *pending == 0 {
            self.retrieve_ack_done(op);
        }
    }

    fn retrieve_ack_done(&mut self, op: OpRef) {
        let Some(Work::Retrieve { origin, .. }) = self.ops.remove(&op) else {
            unreachable!()
        };
        self.send(origin, Msg::Retrieved { op, ok: true });
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
    fn mark(&mut self, from: NodeId, op: OpRef, key: Key) {
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

    /// A mark or commit acknowledged, at the revoking node.
    fn revoke_reply(&mut self, op: OpRef, got: Vec<(u64, u64)>) {
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
