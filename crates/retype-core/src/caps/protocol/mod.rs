//! Capabilities across cores: seed 001's decentralized protocol (chapter 4).
//!
//! Every core, a *node*, holds a replica of part of the capability system:
//! its own CSpace, slots and mapping database (a [`Caps`](super::Caps)). Each capability
//! has an *owner* node that serializes the operations that need to know
//! about every copy; copies share their owner and the owner holds one
//! (invariants 4.1–4.3). A node is a deterministic state machine
//! ([`Node::step`]): one local request or one message in, the messages to
//! send and the finished requests out. The simulator ([`sim`]), the thread
//! runtime of `retype caps protocol-bench` and the model checker all drive
//! this same code.
//!
//! - [`msg`]: the messages, in request/reply pairs.
//! - [`census`]: before memory is reclaimed or retyped, a snapshot of every
//!   node and channel restricted to that memory (Chandy–Lamport).
//! - [`exported`]: which memory ever crossed this node's boundary, the
//!   conservative stand-in for the thesis's remote-relation bits.
//! - [`node`]: a node, its requests (copy, delete, revoke, retype, no-op)
//!   and its answers to other nodes.
//! - [`delete`]: the delete job: a capability, the CNodes it empties
//!   (mark, then sweep as a stack), ownership handed on (§4.3, §4.6).
//! - [`sim`]: nodes run by a seeded scheduler over FIFO channels.
//! - [`symmetry`]: operation ids as names, for the model checker.
//!
//! Simplifications against Barrelfish, each documented where it is made:
//! CNodes and page tables are kernel state of the core that made them and
//! cannot be copied to another node (so a CNode is always emptied where its
//! slots are); retype makes its objects on the requesting node; and an
//! operation that finds its capability held by another operation is refused
//! with [`Error::Locked`] and changes nothing, so the caller retries.
//!
//! What the tests check (`tests.rs`): random rounds of concurrent requests
//! on 2–4 nodes, over every interleaving a seeded scheduler picks, equal
//! some serial order of the same requests on one [`Caps`](super::Caps) in
//! results and in every slot of every node; invariants 4.1–4.3 hold after
//! every round; every request finishes. Two things are weaker than on one
//! core, and the tests say so where they skip them: a revoke deletes on all
//! nodes at once, so which memory it hands back can differ from one core's
//! order (a delete alone hands back exactly the same); and a request that
//! races a revoke which destroys the requester's own root CNode may find its
//! slot empty before it finds its CSpace gone. Reclaiming memory takes a
//! snapshot of who holds a capability over it, and a retype one of who
//! holds a descendant of its source in the way, channels included (see
//! [`census`]), so a copy in flight or one that lands late is not missed.

pub mod census;
pub mod delete;
pub mod exported;
pub mod msg;
pub mod mutation;
pub mod node;
pub mod props;
pub mod sim;
pub mod symmetry;

use alloc::vec::Vec;
use core::fmt;

pub use msg::Msg;
pub use node::{boot, Node, Relations, SlotState};
pub use sim::Sim;

use super::cspace::Level;
use super::error::CapError;
use super::types::CapType;

/// A node's number, from 0.
pub type NodeId = u8;

/// An operation: the node it was asked of and its id there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpRef {
    pub node: NodeId,
    pub id: u64,
}

/// A slot of a node's own CSpace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    pub addr: u32,
    pub level: Level,
}

impl Slot {
    /// Slot `slot` of the root CNode.
    pub fn l1(slot: u32) -> Slot {
        Slot {
            addr: slot << 8,
            level: Level::L1,
        }
    }

    /// Slot `slot` of the L2 CNode in root slot `l1`.
    pub fn l2(l1: u32, slot: u8) -> Slot {
        Slot {
            addr: (l1 << 8) | slot as u32,
            level: Level::L2,
        }
    }
}

/// What a user asks of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// An invocation that does nothing: the cost of asking.
    Noop,
    /// Copies `src` into the empty slot `dest` of node `node`.
    Copy {
        src: Slot,
        node: NodeId,
        dest: Slot,
    },
    Delete(Slot),
    /// Deletes every copy and descendant of the capability, on every node.
    Revoke(Slot),
    /// Barrelfish's offset retype; the objects are made on this node.
    Retype {
        src: Slot,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
        dest: Slot,
    },
}

impl Request {
    /// A retype request; its arguments in [`Caps::retype`](super::Caps::retype)'s order.
    pub fn retype(
        src: Slot,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
        dest: Slot,
    ) -> Request {
        Request::Retype {
            src,
            ty,
            offset,
            objsize,
            count,
            dest,
        }
    }
}

/// Why a request failed. Every failed request changed nothing on any node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// What the single-core system refuses, for the same reason.
    Cap(CapError),
    /// Another operation holds the capability; ask again.
    Locked,
    NoSuchNode(NodeId),
    /// CNodes and page tables stay on the node that made them.
    NotTransferable(CapType),
}

impl Error {
    /// The request may succeed if asked again.
    pub fn is_retryable(self) -> bool {
        self == Error::Locked
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cap(e) => e.fmt(f),
            Error::Locked => write!(f, "the capability is held by an operation in flight: retry"),
            Error::NoSuchNode(n) => write!(f, "there is no node {n}"),
            Error::NotTransferable(t) => write!(f, "a {t} cannot be copied to another node"),
        }
    }
}

/// A finished request: the memory it handed back to the memory server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Done {
    pub reclaimed: Vec<(u64, u64)>,
}

/// The result of a request.
pub type Outcome = Result<Done, Error>;

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

#[cfg(test)]
mod tests;
