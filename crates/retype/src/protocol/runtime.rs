//! The nodes of `retype_core::caps::protocol` on OS threads.
//!
//! Every node runs on a thread of its own and reads one inbox, a FIFO
//! channel that carries its requests and the messages of every other node:
//! one inbox per receiver keeps each sender→receiver pair in order, which
//! is all the protocol asks of its channels. The driver (a benchmark, a
//! test) runs on the thread of node 0, as Barrelfish's benchmark
//! application shares its core with that core's CPU driver and monitor:
//! while it waits for an outcome, it serves node 0's inbox.
//!
//! Each node stamps what it does with the time-stamp counter, by the
//! operation it serves ([`Msg::op`]): the time inside [`Node::step`] and
//! the time each request or message spent on its channel, so that a
//! benchmark can break an operation's latency down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use retype_core::caps::protocol::{Input, Msg, Node, NodeId, OpRef, Outcome, Request};

use crate::timing::ticks;

/// How a thread waits for its inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Polls, and sleeps in the channel once nothing came for a few
    /// hundred microseconds: for no more threads than cores, where a
    /// message to a busy node is picked up within a cache-line transfer and
    /// an idle node leaves its core (and, with SMT, its sibling's share of
    /// it) to the others.
    Spin,
    /// Sleeps in the channel until something arrives: for any number of
    /// threads, at the price of a wake-up per message.
    Block,
}

impl Wait {
    /// Spin when every node can have a core of its own.
    pub fn for_nodes(nodes: usize) -> Wait {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if nodes <= cores {
            Wait::Spin
        } else {
            Wait::Block
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Wait::Spin => "spin",
            Wait::Block => "block",
        }
    }
}

/// What a node did for an operation, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub op: OpRef,
    pub kind: Kind,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Inside [`Node::step`].
    Step,
    /// A request or message on its channel, from send to receipt.
    Transit,
}

/// What an inbox carries.
enum Envelope {
    Request {
        id: u64,
        req: Request,
        sent: u64,
    },
    Message {
        from: NodeId,
        msg: Msg,
        sent: u64,
    },
    /// To the driver: request `op` finished.
    Done {
        op: OpRef,
        outcome: Outcome,
    },
    Ping,
    /// To the driver: the answer to a ping.
    Pong,
    /// Hand the events recorded so far to the driver.
    Collect,
    Events(Vec<Event>),
    Stop,
}

/// One node's thread: its node, inbox and the other nodes' inboxes.
struct Worker {
    node: Node,
    inbox: Receiver<Envelope>,
    /// Every node's inbox, by node number (this node's too).
    peers: Vec<Sender<Envelope>>,
    /// Every node's counts of requests and messages, by node number.
    counts: Arc<[Counts]>,
    events: Vec<Event>,
    wait: Wait,
}

/// Events a node has room for without allocating: a few operations' worth.
const EVENTS: usize = 256;

/// The driver's node number.
const HOME: NodeId = 0;

/// What one node sent (requests, for the driver's node) and handled, and
/// the envelopes it took from its inbox. Only the node itself writes them, each on a cache line of its own, so that
/// counting costs no more than a store: a counter that every node updated
/// would move between cores with every message.
#[derive(Default)]
#[repr(align(128))]
struct Counts {
    sent: AtomicU64,
    handled: AtomicU64,
    received: AtomicU64,
}

