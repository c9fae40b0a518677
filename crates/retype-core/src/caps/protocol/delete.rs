//! Delete (seed 001 Algorithm 3, §4.3, §4.6). What needs no other node goes
//! at once; the rest is a delete job (its state in `job`), which deletes a
//! list of slots one at a time, as Barrelfish's delete stepping does, and
//! which a revoke's commit runs too. Each slot is one of the
//! cases of §4.7.3: a foreign copy, or a local one with local copies, just
//! goes; the owner's last copy first asks whether copies remain elsewhere
//! and hands ownership to one of them; the last copy in the system destroys
//! its object, and its memory is reclaimed if no capability on any node
//! covers or lies inside it. A CNode whose last copy goes is marked and its
//! slots joined to the list; when the list is done, the emptied CNodes are
//! freed in reverse order, as a stack. Every slot on the list is marked in
//! delete, so no other operation starts on it.

use alloc::vec::Vec;

use super::job::{Job, JobReply, Wait};
use super::msg::Msg;
use super::mutation::Mutation;
use super::node::Node;
use super::region::Region;
use super::request::Done;
use super::slot::{NodeId, OpRef, SlotState};
use crate::caps::cap::Cap;
use crate::caps::mdb::{CapId, Mdb};
use crate::caps::system::Fate;

/// Whether a slot still belongs to the job `op` or may become its.
enum Claim {
    Mine,
    /// Held by an operation in flight: later.
    Later,
    /// Gone, or another delete holds it.
    Drop,
}

impl Node {
    /// Delete (Algorithm 3). A foreign copy, a copy with local copies, and
    /// the last copy of memory that never left this node go at once; the
    /// rest (the owner's last copy of memory that crossed, a CNode) is a job.
    pub(crate) fn delete(&mut self, op: OpRef, id: CapId, cap: &Cap) -> Option<Done> {
        let copy = self.meta[&id].owner != self.id || self.caps.mdb().has_copies(id);
        if cap.ty.is_cnode() || !(copy || self.is_local(cap)) {
            self.start_job(op, Vec::from([id]), JobReply::User);
            return None;
        }
        let fate = if copy {
            Fate::COPY
        } else {
            self.caps.last_fate(id)
        };
        self.meta.remove(&id);
        let mut marked = Vec::new();
        self.caps.remove_as(id, fate, &mut marked);
        self.forget(cap);
        debug_assert!(marked.is_empty(), "only CNodes are marked");
        Some(Done {
            reclaimed: self.caps.take_reclaimed(),
        })
    }

    /// Starts `op`'s job over `items`, each marked in delete unless another
    /// operation holds it.
    pub(crate) fn start_job(&mut self, op: OpRef, items: Vec<CapId>, reply: JobReply) {
        for &id in &items {
            if self.meta[&id].state == SlotState::Ready {
                self.set_state(id, SlotState::InDelete(op));
            }
        }
        let job = Job {
            items: items.into(),
            marked: Vec::new(),
            swept: 0,
            wait: Wait::No,
            reply,
            reclaimed: Vec::new(),
        };
        self.jobs.insert(op, job);
        self.advance(op);
    }

    fn claim(&mut self, op: OpRef, id: CapId) -> Claim {
        match self.meta.get(&id).map(|m| m.state) {
            None => Claim::Drop,
            Some(SlotState::Ready) => {
                self.set_state(id, SlotState::InDelete(op));
                Claim::Mine
            }
            // A revoke's own capability inside a CNode the revoke empties
            // goes with it, as on one core.
            Some(SlotState::InDelete(o) | SlotState::Locked(o)) if o == op => Claim::Mine,
            // A revoke is done only when every copy and descendant is gone,
            // so its commit takes another delete's slot, or waits for the
            // one that delete is working on; a user's delete leaves them.
            Some(SlotState::InDelete(_)) if self.jobs[&op].reply == JobReply::User => Claim::Drop,
            Some(SlotState::InDelete(_))
                if self.jobs.values().any(|j| j.wait.item() == Some(id)) =>
            {
                Claim::Later
            }
            Some(SlotState::InDelete(_)) => {
                self.set_state(id, SlotState::InDelete(op));
                Claim::Mine
            }
            Some(SlotState::Locked(_)) => Claim::Later,
        }
    }

