//! A node: one core's replica of the capability system, its state, and
//! the dispatch of what it takes ([`Node::step`]).
//!
//! Per live slot a node keeps what the protocol adds to a capability (the
//! owner node and the slot state of Figure 4.7); per capability key the
//! operation that holds it at its owner; and the operations it coordinates,
//! each waiting for replies. A request or message goes to the operation it
//! serves, each in its own module with its own `impl Node` (`census`,
//! `copy`, `ownership`, `retype`, `delete`, `revoke`); what they share about
//! the node's state is here. Messages a node sends to itself are handled in
//! the same step, so a request whose work is all local finishes at once.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use super::exported::Exported;
use super::job::Jobs;
use super::msg::Msg;
use super::mutation::Mutation;
use super::region::Recording;
use super::request::{Done, Error, Outcome, Request};
use super::slot::{Meta, NodeId, OpRef, Relations, Slot, SlotState, Table};
use crate::caps::cap::{Cap, Key};
use crate::caps::cspace::{CSpace, CapRef};
use crate::caps::mdb::{AaTree, CapId};
use crate::caps::system::{Caps, RetypePlan};
use crate::caps::types::{CapType, SLOT_BYTES};
use crate::caps::CapError;
use crate::objects::Config;

/// One input of [`Node::step`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// A local request with its id.
    Request(u64, Request),
    /// A message from node `.0`.
    Message(NodeId, Msg),
}

/// What one step produced.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Output {
    /// Messages to send, each to its node, in order.
    pub sends: Vec<(NodeId, Msg)>,
    /// Requests of this node that finished, by id.
    pub done: Vec<(u64, Outcome)>,
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

/// Where a revoke is: taking ownership, marking, or committing.
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

    /// Hands a request to its operation; it finishes at once if it failed
    /// or needs no other node.
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

    /// Hands a message to the operation it serves.
    fn message(&mut self, from: NodeId, msg: Msg) {
        use Msg::*;
        match msg {
            Transfer {
                op,
                cap,
                owner,
                dest,
            } => self.transfer(from, op, cap, owner, dest),
            TransferDone { op, result } | CopyDone { op, result } => self.copy_done(op, result),
            CopyVia {
                op,
                cap,
                node,
                dest,
            } => self.copy_via(from, op, cap, node, dest),
            FindCopies { op, key } => self.answer_copies(from, op, key),
            Copies { op, found } => self.job_copies(op, from, found),
            Move { op, key } => self.take_ownership(from, op, key),
            Moved { op, ok } => self.job_moved(op, ok),
            MoveDone { op, key } => self.unlock(&key, op),
            FindRelations { op, q } | Marker { op, q } => self.census_marker(from, op, q),
            Relations { op, found, last } => {
                // A census is a delete job's or a retype's.
                let Some(found) = self.census_answer(from, op, found, last) else {
                    return;
                };
                if self.jobs.contains_key(&op) {
                    self.job_relations(op, found);
                } else {
                    self.retype_checked(op, found);
                }
            }
            OwnerUpdate { op, key, owner } => self.owner_update(from, op, key, owner),
            OwnerAck { op } => {
                // A delete job handing ownership on, or an owner handing it
                // to a revoking node.
                if self.jobs.contains_key(&op) {
                    self.job_owner_ack(op);
                } else {
                    self.retrieve_ack(op);
                }
            }
            Retrieve { op, key } => self.retrieve(from, op, key),
            Retrieved { op, ok } => self.retrieved(op, ok),
            RetypeReq {
                op,
                key,
                base,
                size,
            } => self.retype_request(from, op, key, base, size),
            RetypeGrant { op, result } => self.retype_granted(from, op, result),
            RetypeDone { op, key } => self.retype_done(op, key),
            Mark { op, key } => self.mark(from, op, key),
            Marked { op } => self.revoke_reply(op, Vec::new()),
            Commit { op, key } => self.commit(from, op, key),
            Committed { op, reclaimed } => self.revoke_reply(op, reclaimed),
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

    /// Every copy of `key` here is owned by `owner` now.
    pub(crate) fn set_owner(&mut self, key: &Key, owner: NodeId) {
        for id in self.caps.copies_of(key) {
            self.meta.get_mut(&id).expect("a live slot").owner = owner;
        }
    }

    /// Lets go of `key` if operation `op` holds it.
    pub(crate) fn unlock(&mut self, key: &Key, op: OpRef) {
        if self.key_locks.get(key) == Some(&op) {
            self.key_locks.remove(key);
        }
    }

    /// A delete is emptying the CNode of `s`: its slots are neither here nor
    /// gone yet, so no request may use them.
    pub(crate) fn emptying(&self, s: Slot) -> Result<(), Error> {
        if self.caps.in_emptied_cnode(self.r(s)) {
            Err(Error::Locked)
        } else {
            Ok(())
        }
    }

    /// The slot `s` names, if no operation holds it or its capability.
    pub(crate) fn take(&self, s: Slot) -> Result<(CapId, Cap), Error> {
        self.emptying(s)?;
        let (id, cap) = self.caps.lookup(self.r(s)).map_err(Error::Cap)?;
        if self.meta[&id].state != SlotState::Ready || self.key_locks.contains_key(&cap.key()) {
            return Err(Error::Locked);
        }
        Ok((id, cap))
    }

    /// This node owns `key`, holds a copy that is not going, and no other
    /// operation holds the key: it may serve an operation on it.
    pub(crate) fn may_serve(&self, key: &Key) -> bool {
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

    /// Gives this node the bug `m`.
    #[cfg(feature = "mutations")]
    pub fn plant(&mut self, m: Mutation) {
        self.mutation = Some(m);
    }

    /// Capability `cap` left this node: forget the regions that crossed
    /// which no capability here overlaps any more (see [`Exported`]).
    pub(crate) fn forget(&mut self, cap: &Cap) {
        let caps = &self.caps;
        self.exported
            .retain_overlapping(cap.base, cap.size, |b, s| {
                caps.overlaps(cap.ty.root(), b, s)
            });
    }

    /// Memory outside every region that crossed: no relation elsewhere.
    pub(crate) fn is_local(&self, c: &Cap) -> bool {
        !self.exported.overlaps(c.base, c.size)
    }
}
