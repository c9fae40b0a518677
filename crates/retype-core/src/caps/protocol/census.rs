//! The census: does any node hold a capability of some kind over this
//! memory, or is one on its way to a node? Two operations take one: before
//! memory is reclaimed, any capability over it
//! ([`Sought::Any`](super::region::Sought::Any)); before a retype, a
//! descendant of its source in the way
//! ([`Sought::InTheWay`](super::region::Sought::InTheWay)).
//!
//! A question to every node is not enough: a capability being copied from
//! node A to node B can be missed by both answers (B answers before the
//! copy arrives, A after its own copy was deleted). So the census is a
//! Chandy–Lamport snapshot restricted to one region. On its first
//! `FindRelations` or `Marker` of the census a node answers the asker with
//! what it holds, which also closes its channel to the asker, and sends a
//! `Marker` to every other node; until a node's marker (or the asker's
//! question) arrives, transfers on the channel from that node are recorded.
//! The asker's own state is what it held when it asked (it checks itself in
//! the same step), and it records its own incoming channels until each
//! node's first answer. What the answers and recordings hold is a global
//! state the system really passed through, taken after the census started.
//! "None" in it stays true as long as nothing can make such a capability
//! without one already there: for any capability over memory, always (only
//! a capability over the memory can make another); for a descendant in the
//! way of a retype, while the source's owner holds its key (no retype of it
//! can start, and an ancestor's retype there meets the source itself).
//!
//! A census is named by its asker and operation: the commits of one revoke
//! run a delete job, and maybe a census, on several nodes at once.
//! A node keeps a record per census until every channel into it is closed,
//! the asker until every node's last answer; every record ends, so a
//! node's state stays bounded (the model checker relies on it).

use alloc::vec::Vec;

use super::msg::Msg;
use super::node::Node;
use super::region::{Recording, Region};
use super::slot::{NodeId, OpRef};
use crate::caps::cap::Cap;

impl Node {
    /// Starts census `op` (asked by this node, which has checked itself):
    /// asks every other node. Its end comes from [`Node::census_answer`].
    pub(crate) fn census(&mut self, op: OpRef, q: Region) {
        debug_assert_eq!(q.asker, self.id);
        let open: Vec<NodeId> = (0..self.nodes).filter(|&n| n != self.id).collect();
        for &n in &open {
            self.send(n, Msg::FindRelations { op, q });
        }
        let mut r = recording(q, open);
        r.awaited = r.open.len();
        self.recordings.insert((self.id, op), r);
    }

    /// A transfer from `from` arrived: record it in every census that still
    /// records that channel.
    pub(crate) fn record(&mut self, from: NodeId, cap: &Cap) {
        for r in self.recordings.values_mut() {
            if r.open.contains(&from) && r.q.covers(cap) {
                r.found = true;
            }
        }
    }

    /// `FindRelations` from the asker or `Marker` from another node: the
    /// first takes this node's snapshot; each closes the channel from `from`.
    pub(crate) fn census_marker(&mut self, from: NodeId, op: OpRef, q: Region) {
        let key = (q.asker, op);
        if !self.recordings.contains_key(&key) {
            let found = q.held_by(&self.caps);
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

    /// A node's answer at the asker: closes the channel from it. Once every
    /// node has answered for the last time, the census is over: whether
    /// any answer or recording found a capability sought.
    pub(crate) fn census_answer(
        &mut self,
        from: NodeId,
        op: OpRef,
        found: bool,
        last: bool,
    ) -> Option<bool> {
        let key = (self.id, op);
        let r = self.recordings.get_mut(&key).expect("a census of ours");
        r.open.retain(|&n| n != from);
        r.found |= found;
        r.awaited -= usize::from(last);
        if r.awaited > 0 {
            return None;
        }
        self.recordings.remove(&key).map(|r| r.found)
    }
}

fn recording(q: Region, open: Vec<NodeId>) -> Recording {
    Recording {
        q,
        open,
        found: false,
        awaited: 0,
    }
}
