//! The nodes of `retype_core::caps::distributed` on OS threads.
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use retype_core::caps::distributed::{Input, Msg, Node, NodeId, OpRef, Outcome, Request};

use crate::timing::ticks;

/// How a thread waits for its inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Polls, giving its core away now and then: for no more threads than
    /// cores, where a message is picked up within a cache-line transfer.
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
    /// To the driver: node `node` finished request `id`.
    Done {
        op: OpRef,
        outcome: Outcome,
    },
    /// To the driver: the work in flight just ran out.
    Quiet,
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
    /// Requests and messages sent and not yet fully handled, system-wide:
    /// a sender counts what it sends before the receiver discounts what it
    /// took, so zero means that nothing is left anywhere.
    in_flight: Arc<AtomicUsize>,
    events: Vec<Event>,
    wait: Wait,
}

/// The driver's node number.
const HOME: NodeId = 0;

impl Worker {
    fn recv(&self) -> Option<Envelope> {
        match self.wait {
            Wait::Block => self.inbox.recv().ok(),
            Wait::Spin => {
                let mut polls = 0u32;
                loop {
                    match self.inbox.try_recv() {
                        Ok(e) => return Some(e),
                        Err(TryRecvError::Disconnected) => return None,
                        Err(TryRecvError::Empty) => {}
                    }
                    polls = polls.wrapping_add(1);
                    if polls.is_multiple_of(1 << 12) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
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
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            let sent = ticks();
            self.send(to, Envelope::Message { from, msg, sent });
        }
        // Counted when its sends are: the count never touches zero early.
        let quiet = self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1;
        if quiet && from != HOME {
            self.send(HOME, Envelope::Quiet);
        }
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
                let events = std::mem::take(&mut self.events);
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
        self.home.in_flight.fetch_add(1, Ordering::SeqCst);
        let sent = ticks();
        self.home.send(node, Envelope::Request { id, req, sent });
        OpRef { node, id }
    }

    /// Serves node 0's inbox for one envelope.
    fn pump(&mut self) {
        let e = self.home.recv().expect("the driver holds its own sender");
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
            Err(Envelope::Quiet) => {}
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
    pub fn settle(&mut self) {
        while self.home.in_flight.load(Ordering::SeqCst) > 0 {
            self.pump();
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
    pub fn events(&mut self) -> Vec<Event> {
        self.settle();
        for n in 1..self.nodes() {
            self.home.send(n as NodeId, Envelope::Collect);
        }
        while self.events.len() < self.nodes() - 1 {
            self.pump();
        }
        let mut all = std::mem::take(&mut self.home.events);
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
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut workers = nodes.into_iter().zip(inboxes).map(|(node, inbox)| Worker {
        node,
        inbox,
        peers: senders.clone(),
        in_flight: in_flight.clone(),
        events: Vec::new(),
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