    /// Works through the job until it waits or ends; returns whether it
    /// did anything.
    pub(crate) fn advance(&mut self, op: OpRef) -> bool {
        let mut moved = false;
        loop {
            let Some(job) = self.jobs.get(&op) else {
                return moved;
            };
            if job.wait != Wait::No {
                return moved;
            }
            // The first slot that is the job's now or no longer its at all.
            let mut next = None;
            for i in 0..job.items.len() {
                let id = self.jobs[&op].items[i];
                match self.claim(op, id) {
                    Claim::Later => {}
                    claim => {
                        next = Some((i, claim));
                        break;
                    }
                }
            }
            let job = self.jobs.get_mut(&op).expect("checked");
            match next {
                Some((i, claim)) => {
                    let id = job.items.remove(i).expect("in range");
                    moved = true;
                    if let Claim::Mine = claim {
                        self.delete_item(op, id);
                    }
                }
                None if !job.items.is_empty() => return moved,
                None if job.swept < job.marked.len() => {
                    let base = job.marked[job.swept];
                    job.swept += 1;
                    let slots: Vec<CapId> = self
                        .caps
                        .cnode_slots(base)
                        .filter(|&s| self.caps.cap(s).is_some())
                        .collect();
                    self.jobs.get_mut(&op).expect("checked").items.extend(slots);
                    moved = true;
                }
                None => {
                    let busy = job
                        .marked
                        .iter()
                        .any(|&b| self.caps.cnode_slots(b).any(|s| self.caps.cap(s).is_some()));
                    if busy {
                        return moved;
                    }
                    let job = self.jobs.remove(&op).expect("checked");
                    for &base in job.marked.iter().rev() {
                        self.caps.free_cnode(base);
                    }
                    let done = Done {
                        reclaimed: job.reclaimed,
                    };
                    match job.reply {
                        JobReply::User => self.finish(op, Ok(done)),
                        JobReply::Commit { to } => self.send(
                            to,
                            Msg::Committed {
                                op,
                                reclaimed: done.reclaimed,
                            },
                        ),
                    }
                    return true;
                }
            }
        }
    }

    fn set_wait(&mut self, op: OpRef, wait: Wait) {
        self.jobs.get_mut(&op).expect("a job").wait = wait;
    }

    /// One slot of the list, by the cases of §4.7.3.
    fn delete_item(&mut self, op: OpRef, id: CapId) {
        let cap = self.caps.cap(id).expect("claimed");
        let foreign = self.meta[&id].owner != self.id;
        if foreign || self.caps.mdb().has_copies(id) {
            return self.remove_item(op, id, Fate::COPY);
        }
        let alone = self.mutated(Mutation::DeleteIgnoresForeignCopies);
        if self.nodes > 1 && self.exported.contains(cap.base, cap.size) && !alone {
            return self.find_copies(op, id);
        }
        self.last_copy(op, id);
    }

    fn find_copies(&mut self, op: OpRef, item: CapId) {
        let key = self.caps.cap(item).expect("claimed").key();
        let pending = self.broadcast(self.id, || Msg::FindCopies { op, key });
        let found = None;
        self.set_wait(
            op,
            Wait::Copies {
                item,
                pending,
                found,
            },
        );
    }

