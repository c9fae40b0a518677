//! What a user asks of its node ([`Request`]) and what it gets back: the
//! memory a finished request handed back, or why it failed.

use alloc::vec::Vec;
use core::fmt;

use super::slot::{NodeId, Slot};
use crate::caps::error::CapError;
use crate::caps::types::CapType;

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
    /// A retype request; its arguments in [`Caps::retype`](crate::caps::Caps::retype)'s order.
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
