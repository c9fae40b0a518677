//! The messages between nodes, after Barrelfish's inter-monitor interface.
//! Each carries the operation it serves; a reply goes back to the sender.

use alloc::vec::Vec;

use super::region::Region;
use super::request::Error;
use super::slot::{NodeId, OpRef, Slot};
use crate::caps::cap::{Cap, Key};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    // ----- copy -----
    /// Capability transfer: put `cap`, owned by `owner`, in slot `dest`.
    Transfer {
        op: OpRef,
        cap: Cap,
        owner: NodeId,
        dest: Slot,
    },
    TransferDone {
        op: OpRef,
        result: Result<(), Error>,
    },
    /// To the owner: copy `cap` (a non-owner's copy) to `dest` on `node`;
    /// copies leave through the owner so that it knows where they are.
    CopyVia {
        op: OpRef,
        cap: Cap,
        node: NodeId,
        dest: Slot,
    },
    CopyDone {
        op: OpRef,
        result: Result<(), Error>,
    },

    // ----- deleting the owner's last copy -----
    /// Do you hold a copy of `key` that is not being deleted?
    FindCopies {
        op: OpRef,
        key: Key,
    },
    Copies {
        op: OpRef,
        found: bool,
    },
    /// Take ownership of `key`, whose owner is deleting its last copy.
    Move {
        op: OpRef,
        key: Key,
    },
    Moved {
        op: OpRef,
        ok: bool,
    },
    /// The new owner may serve `key` again: every node knows it.
    MoveDone {
        op: OpRef,
        key: Key,
    },
    /// The census before memory is reclaimed or retyped (see `census`): do
    /// you hold a capability that `q` seeks? Also closes the channel from
    /// the asker.
    FindRelations {
        op: OpRef,
        q: Region,
    },
    /// Closes the channel from the sender for census `op`; starts it at the
    /// receiver if the question has not arrived yet.
    Marker {
        op: OpRef,
        q: Region,
    },
    /// A node's part of the census: what it holds (the first answer, which
    /// closes its channel to the asker) or what arrived on its channels;
    /// `last` when nothing more comes from it.
    Relations {
        op: OpRef,
        found: bool,
        last: bool,
    },

    // ----- ownership -----
    /// The copies of `key` are now owned by `owner`.
    OwnerUpdate {
        op: OpRef,
        key: Key,
        owner: NodeId,
    },
    OwnerAck {
        op: OpRef,
    },
    /// To the owner: give me ownership of `key` (revoke of a foreign copy).
    Retrieve {
        op: OpRef,
        key: Key,
    },
    Retrieved {
        op: OpRef,
        ok: bool,
    },

    // ----- retype -----
    /// To the owner: may a retype of `key` take `[base, base + size)`?
    RetypeReq {
        op: OpRef,
        key: Key,
        base: u64,
        size: u64,
    },
    /// The owner's answer; if Ok, it holds the key until `RetypeDone`.
    RetypeGrant {
        op: OpRef,
        result: Result<(), Error>,
    },
    RetypeDone {
        op: OpRef,
        key: Key,
    },

    // ----- revoke: mark, then commit -----
    /// Mark every copy and descendant of `key` here for deletion.
    Mark {
        op: OpRef,
        key: Key,
    },
    Marked {
        op: OpRef,
    },
    /// Delete what is marked (and anything of `key` that arrived since).
    Commit {
        op: OpRef,
        key: Key,
    },
    Committed {
        op: OpRef,
        reclaimed: Vec<(u64, u64)>,
    },
}

/// The operation field of a message, `&` or `&mut` as the message is.
macro_rules! op_field {
    ($m:expr) => {{
        use Msg::*;
        match $m {
            Transfer { op, .. }
            | TransferDone { op, .. }
            | CopyVia { op, .. }
            | CopyDone { op, .. }
            | FindCopies { op, .. }
            | Copies { op, .. }
            | Move { op, .. }
            | Moved { op, .. }
            | MoveDone { op, .. }
            | FindRelations { op, .. }
            | Marker { op, .. }
            | Relations { op, .. }
            | OwnerUpdate { op, .. }
            | OwnerAck { op }
            | Retrieve { op, .. }
            | Retrieved { op, .. }
            | RetypeReq { op, .. }
            | RetypeGrant { op, .. }
            | RetypeDone { op, .. }
            | Mark { op, .. }
            | Marked { op }
            | Commit { op, .. }
            | Committed { op, .. } => op,
        }
    }};
}

impl Msg {
    /// The operation the message serves.
    pub fn op(&self) -> OpRef {
        *op_field!(self)
    }

    /// The operation the message serves, to rename it.
    pub fn op_mut(&mut self) -> &mut OpRef {
        op_field!(self)
    }
}
