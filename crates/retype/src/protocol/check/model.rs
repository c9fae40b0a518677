//! The model: the nodes' replicas, every channel's messages and the
//! operations in flight; an action starts one operation from a bounded set
//! or delivers the head message of one channel. A step is one call of
//! [`Node::step`], the code the simulator and the thread runtime run.
//!
//! Properties that hold of a state are checked on every state; those of a
//! step (a slot not changed without being emptied, what a finished retype,
//! revoke or reclaim leaves) are checked as the step is taken and the first
//! broken one is kept in the state, which ends the path there.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use retype_core::caps::cap::Cap;
use retype_core::caps::protocol::props;
use retype_core::caps::protocol::{Input, Msg, Node, NodeId, Outcome, Request, Slot};
use retype_core::caps::types::{CapType, PAGE};
use stateright::{Model, Property};

use super::search::TASKS;

/// What is checked, and how big.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub nodes: u8,
    /// Bytes of memory, each one 4 KiB page of ours (see docs/model-check.md).
    pub mem: u64,
    pub slots: u32,
    /// Operations in flight at once.
    pub ops: u64,
    pub regions: Regions,
    pub symmetry: Symmetry,
}

/// Which retype target regions are asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Regions {
    /// Every base in memory and every size up to the memory's.
    All,
    /// Seed 001 Figure 5.1's five (3 bytes of memory only).
    Reduced,
}

/// Whether states that differ only by how operations are numbered are
/// counted once (see `symmetry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Symmetry {
    On,
    Off,
}

/// The types retype makes: memory split further, and memory to map.
pub const TYPES: [CapType; 2] = [CapType::Ram, CapType::Frame];

/// An operation id's use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Free,
    /// Asked of `node`; `cap` is what its slot held when it started.
    Running {
        node: NodeId,
        req: Request,
        cap: Option<Cap>,
    },
    /// Finished, but a message or a node still names it.
    Draining,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct State {
    /// Shared, so that a step copies only the node that takes it.
    pub nodes: Vec<Arc<Node>>,
    /// The channel from node `a` to node `b` is `chans[a * n + b]`.
    pub chans: Vec<VecDeque<Msg>>,
    pub ops: Vec<Op>,
    /// The first property a step broke, and how.
    pub broken: Option<(&'static str, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Start { id: u64, node: NodeId, req: Request },
    Deliver { from: NodeId, to: NodeId },
}

/// A model slot: slot `i` is on node `i % nodes`.
pub fn slot(cfg: &Config, i: u32) -> (NodeId, Slot) {
    let n = cfg.nodes as u32;
    ((i % n) as NodeId, Slot::l1(8 + i / n))
}

/// What a request asks, before the retype offset is known.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Copy(u32, u32),
    Delete(u32),
    Revoke(u32),
    /// Source slot, region (base, size) in bytes, type, destination slot.
    Retype(u32, (u64, u64), CapType, u32),
}

pub struct CapModel {
    pub cfg: Config,
    pub init: State,
    asks: Vec<Ask>,
}

/// The names of the properties, in the order they are checked.
pub const PROPERTIES: [&str; 9] = [
    "SlotInvariants",
    "OwnershipInvariants",
    "OperationInvariants",
    "SlotProperty",
    "RetypesDisjoint",
    "RevokeRemovesAll",
    "ReclaimFreeMemory",
    "EveryOperationCompletes",
    "NodeCodeNeverPanics",
];

impl CapModel {
    pub fn new(cfg: Config, init: Vec<Node>) -> CapModel {
        assert!(
            2 * cfg.ops as usize <= TASKS,
            "at most {TASKS} operation ids"
        );
        let n = cfg.nodes as usize;
        let init = State {
            nodes: init.into_iter().map(Arc::new).collect(),
            chans: vec![VecDeque::new(); n * n],
            ops: vec![Op::Free; 2 * cfg.ops as usize],
            broken: None,
        };
        CapModel {
            asks: asks(&cfg),
            cfg,
            init,
        }
    }

