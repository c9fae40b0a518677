//! The census before memory is reclaimed: does any node hold a capability
//! over this memory, or is one on its way to a node?
//!
//! A question to every node is not enough: a capability being copied from
//! node A to node B can be missed by both answers (B answers before the
//! copy arrives, A after its own copy was deleted). So the census is a
//! Chandy–Lamport snapshot restricted to one region. On its first
//! `FindRelations` or `Marker` of the census a node answers the asker with
//! what it holds, which also closes its channel to the asker, and sends a
//! `Marker` to every other node; until a node's marker (or the asker's
//! question) arrives, transfers on the channel from that node are recorded.
//! The asker records its own incoming channels until each node's first
//! answer. What the answers and recordings hold is a global state the
//! system really passed through; since only a capability over the memory
//! can make another, "none" in it stays true, and the memory may go.
//!
//! A census is named by its asker and operation: the commits of one revoke
//! run a delete job, and maybe a census, on several nodes at once.
//! A node keeps a record per census until every channel into it is closed;
//! every record ends, so a node's state stays bounded (the model checker
//! relies on it).

use alloc::vec::Vec;

use super::node::Node;
use super::{Msg, NodeId, OpRef};
use crate::caps::cap::Cap;

/// One census as one node sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Recording {
    pub q: Region,
    /// Nodes whose channel into this one is still recorded.
    pub open: Vec<NodeId>,
    /// A capability over the memory arrived on an open channel.
    pub found: bool,
}

impl Recording {
    fn covers(&self, c: &Cap) -> bool {
        let q = &self.q;
        c.ty.root() == q.root && c.base < q.base + q.size && q.base < c.base + c.size
    }
}

/// A census question: who asks, about which memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub asker: NodeId,
    pub root: u8,
    pub base: u64,
    pub size: u64,
}

impl Node {
    /// Starts census `op` over `cap`'s memory: asks every other node;
    /// returns how many final answers to wait for.
    pub(crate) fn census(&mut self, op: OpRef, cap: &Cap) -> usize {
        let q = Region {
            asker: self.id,
            root: cap.ty.root(),
            base: cap.base,
            size: cap.size,
        };
        let open: Vec<NodeId> = (0..self.nodes).filter(|&n| n != self.id).collect();
        for &n in &open {
            self.send(n, Msg::FindRelations { op, q });
        }
        let n = open.len();
        self.recordings.insert((self.id, op), recording(q, open));
        n
    }

    /// A transfer from `from` arrived: record it in every census that still
    /// records that channel.
    pub(crate) fn record(&mut self, from: NodeId, cap: &Cap) {
        for r in self.recordings.values_mut() {
            if r.open.contains(&from) && r.covers(cap) {
                r.found = true;
            }
        }
    }

    /// `FindRelations` from the asker or `Marker` from another node: the
    /// first takes this node's snapshot; each closes the channel from `from`.
    pub(crate) fn census_marker(&mut self, from: NodeId, op: OpRef, q: Region) {
        let key = (q.asker, op);
        if !self.recordings.contains_key(&key) {
            let found = self.caps.overlaps(q.root, q.base, q.size);
            let open: Vec<NodeId> = (0..self.nodes).filter(|&n| n != self.id).collect();
            for &n in &open {
                if n != q.asker {
                    self.send(n, Msg::Marker { op, q });
                }
            }
            let last = open.len() == 1;
            self.send(q.asker, Msg::Relations { op, found, last });
            if last {
                return;
            }
            self.recordings.insert(key, recording(q, open));
        }
        let r = self.recordings.get_mut(&key).expect("just made");
        r.open.retain(|&n| n != from);
        if r.open.is_empty() {
            let r = self.recordings.remove(&key).expect("checked");
            let found = r.found;
            self.send(
                r.q.asker,
                Msg::Relations {
                    op,
                    found,
                    last: true,
                },
            );
        }
    }

    /// An answer at the asker closes the channel from its node.
    pub(crate) fn census_answer(&mut self, from: NodeId, op: OpRef) {
        if let Some(r) = self.recordings.get_mut(&(self.id, op)) {
            r.open.retain(|&n| n != from);
        }
    }

    /// The census is over: whether the asker's recordings found anything.
    pub(crate) fn census_end(&mut self, op: OpRef) -> bool {
        self.recordings
            .remove(&(self.id, op))
            .is_some_and(|r| r.found)
    }
}

fn recording(q: Region, open: Vec<NodeId>) -> Recording {
    Recording {
        q,
        open,
        found: false,
    }
}
