//! The properties the model checker (`retype caps check`) asks of every
//! state and step: seed 001 chapter 5's invariants, restated over replicas
//! and messages in flight, and what the protocol promises beyond them.
//! Each returns what is wrong, in words, or `Ok`.
//!
//! A *world* is every node and every message in flight. Capabilities in
//! flight (a `Transfer` or `CopyVia`) count as held, since they will land.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::msg::Msg;
use super::node::Node;
use super::slot::{NodeId, OpRef, SlotState};
use crate::caps::cap::{Cap, Key};
use crate::caps::mdb::CapId;

pub type Check = Result<(), String>;

/// Every capability held by a node, with where it is.
fn held<'a>(nodes: &'a [&'a Node]) -> impl Iterator<Item = (NodeId, CapId, Cap)> + 'a {
    nodes
        .iter()
        .flat_map(|n| n.caps.live().map(move |(id, c)| (n.id, id, *c)))
}

/// Every capability in a message in flight.
fn flying<'a>(msgs: &'a [&'a Msg]) -> impl Iterator<Item = Cap> + 'a {
    msgs.iter().filter_map(|m| match m {
        Msg::Transfer { cap, .. } | Msg::CopyVia { cap, .. } => Some(*cap),
        _ => None,
    })
}

/// Every capability of the world but the one in slot `at`: held, or in
/// flight.
fn others<'a>(
    nodes: &'a [&'a Node],
    msgs: &'a [&'a Msg],
    at: Option<(NodeId, CapId)>,
) -> impl Iterator<Item = Cap> + 'a {
    held(nodes)
        .filter(move |&(n, id, _)| Some((n, id)) != at)
        .map(|(_, _, c)| c)
        .chain(flying(msgs))
}

/// `c` is a descendant of `a`: inside its memory, and smaller or made from it.
pub fn descends(c: &Key, a: &Key) -> bool {
    c.root == a.root
        && a.base <= c.base
        && c.end() <= a.end()
        && ((c.base, c.size) != (a.base, a.size) || c.ty > a.ty)
}

/// SlotInvariants: a slot has protocol state (an owner among the nodes)
/// exactly when it holds a capability.
pub fn slots(nodes: &[&Node]) -> Check {
    for n in nodes {
        for (id, _) in n.caps.live() {
            match n.meta.get(&id) {
                None => return Err(format!("node {}: slot {id} has no owner", n.id)),
                Some(m) if m.owner >= n.nodes => {
                    return Err(format!(
                        "node {}: slot {id} owned by node {}",
                        n.id, m.owner
                    ))
                }
                Some(_) => {}
            }
        }
        if n.meta.values().count() != n.caps.live().count() {
            return Err(format!("node {}: an empty slot has an owner", n.id));
        }
    }
    Ok(())
}

/// The keys an operation in flight is changing: ownership may be between
/// two values for them.
fn moving(nodes: &[&Node], msgs: &[&Msg]) -> Vec<Key> {
    let mut keys = Vec::new();
    for n in nodes {
        keys.extend(n.key_locks.keys().copied());
        for (id, c) in n.caps.live() {
            if n.meta.get(&id).is_some_and(|m| m.state != SlotState::Ready) {
                keys.push(c.key());
            }
        }
    }
    for m in msgs {
        use Msg::*;
        match m {
            Transfer { cap, .. } | CopyVia { cap, .. } => keys.push(cap.key()),
            Move { key, .. }
            | MoveDone { key, .. }
            | OwnerUpdate { key, .. }
            | Retrieve { key, .. }
            | RetypeReq { key, .. }
            | RetypeDone { key, .. }
            | Mark { key, .. }
            | Commit { key, .. } => keys.push(*key),
            _ => {}
        }
    }
    keys
}

/// OwnershipInvariants (invariants 4.2 and 4.3): copies share their owner,
/// and the owner holds a copy. Checked for every capability that no
/// operation in flight is changing; in a state where nothing is in flight,
/// that is every capability.
pub fn ownership(nodes: &[&Node], msgs: &[&Msg]) -> Check {
    let moving = moving(nodes, msgs);
    let mut owners: BTreeMap<Key, (NodeId, bool)> = BTreeMap::new();
    for n in nodes {
        for (id, c) in n.caps.live() {
            let key = c.key();
            if moving.contains(&key) {
                continue;
            }
            let Some(m) = n.meta.get(&id) else { continue };
            let e = owners.entry(key).or_insert((m.owner, false));
            if e.0 != m.owner {
                return Err(format!(
                    "4.2: copies of {c:?} owned by node {} and node {}",
                    e.0, m.owner
                ));
            }
            e.1 |= m.owner == n.id;
        }
    }
    match owners.iter().find(|(_, &(_, holds))| !holds) {
        Some((k, (o, _))) => Err(format!("4.3: owner node {o} holds no copy of {k:?}")),
        None => Ok(()),
    }
}

