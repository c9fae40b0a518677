//! The state of a delete job (see `delete`): the slots it still has to
//! delete, the CNodes it emptied, what it waits for and whom it answers;
//! and a node's jobs, kept in the order they started.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::slot::{NodeId, OpRef};
use crate::caps::mdb::CapId;

/// Whom the job answers when it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum JobReply {
    /// The user's delete request.
    User,
    /// A revoke's commit, from node `to`.
    Commit { to: NodeId },
}

/// What the job waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Wait {
    No,
    /// Answers to "do you hold a copy?"; the lowest node that does.
    Copies {
        item: CapId,
        pending: usize,
        found: Option<NodeId>,
    },
    /// Node `to` taking ownership.
    Move {
        item: CapId,
        to: NodeId,
    },
    /// The other nodes learning that `to` owns the capability now.
    Owners {
        item: CapId,
        to: NodeId,
        pending: usize,
    },
    /// The census: "do you hold a capability over this memory?".
    Relations {
        item: CapId,
    },
}

impl Wait {
    /// The slot being deleted while the job waits.
    pub fn item(&self) -> Option<CapId> {
        match *self {
            Wait::No => None,
            Wait::Copies { item, .. }
            | Wait::Move { item, .. }
            | Wait::Owners { item, .. }
            | Wait::Relations { item, .. } => Some(item),
        }
    }
}

/// One delete job: its list of slots, worked through one at a time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Job {
    pub items: VecDeque<CapId>,
    /// CNodes whose last copy went: their slots join the list, in order.
    pub marked: Vec<u64>,
    pub swept: usize,
    pub wait: Wait,
    pub reply: JobReply,
    pub reclaimed: Vec<(u64, u64)>,
}

/// A node's delete jobs, in the order they started. `Node::settle`
/// advances them in that order, so which of two jobs takes a slot both
/// want does not depend on how their operations are numbered: the node code
/// uses an operation id only as a name, which the model checker's symmetry
/// reduction relies on (docs/model-check.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Jobs(Vec<(OpRef, Job)>);

impl Jobs {
    pub fn get(&self, op: &OpRef) -> Option<&Job> {
        self.0.iter().find(|(o, _)| o == op).map(|(_, j)| j)
    }

    pub fn get_mut(&mut self, op: &OpRef) -> Option<&mut Job> {
        self.0.iter_mut().find(|(o, _)| o == op).map(|(_, j)| j)
    }

    pub fn contains_key(&self, op: &OpRef) -> bool {
        self.get(op).is_some()
    }

    /// Starts `op`'s job after every job already here.
    pub fn insert(&mut self, op: OpRef, job: Job) {
        debug_assert!(!self.contains_key(&op), "one job per operation and node");
        self.0.push((op, job));
    }

    pub fn remove(&mut self, op: &OpRef) -> Option<Job> {
        let i = self.0.iter().position(|(o, _)| o == op)?;
        Some(self.0.remove(i).1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The jobs' operations, oldest first.
    pub fn keys(&self) -> impl Iterator<Item = &OpRef> {
        self.0.iter().map(|(o, _)| o)
    }

    pub fn values(&self) -> impl Iterator<Item = &Job> {
        self.0.iter().map(|(_, j)| j)
    }

    /// The jobs with their operations, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(OpRef, Job)> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut (OpRef, Job)> {
        self.0.iter_mut()
    }
}

impl core::ops::Index<&OpRef> for Jobs {
    type Output = Job;

    fn index(&self, op: &OpRef) -> &Job {
        self.get(op).expect("a job of this operation")
    }
}