    /// The request `ask` is in `s`, or `None` if it cannot be said (a
    /// region below its source's memory: our retype takes an offset).
    fn request(&self, s: &State, ask: Ask) -> Option<(NodeId, Request)> {
        let at = |i| slot(&self.cfg, i);
        Some(match ask {
            Ask::Copy(a, b) => {
                let ((n, src), (node, dest)) = (at(a), at(b));
                (n, Request::Copy { src, node, dest })
            }
            Ask::Delete(a) => (at(a).0, Request::Delete(at(a).1)),
            Ask::Revoke(a) => (at(a).0, Request::Revoke(at(a).1)),
            Ask::Retype(a, (base, size), ty, b) => {
                let (n, src) = at(a);
                let cap = s.nodes[n as usize].slot(src).ok().map(|(c, _, _)| c);
                let offset = (base * PAGE).checked_sub(cap.map_or(0, |c| c.base))?;
                let req = Request::retype(src, ty, offset, size * PAGE, 1, at(b).1);
                (n, req)
            }
        })
    }

    /// Takes one step of node `n`, puts what it sends on the channels and
    /// checks the step's properties.
    fn step(&self, s: &mut State, n: NodeId, input: Input) {
        let node = Arc::make_mut(&mut s.nodes[n as usize]);
        let before: Vec<_> = node.caps().live().map(|(id, c)| (id, *c)).collect();
        let out = match panic::catch_unwind(AssertUnwindSafe(|| node.step(input))) {
            Ok(out) => out,
            Err(e) => {
                let what = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                s.broken = Some(("NodeCodeNeverPanics", format!("node {n}: {what}")));
                return;
            }
        };
        let k = self.cfg.nodes as usize;
        for (to, m) in out.sends {
            s.chans[n as usize * k + to as usize].push_back(m);
        }
        if let Err(e) = props::immutable(&before, &s.nodes[n as usize]) {
            s.broken = Some(("SlotProperty", e));
        }
        for (id, r) in out.done {
            self.finished(s, n, id, r);
        }
        for id in 0..s.ops.len() {
            if s.ops[id] == Op::Draining && !props::mentions(&nodes(s), &msgs(s), id as u64) {
                s.ops[id] = Op::Free;
            }
        }
        if s.broken.is_none() {
            s.broken = state_check(s);
        }
    }

    /// Operation `id` of node `n` finished with `r`: what it leaves.
    fn finished(&self, s: &mut State, n: NodeId, id: u64, r: Outcome) {
        let op = std::mem::replace(&mut s.ops[id as usize], Op::Draining);
        let Op::Running { node, req, cap } = op else {
            s.broken = Some((
                "OperationInvariants",
                format!("op {id} done but not running"),
            ));
            return;
        };
        if node != n {
            let e = format!("op {id} of node {node} reported done by node {n}");
            s.broken = Some(("OperationInvariants", e));
            return;
        }
        let Ok(done) = r else { return };
        let (nodes, msgs) = (nodes(s), msgs(s));
        let nd = nodes[n as usize];
        let check = match (req, cap) {
            (Request::Retype { dest, .. }, Some(src)) => {
                let id = nd.caps().slot_id(nd.r(dest)).expect("the retype filled it");
                let new = nd.caps().get(nd.r(dest)).expect("live");
                let r = props::retyped(&nodes, &msgs, &src, &new, (n, id));
                Some(("RetypesDisjoint", r))
            }
            (Request::Revoke(at), Some(c)) => {
                let id = nd.caps().slot_id(nd.r(at)).ok();
                let at = (n, id.unwrap_or(u32::MAX));
                Some(("RevokeRemovesAll", props::revoked(&nodes, &msgs, &c, at)))
            }
            _ => None,
        };
        let reclaim = props::reclaimed(&nodes, &msgs, &done.reclaimed);
        let broken = check
            .into_iter()
            .chain([("ReclaimFreeMemory", reclaim)])
            .find_map(|(name, r)| r.err().map(|e| (name, e)));
        if s.broken.is_none() {
            s.broken = broken;
        }
    }
}