/// SlotImmutabilityProperty, over one step of a node: a slot that held a
/// capability before (`before`, the node's live slots then) and holds one
/// after holds the same one (it was not changed without being emptied
/// first).
pub fn immutable(before: &[(CapId, Cap)], after: &Node) -> Check {
    for (id, c) in before {
        if let Some(d) = after.caps.cap(*id) {
            if d != *c {
                return Err(format!(
                    "node {}: slot {id} changed {c:?} to {d:?}",
                    after.id
                ));
            }
        }
    }
    Ok(())
}

/// A retype from `src` made `new` in slot `at`: every other capability over
/// its memory covers the whole source (the source, its copies and its
/// ancestors). Anything else there is an overlapping object.
pub fn retyped(nodes: &[&Node], msgs: &[&Msg], src: &Cap, new: &Cap, at: (NodeId, CapId)) -> Check {
    for c in others(nodes, msgs, Some(at)) {
        let over = c.ty.root() == new.ty.root() && c.base < new.end() && new.base < c.end();
        if over && !(c.base <= src.base && src.end() <= c.end()) {
            return Err(format!("retype made {new:?} over {c:?}"));
        }
    }
    Ok(())
}

/// A revoke of `cap` finished: no copy but `at` and no descendant is left
/// on any node or in flight.
pub fn revoked(nodes: &[&Node], msgs: &[&Msg], cap: &Cap, at: (NodeId, CapId)) -> Check {
    let key = cap.key();
    for c in others(nodes, msgs, Some(at)) {
        let k = c.key();
        if k == key || descends(&k, &key) {
            return Err(format!("revoke of {cap:?} left {c:?}"));
        }
    }
    Ok(())
}

/// Memory handed back is not under any capability anywhere.
pub fn reclaimed(nodes: &[&Node], msgs: &[&Msg], regions: &[(u64, u64)]) -> Check {
    for &(base, size) in regions {
        if let Some(c) = others(nodes, msgs, None).find(|c| c.base < base + size && base < c.end())
        {
            return Err(format!("reclaimed {base:#x}+{size:#x} under {c:?}"));
        }
    }
    Ok(())
}

/// Nothing in flight: every operation has finished, no node waits for an
/// answer, holds a slot or a key, waits for a revoke's commit, or records a
/// census.
pub fn settled(nodes: &[&Node]) -> Check {
    match nodes.iter().find(|n| !n.is_idle()) {
        Some(n) => Err(format!(
            "node {} waits with nothing in flight: ops {:?}, jobs {:?}, keys {:?}, revokes {:?}, parked {:?}, census {:?}",
            n.id,
            n.ops.keys().collect::<Vec<_>>(),
            n.jobs.keys().collect::<Vec<_>>(),
            n.key_locks,
            n.revoking.keys().collect::<Vec<_>>(),
            n.parked,
            n.recordings.keys().collect::<Vec<_>>(),
        )),
        None => Ok(()),
    }
}

/// Whether operation id `id` of any node is still named anywhere: in a
/// node's waiting work, a slot or key it holds, or a message in flight.
pub fn mentions(nodes: &[&Node], msgs: &[&Msg], id: u64) -> bool {
    let is = |o: &OpRef| o.id == id;
    msgs.iter().any(|m| is(&m.op()))
        || nodes.iter().any(|n| {
            n.ops.keys().any(is)
                || n.jobs.keys().any(is)
                || n.key_locks.values().any(is)
                || n.revoking.keys().any(is)
                || n.parked.iter().any(|(_, m)| is(&m.op()))
                || n.recordings.keys().any(|(_, o)| is(o))
                || n.meta.values().any(|m| match m.state {
                    SlotState::Ready => false,
                    SlotState::Locked(o) | SlotState::InDelete(o) => is(&o),
                })
        })
}
