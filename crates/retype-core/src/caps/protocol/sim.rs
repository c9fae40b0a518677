//! The deterministic runtime: nodes exchange messages over one FIFO channel
//! per ordered pair of nodes, and a seeded generator picks at every step
//! which node takes its next request or which channel delivers its head
//! message. Any interleaving that keeps every channel FIFO can come up, and
//! the same seed gives the same run.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use super::msg::Msg;
use super::node::{Input, Node};
use super::request::{Outcome, Request};
use super::slot::{NodeId, OpRef};
use crate::rng::SplitMix64;

pub struct Sim {
    pub nodes: Vec<Node>,
    chans: BTreeMap<(NodeId, NodeId), VecDeque<Msg>>,
    /// Requests not yet taken, per node.
    waiting: Vec<VecDeque<(u64, Request)>>,
    /// Finished requests.
    pub done: BTreeMap<OpRef, Outcome>,
    rng: SplitMix64,
    /// Messages delivered so far.
    pub messages: u64,
}

/// What the scheduler may do next.
#[derive(Clone, Copy)]
enum Event {
    Start(NodeId),
    Deliver(NodeId, NodeId),
}

impl Sim {
    pub fn new(nodes: Vec<Node>, seed: u64) -> Sim {
        let n = nodes.len();
        Sim {
            nodes,
            chans: BTreeMap::new(),
            waiting: (0..n).map(|_| VecDeque::new()).collect(),
            done: BTreeMap::new(),
            rng: SplitMix64::new(seed),
            messages: 0,
        }
    }

    /// Queues a request to node `node`; it starts at a step the scheduler picks.
    pub fn submit(&mut self, node: NodeId, id: u64, req: Request) {
        self.waiting[node as usize].push_back((id, req));
    }

    /// Runs until nothing is left to do, at most `max_steps` steps; returns
    /// whether everything finished.
    pub fn run(&mut self, max_steps: u64) -> bool {
        let mut events = Vec::new();
        for _ in 0..max_steps {
            events.clear();
            for (n, w) in self.waiting.iter().enumerate() {
                if !w.is_empty() {
                    events.push(Event::Start(n as NodeId));
                }
            }
            for (&(from, to), q) in &self.chans {
                if !q.is_empty() {
                    events.push(Event::Deliver(from, to));
                }
            }
            if events.is_empty() {
                return true;
            }
            let e = events[self.rng.below(events.len() as u64) as usize];
            match e {
                Event::Start(n) => {
                    let (id, req) = self.waiting[n as usize].pop_front().expect("non-empty");
                    self.step(n, Input::Request(id, req));
                }
                Event::Deliver(from, to) => {
                    let q = self.chans.get_mut(&(from, to)).expect("non-empty");
                    let m = q.pop_front().expect("non-empty");
                    self.messages += 1;
                    self.step(to, Input::Message(from, m));
                }
            }
        }
        false
    }

    fn step(&mut self, n: NodeId, input: Input) {
        let out = self.nodes[n as usize].step(input);
        for (to, m) in out.sends {
            self.chans.entry((n, to)).or_default().push_back(m);
        }
        for (id, r) in out.done {
            self.done.insert(OpRef { node: n, id }, r);
        }
    }

    /// Messages sent and not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.chans.values().map(|q| q.len()).sum()
    }
}
