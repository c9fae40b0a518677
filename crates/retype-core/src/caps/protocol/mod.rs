//! Capabilities across cores: seed 001's decentralized protocol (chapter 4).
//!
//! Every core, a *node*, holds a replica of part of the capability system:
//! its own CSpace, slots and mapping database (a [`Caps`](super::Caps)). Each capability
//! has an *owner* node that serializes the operations that need to know
//! about every copy; copies share their owner and the owner holds one
//! (invariants 4.1–4.3). A node is a deterministic state machine
//! ([`Node::step`]): one local request or one message in, the messages to
//! send and the finished requests out. The simulator ([`sim`]), the thread
//! runtime of `retype bench protocol` and the model checker all drive
//! this same code.
//!
//! The modules, bottom-up; each imports only those before it:
//!
//! - [`exported`]: which memory ever crossed this node's boundary, the
//!   conservative stand-in for the thesis's remote-relation bits.
//! - [`mutation`]: planted bugs, for the model checker's own tests.
//! - [`slot`]: nodes, operations and slots, and what the protocol keeps per
//!   slot (its owner and its state, Figure 4.7).
//! - [`request`]: what a user asks of its node, and what it gets back.
//! - [`region`]: what a census asks about, and a node's record of one.
//! - [`job`]: the state of a delete job.
//! - [`msg`]: the messages, in request/reply pairs.
//! - [`node`]: a node's state, and [`Node::step`], which hands each request
//!   and message to the operation it serves.
//! - The operations, each an `impl Node` of its own, in the order they call
//!   on each other (each only on those before it):
//!   - [`census`]: before memory is reclaimed or retyped, a snapshot of
//!     every node and channel restricted to that memory (Chandy–Lamport);
//!   - [`copy`]: to a slot of any node, through the capability's owner;
//!   - [`ownership`]: the other nodes' side when ownership moves;
//!   - [`retype`]: checked by the owner's census of the region;
//!   - [`delete`]: a capability, the CNodes it empties (mark, then sweep
//!     as a stack), ownership handed on (§4.3, §4.6);
//!   - [`revoke`]: ownership taken, then mark and commit on every node.
//! - [`sim`]: nodes run by a seeded scheduler over FIFO channels.
//! - [`props`]: what the model checker asks of every state and step.
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
pub mod copy;
pub mod delete;
pub mod exported;
pub mod job;
pub mod msg;
pub mod mutation;
pub mod node;
pub mod ownership;
pub mod props;
pub mod region;
pub mod request;
pub mod retype;
pub mod revoke;
pub mod sim;
pub mod slot;
pub mod symmetry;

pub use msg::Msg;
pub use node::{boot, Input, Node, Output};
pub use request::{Done, Error, Outcome, Request};
pub use sim::Sim;
pub use slot::{NodeId, OpRef, Relations, Slot, SlotState};

#[cfg(test)]
mod tests;