/// The nodes.
pub fn nodes(s: &State) -> Vec<&Node> {
    s.nodes.iter().map(|n| &**n).collect()
}

/// The messages in flight.
pub fn msgs(s: &State) -> Vec<&Msg> {
    s.chans.iter().flatten().collect()
}

/// The properties of a state.
fn state_check(s: &State) -> Option<(&'static str, String)> {
    let (nodes, msgs) = (nodes(s), msgs(s));
    let fail = |name, r: props::Check| r.err().map(|e| (name, e));
    fail("SlotInvariants", props::slots(&nodes))
        .or_else(|| fail("OwnershipInvariants", props::ownership(&nodes, &msgs)))
        .or_else(|| {
            if !msgs.is_empty() {
                return None;
            }
            if let Some(id) = s.ops.iter().position(|o| matches!(o, Op::Running { .. })) {
                let e = format!("op {id} is waiting with nothing in flight");
                return Some(("EveryOperationCompletes", e));
            }
            fail("EveryOperationCompletes", props::settled(&nodes))
        })
}

/// Every request of the bounded set: on the model's slots, copy anywhere,
/// delete, revoke, and retype into a slot of the same node.
fn asks(cfg: &Config) -> Vec<Ask> {
    let regions: Vec<(u64, u64)> = match cfg.regions {
        Regions::All => (0..cfg.mem)
            .flat_map(|b| (1..=cfg.mem).map(move |s| (b, s)))
            .collect(),
        Regions::Reduced => vec![(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)],
    };
    let mut v = Vec::new();
    for a in 0..cfg.slots {
        v.push(Ask::Delete(a));
        v.push(Ask::Revoke(a));
        for b in (0..cfg.slots).filter(|&b| b != a) {
            v.push(Ask::Copy(a, b));
            if slot(cfg, a).0 == slot(cfg, b).0 {
                for &r in &regions {
                    for ty in TYPES {
                        v.push(Ask::Retype(a, r, ty, b));
                    }
                }
            }
        }
    }
    v
}

impl Model for CapModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.init.clone()]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.broken.is_some() {
            return;
        }
        let running = s
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Running { .. }))
            .count();
        let free = s.ops.iter().position(|o| *o == Op::Free);
        if let (true, Some(id)) = (running < self.cfg.ops as usize, free) {
            for &ask in &self.asks {
                if let Some((node, req)) = self.request(s, ask) {
                    let id = id as u64;
                    actions.push(Action::Start { id, node, req });
                }
            }
        }
        let k = self.cfg.nodes as usize;
        for (i, c) in s.chans.iter().enumerate() {
            if !c.is_empty() {
                let (from, to) = ((i / k) as NodeId, (i % k) as NodeId);
                actions.push(Action::Deliver { from, to });
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        match action {
            Action::Start { id, node, req } => {
                let at = match req {
                    Request::Copy { src, .. } | Request::Retype { src, .. } => Some(src),
                    Request::Delete(a) | Request::Revoke(a) => Some(a),
                    Request::Noop => None,
                };
                let cap = at.and_then(|a| s.nodes[node as usize].slot(a).ok().map(|x| x.0));
                s.ops[id as usize] = Op::Running { node, req, cap };
                self.step(&mut s, node, Input::Request(id, req));
            }
            Action::Deliver { from, to } => {
                let k = self.cfg.nodes as usize;
                let m = s.chans[from as usize * k + to as usize].pop_front()?;
                self.step(&mut s, to, Input::Message(from, m));
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let holds: [fn(&CapModel, &State) -> bool; 9] = [
            holds::<0>, holds::<1>, holds::<2>, holds::<3>, holds::<4>, holds::<5>, holds::<6>,
            holds::<7>, holds::<8>,
        ];
        PROPERTIES
            .iter()
            .zip(holds)
            .map(|(&name, f)| Property::always(name, f))
            .collect()
    }
}

/// Property `I` of [`PROPERTIES`] is not broken in `s`.
fn holds<const I: usize>(_: &CapModel, s: &State) -> bool {
    s.broken.as_ref().is_none_or(|b| b.0 != PROPERTIES[I])
}
