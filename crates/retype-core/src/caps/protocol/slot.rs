//! Slots and what the protocol keeps per slot: the names a slot's state
//! refers to (nodes and operations), a slot of a node's CSpace, its state
//! (seed 001 Figure 4.7) and owner, and whether relations of its capability
//! may be on other nodes. Every operation shares these, so they import
//! nothing of the protocol.

use crate::caps::cow_vec::CowVec;
use crate::caps::cspace::Level;
use crate::caps::mdb::CapId;

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
/// remote copies, descendants and ancestors bits), from
/// [`Exported`](super::exported::Exported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relations {
    pub copies: bool,
    pub descendants: bool,
    pub ancestors: bool,
}