    /// The last copy in the system: destroy, and reclaim the memory unless
    /// a capability on some node covers or lies inside it.
    fn last_copy(&mut self, op: OpRef, item: CapId) {
        let cap = self.caps.cap(item).expect("claimed");
        let fate = self.caps.last_fate(item);
        if fate.orphan && self.nodes > 1 && self.exported.overlaps(cap.base, cap.size) {
            self.census(op, Region::over(self.id, &cap));
            return self.set_wait(op, Wait::Relations { item });
        }
        self.remove_item(op, item, fate);
    }

    fn remove_item(&mut self, op: OpRef, id: CapId, fate: Fate) {
        self.meta.remove(&id);
        let cap = self.caps.cap(id).expect("claimed");
        let job = self.jobs.get_mut(&op).expect("a job");
        self.caps.remove_as(id, fate, &mut job.marked);
        job.reclaimed.extend(self.caps.take_reclaimed());
        job.wait = Wait::No;
        self.forget(&cap);
    }

    /// `Copies`: a node's answer to the job's search; once every node has
    /// answered, ownership moves to the lowest that holds a copy, or the
    /// slot holds the last copy in the system.
    pub(crate) fn job_copies(&mut self, op: OpRef, from: NodeId, has: bool) {
        let Some(Wait::Copies {
            item,
            pending,
            found,
        }) = self.jobs.get_mut(&op).map(|j| &mut j.wait)
        else {
            unreachable!("copies answer without a search")
        };
        *pending -= 1;
        if has {
            *found = Some(found.map_or(from, |f| f.min(from)));
        }
        if *pending > 0 {
            return;
        }
        let (item, found) = (*item, *found);
        match found {
            Some(to) => {
                let key = self.caps.cap(item).expect("claimed").key();
                self.send(to, Msg::Move { op, key });
                self.set_wait(op, Wait::Move { item, to });
            }
            None => {
                self.set_wait(op, Wait::No);
                self.last_copy(op, item);
            }
        }
    }

    /// `Moved`: the node asked took ownership, and the others are told; or
    /// it refused, and the search starts again.
    pub(crate) fn job_moved(&mut self, op: OpRef, ok: bool) {
        let Some(Wait::Move { item, to }) = self.jobs.get(&op).map(|j| j.wait) else {
            unreachable!("moved without a move")
        };
        if !ok || self.mutated(Mutation::MoveRetriedForever) {
            return self.find_copies(op, item);
        }
        let key = self.caps.cap(item).expect("claimed").key();
        self.set_owner(&key, to);
        let pending = if self.mutated(Mutation::MoveWithoutUpdate) {
            0
        } else {
            self.broadcast(to, || Msg::OwnerUpdate { op, key, owner: to })
        };
        self.set_wait(op, Wait::Owners { item, to, pending });
        if pending == 0 {
            self.moved_everywhere(op);
        }
    }

    /// `OwnerAck`: one more node knows the new owner.
    pub(crate) fn job_owner_ack(&mut self, op: OpRef) {
        let Some(Wait::Owners { pending, .. }) = self.jobs.get_mut(&op).map(|j| &mut j.wait) else {
            unreachable!("owner ack without a move")
        };
        *pending -= 1;
        if *pending == 0 {
            self.moved_everywhere(op);
        }
    }

    fn moved_everywhere(&mut self, op: OpRef) {
        let Some(Wait::Owners { item, to, .. }) = self.jobs.get(&op).map(|j| j.wait) else {
            unreachable!()
        };
        let key = self.caps.cap(item).expect("claimed").key();
        self.send(to, Msg::MoveDone { op, key });
        self.remove_item(op, item, Fate::COPY);
    }

    /// The census is over: `found` when some node held a capability over
    /// the memory (see `census`).
    pub(crate) fn job_relations(&mut self, op: OpRef, found: bool) {
        let Some(Wait::Relations { item }) = self.jobs.get(&op).map(|j| j.wait) else {
            unreachable!("a census without its job")
        };
        let orphan = !found && self.caps.last_fate(item).orphan;
        self.remove_item(op, item, Fate { last: true, orphan });
    }
}
