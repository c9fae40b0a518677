//! What a census asks about ([`Region`]: which memory, for which
//! capabilities) and what a node records of one census it takes part in
//! (see `census` for the snapshot itself).

use alloc::vec::Vec;

use super::slot::NodeId;
use crate::caps::cap::{Cap, Key};
use crate::caps::mdb::AaTree;
use crate::caps::system::{in_the_way, Caps};

/// A census question: who asks, about which memory, for what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub asker: NodeId,
    pub root: u8,
    pub base: u64,
    pub size: u64,
    pub sought: Sought,
}

/// What a census looks for in its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sought {
    /// Any capability: may the memory be reclaimed?
    Any,
    /// A descendant of the capabilities with this key in the way: may a
    /// retype of them take the memory?
    InTheWay(Key),
}

impl Region {
    /// Any capability over `cap`'s memory.
    pub(crate) fn over(asker: NodeId, cap: &Cap) -> Region {
        Region {
            asker,
            root: cap.ty.root(),
            base: cap.base,
            size: cap.size,
            sought: Sought::Any,
        }
    }

    /// A descendant of `key` in the way of a retype over `[base, base + size)`.
    pub(crate) fn in_the_way(asker: NodeId, key: Key, base: u64, size: u64) -> Region {
        Region {
            asker,
            root: key.root,
            base,
            size,
            sought: Sought::InTheWay(key),
        }
    }

    /// `c` is one of the capabilities sought.
    pub(crate) fn covers(&self, c: &Cap) -> bool {
        match &self.sought {
            Sought::Any => {
                c.ty.root() == self.root && c.base < self.base + self.size && self.base < c.end()
            }
            Sought::InTheWay(k) => in_the_way(&c.key(), k, self.base, self.size),
        }
    }

    /// `caps` holds one of the capabilities sought.
    pub(crate) fn held_by(&self, caps: &Caps<AaTree>) -> bool {
        match &self.sought {
            Sought::Any => caps.overlaps(self.root, self.base, self.size),
            Sought::InTheWay(k) => caps.descendant_overlaps(k, self.base, self.size),
        }
    }
}

/// One census as one node sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Recording {
    pub q: Region,
    /// Nodes whose channel into this one is still recorded.
    pub open: Vec<NodeId>,
    /// A capability sought arrived on an open channel, or (at the asker)
    /// a node answered that it holds one.
    pub found: bool,
    /// At the asker: nodes whose last answer has not come.
    pub awaited: usize,
}