impl Counts {
    /// One more, by the one thread that writes `c`; a reader that sees it
    /// sees everything counted before it.
    fn bump(c: &AtomicU64) {
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

/// Sent and handled, summed over every node, one node after the other.
fn totals(counts: &[Counts]) -> (u64, u64) {
    counts.iter().fold((0, 0), |(s, h), c| {
        let handled = c.handled.load(Ordering::Acquire);
        (s + c.sent.load(Ordering::Acquire), h + handled)
    })
}

/// Empty polls before a spinning node sleeps: with a spin-loop hint of
/// tens to about 150 cycles, some hundred microseconds, far more than the
/// gaps between one operation's messages, far less than a node left idle by
/// operations local to another.
const POLLS: u32 = 1 << 12;

impl Worker {
    fn recv(&self) -> Option<Envelope> {
        let e = self.wait_for_envelope();
        if e.is_some() {
            Counts::bump(&self.counts().received);
        }
        e
    }

    fn wait_for_envelope(&self) -> Option<Envelope> {
        if self.wait == Wait::Spin {
            for _ in 0..POLLS {
                match self.inbox.try_recv() {
                    Ok(e) => return Some(e),
                    Err(TryRecvError::Disconnected) => return None,
                    Err(TryRecvError::Empty) => std::hint::spin_loop(),
                }
            }
        }
        self.inbox.recv().ok()
    }

    /// This node's counts.
    fn counts(&self) -> &Counts {
        &self.counts[self.node.id() as usize]
    }

    fn send(&self, to: NodeId, e: Envelope) {
        self.peers[to as usize]
            .send(e)
            .expect("a node's inbox lives as long as the runtime");
    }

    /// Handles a request or a message: steps the node and sends what it
    /// produced; returns the requests that finished, with the tick of the
    /// step's end.
    fn step(&mut self, op: OpRef, input: Input, sent: u64) -> Vec<(OpRef, Outcome)> {
        let start = ticks();
        let out = self.node.step(input);
        let end = ticks();
        self.events.push(Event {
            op,
            kind: Kind::Transit,
            start: sent,
            end: start,
        });
        self.events.push(Event {
            op,
            kind: Kind::Step,
            start,
            end,
        });
        let from = self.node.id();
        for (to, msg) in out.sends {
            Counts::bump(&self.counts().sent);
            let sent = ticks();
            self.send(to, Envelope::Message { from, msg, sent });
        }
        // After its sends: whoever sees it handled sees them sent.
        Counts::bump(&self.counts().handled);
        let done = out.done.into_iter();
        done.map(|(id, r)| (OpRef { node: from, id }, r)).collect()
    }

    /// Handles the envelopes meant for a node; returns the others (the
    /// driver's) and, for a request or message, what finished.
    fn handle(&mut self, e: Envelope) -> Result<Vec<(OpRef, Outcome)>, Envelope> {
        let me = self.node.id();
        Ok(match e {
            Envelope::Request { id, req, sent } => {
                let op = OpRef { node: me, id };
                self.step(op, Input::Request(id, req), sent)
            }
            Envelope::Message { from, msg, sent } => {
                self.step(msg.op(), Input::Message(from, msg), sent)
            }
            Envelope::Ping => {
                self.send(HOME, Envelope::Pong);
                Vec::new()
            }
            Envelope::Collect => {
                // Room for the next operations' events: growing the list
                // mid-operation would be timed with it.
                let events = std::mem::replace(&mut self.events, Vec::with_capacity(EVENTS));
                self.send(HOME, Envelope::Events(events));
                Vec::new()
            }
            other => return Err(other),
        })
    }

    /// A node other than the driver's: serves its inbox until stopped.
    fn serve(mut self) -> Node {
        while let Some(e) = self.recv() {
            match self.handle(e) {
                Ok(done) => {
                    for (op, outcome) in done {
                        self.send(HOME, Envelope::Done { op, outcome });
                    }
                }
                Err(Envelope::Stop) => break,
                Err(_) => unreachable!("driver envelopes go to node {HOME}"),
            }
        }
        self.node
    }
}

/// The driver's side: submits requests, waits for outcomes, serving node
/// 0's inbox meanwhile.
pub struct Driver {
    home: Worker,
    next_id: u64,
    /// Outcomes not yet waited for, with the tick the driver saw them.
    done: BTreeMap<OpRef, (Outcome, u64)>,
    pongs: usize,
    events: Vec<Vec<Event>>,
    /// Each node's handled count when its events were last collected: a
    /// node whose count has not moved since recorded nothing new.
    collected: Vec<u64>,
}

impl Driver {
    pub fn nodes(&self) -> usize {
        self.home.peers.len()
    }

    /// Node 0, which runs on the driver's thread.
    pub fn home(&self) -> &Node {
        &self.home.node
    }

    pub fn wait_mode(&self) -> Wait {
        self.home.wait
    }

    /// Asks `node` to do `req`; returns the operation's name.
    pub fn submit(&mut self, node: NodeId, req: Request) -> OpRef {
        self.next_id += 1;
        let id = self.next_id;
        Counts::bump(&self.home.counts().sent);
        let sent = ticks();
        self.home.send(node, Envelope::Request { id, req, sent });
        OpRef { node, id }
    }

    /// Serves node 0's inbox for one envelope.
    fn pump(&mut self) {
        let e = self.home.recv().expect("the driver holds its own sender");
        self.take(e);
    }

    fn take(&mut self, e: Envelope) {
        match self.home.handle(e) {
            Ok(done) => {
                let now = ticks();
                self.done
                    .extend(done.into_iter().map(|(op, r)| (op, (r, now))));
            }
            Err(Envelope::Done { op, outcome }) => {
                self.done.insert(op, (outcome, ticks()));
            }
            Err(Envelope::Pong) => self.pongs += 1,
            Err(Envelope::Events(e)) => self.events.push(e),
            Err(_) => unreachable!("node {HOME} gets no stop, ping or collect"),
        }
    }

    /// Waits for the outcome of `op`; returns it with the tick at which
    /// the driver saw it.
    pub fn wait(&mut self, op: OpRef) -> (Outcome, u64) {
        loop {
            if let Some(r) = self.done.remove(&op) {
                return r;
            }
            self.pump();
        }
    }

    /// Waits until no request or message is left on any node: the trailing
    /// messages of an operation that already answered are handled too.
    /// Counts only grow, so two sweeps over every node's counts that agree
    /// with each other, everything sent handled, mean that nothing moved
    /// between them and nothing is left (Mattern's four counters).
    pub fn settle(&mut self) {
        loop {
            let first = totals(&self.home.counts);
            if first.0 == first.1 && totals(&self.home.counts) == first {
                return;
            }
            let next = match self.home.wait {
                Wait::Spin => self.home.inbox.try_recv().ok(),
                // Nothing wakes the driver when other nodes fall quiet.
                Wait::Block => self.home.inbox.recv_timeout(Duration::from_micros(50)).ok(),
            };
            if let Some(e) = next {
                Counts::bump(&self.home.counts().received);
                self.take(e);
            }
        }
    }

    /// Runs one request to its end: its outcome, and nothing left in flight.
    pub fn run(&mut self, node: NodeId, req: Request) -> Outcome {
        let op = self.submit(node, req);
        let (r, _) = self.wait(op);
        self.settle();
        r
    }

    /// Every node's events since the last call, once everything settled.
    /// Only the nodes that handled something since are asked, so that
    /// timing an operation local to node 0 wakes no other node.
    pub fn events(&mut self) -> Vec<Event> {
        self.settle();
        let mut asked = 0;
        for n in 1..self.nodes() {
            let handled = self.home.counts[n].handled.load(Ordering::Acquire);
            if handled != self.collected[n] {
                self.collected[n] = handled;
                self.home.send(n as NodeId, Envelope::Collect);
                asked += 1;
            }
        }
        while self.events.len() < asked {
            self.pump();
        }
        let mut all = std::mem::replace(&mut self.home.events, Vec::with_capacity(EVENTS));
        all.extend(self.events.drain(..).flatten());
        all
    }

    /// One round trip to `node` and back over the inboxes, in ticks.
    pub fn round_trip(&mut self, node: NodeId) -> u64 {
        assert_ne!(node, HOME, "a round trip leaves the driver's node");
        let t0 = ticks();
        self.home.send(node, Envelope::Ping);
        while self.pongs == 0 {
            self.pump();
        }
        let t1 = ticks();
        self.pongs = 0;
        t1 - t0
    }
}

struct StopOthers(Vec<Sender<Envelope>>);

impl Drop for StopOthers {
    fn drop(&mut self) {
        for inbox in &self.0[1..] {
            // A node whose thread ended has no inbox left to tell.
            let _ = inbox.send(Envelope::Stop);
        }
    }
}

/// Runs `nodes` (node `k` at index `k`), node 0 and `driver` on this
/// thread and every other node on a thread of its own; returns what
/// `driver` returned and the nodes as they are when it has settled.
pub fn run<R>(
    nodes: Vec<Node>,
    wait: Wait,
    driver: impl FnOnce(&mut Driver) -> R,
) -> (R, Vec<Node>) {
    let (senders, inboxes): (Vec<_>, Vec<_>) = nodes.iter().map(|_| unbounded()).unzip();
    let counts: Arc<[Counts]> = nodes.iter().map(|_| Counts::default()).collect();
    let mut workers = nodes.into_iter().zip(inboxes).map(|(node, inbox)| Worker {
        node,
        inbox,
        peers: senders.clone(),
        counts: counts.clone(),
        events: Vec::with_capacity(EVENTS),
        wait,
    });
    let home = workers.next().expect("at least one node");
    std::thread::scope(|s| {
        let threads: Vec<_> = workers
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("node {}", w.node.id()))
                    .spawn_scoped(s, move || w.serve())
                    .expect("a thread for a node")
            })
            .collect();
        let mut d = Driver {
            home,
            next_id: 0,
            done: BTreeMap::new(),
            pongs: 0,
            events: Vec::new(),
            collected: vec![0; senders.len()],
        };
        // Stops the other nodes however the driver ends, even by a panic,
        // without which the scope would wait for them forever.
        let stop = StopOthers(d.home.peers.clone());
        let r = driver(&mut d);
        d.settle();
        drop(stop);
        let mut nodes = vec![d.home.node];
        nodes.extend(
            threads
                .into_iter()
                .map(|t| t.join().expect("a node thread")),
        );
        (r, nodes)
    })
}

#[cfg(test)]
mod tests;
