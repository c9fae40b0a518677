//! The latency study of `retype bench protocol` (seed 001 §4.7): every
//! case timed on node 0 for each database size, its median and 90th
//! percentile, and a breakdown of where the time went.
//!
//! An operation's latency runs from the driver handing the request to node
//! 0 to the driver seeing its outcome. Its breakdown, from the events every
//! node records ([`runtime::Event`]) clipped to that interval, has three
//! parts: *local*, the time inside `Node::step` on any node for the
//! operation (the mapping database and the protocol's own state); *messages*,
//! the time its request and messages spent on channels; and *waiting*, the
//! rest (a node busy with the clock, the loop, or the next envelope). Each
//! part is its median over the samples, as the thesis's breakdowns give, so
//! the parts need not add up to the median. Messages to several nodes at
//! once overlap in time, so on more than two nodes the parts can exceed the
//! total.

use anyhow::{anyhow, Context, Result};
use retype_core::caps::protocol::NodeId;
use retype_core::caps::Mdb;
use serde_json::{json, Value};

use super::cases::{self, Case, Goal};
use super::runtime::{self, Driver, Event, Kind, Wait};
use crate::progress::Progress;
use crate::timing::{median, percentile, ticks};

/// What a run measures, and with what.
pub struct Study {
    pub caps: Vec<u32>,
    pub samples: usize,
    pub seed: u64,
    pub nodes: u8,
    pub ticks_per_ns: f64,
    /// The cost of reading the clock twice, taken off every latency.
    pub overhead: u64,
}

/// The three parts of a latency, in cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Breakdown {
    pub local: f64,
    pub messages: f64,
    pub waiting: f64,
}

/// One case at one database size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub op: String,
    pub case: String,
    pub caps: u32,
    pub nodes: u8,
    pub median: f64,
    pub p90: f64,
    pub breakdown: Breakdown,
    /// The median of a round trip between node 0 and node 1, alone.
    pub round_trip: f64,
    /// Messages between nodes per operation (median).
    pub messages: f64,
    /// Round trips in sequence the protocol needs (0: a single-node case).
    pub round_trips: u32,
    /// The goal for the case, when there is one.
    pub goal: Option<f64>,
    pub figure: String,
    pub thesis: String,
    /// Node 0's mapping database before the first sample.
    pub mdb_caps: usize,
    pub samples: usize,
    pub seed: u64,
    pub wait: String,
    pub ticks_per_ns: f64,
}

/// Sums the parts of `events` of kind `kind` that fall inside `[t0, t1]`.
fn within(events: &[&Event], kind: Kind, t0: u64, t1: u64) -> u64 {
    events
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.end.min(t1).saturating_sub(e.start.max(t0)))
        .sum()
}

/// Samples of one case: latencies and their parts, in cycles.
#[derive(Default)]
struct Samples {
    total: Vec<u64>,
    local: Vec<u64>,
    messages: Vec<u64>,
    waiting: Vec<u64>,
    sent: Vec<u64>,
}

impl Study {
    /// Runs every case at every size; `progress` steps once per case.
    pub fn run(&self, progress: &mut Progress) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        for &caps in &self.caps {
            let nodes = cases::boot(self.nodes, caps)?;
            let wait = Wait::for_nodes(nodes.len());
            let (r, _) = runtime::run(nodes, wait, |d| self.size(d, caps, progress));
            rows.extend(r.with_context(|| format!("{caps} capabilities per node"))?);
        }
        Ok(rows)
    }

    /// Every case at one database size.
    fn size(&self, d: &mut Driver, caps: u32, progress: &mut Progress) -> Result<Vec<Row>> {
        cases::populate(d, caps, self.seed)?;
        let mdb_caps = d.home().caps().mdb().len();
        let round_trip = if d.nodes() > 1 {
            let mut v: Vec<u64> = (0..self.samples).map(|_| d.round_trip(1)).collect();
            median(&mut v)
        } else {
            0.0
        };
        let mut rows = Vec::new();
        for case in cases::all() {
            progress.step(&format!("{} {} at {caps}", case.op, case.case));
            if d.nodes() < case.min_nodes {
                continue;
            }
            let mut s = self
                .samples(d, &case)
                .with_context(|| format!("{} {}", case.op, case.case))?;
            let med = |v: &mut Vec<u64>| median(v);
            let breakdown = Breakdown {
                local: med(&mut s.local),
                messages: med(&mut s.messages),
                waiting: med(&mut s.waiting),
            };
            let (goal, round_trips) = match case.goal {
                Goal::Cycles(c) => (Some(c), 0),
                Goal::RoundTrips(f) => {
                    let n = f(d.nodes());
                    (Some(n as f64 * round_trip + breakdown.local), n)
                }
                Goal::None => (None, 0),
            };
            rows.push(Row {
                op: case.op.into(),
                case: case.case.into(),
                caps,
                nodes: self.nodes,
                median: median(&mut s.total),
                p90: percentile(&mut s.total, 90.0) as f64,
                breakdown,
                round_trip,
                messages: median(&mut s.sent),
                round_trips,
                goal,
                figure: case.figure.into(),
                thesis: case.thesis.into(),
                mdb_caps,
                samples: self.samples,
                seed: self.seed,
                wait: d.wait_mode().name().into(),
                ticks_per_ns: self.ticks_per_ns,
            });
        }
        Ok(rows)
    }

    /// Times `case` on node 0, sample after sample.
    fn samples(&self, d: &mut Driver, case: &Case) -> Result<Samples> {
        let mut s = Samples::default();
        for i in 0..self.samples {
            let req = case.prepare(d, i)?;
            let t0 = ticks();
            let op = d.submit(0 as NodeId, req);
            let (outcome, t1) = d.wait(op);
            outcome.map_err(|e| anyhow!("the measured request {req:?} failed: {e}"))?;
            let events = d.events();
            let mine: Vec<&Event> = events.iter().filter(|e| e.op == op).collect();
            let total = (t1 - t0).saturating_sub(self.overhead);
            let local = within(&mine, Kind::Step, t0, t1);
            let messages = within(&mine, Kind::Transit, t0, t1);
            s.total.push(total);
            s.local.push(local);
            s.messages.push(messages);
            s.waiting.push(total.saturating_sub(local + messages));
            // Every transit but the request's own is a message between nodes.
            let transits = mine.iter().filter(|e| e.kind == Kind::Transit).count();
            s.sent.push(transits.saturating_sub(1) as u64);
            case.clean(d)?;
        }
        Ok(s)
    }
}

impl Row {
    pub fn goal_met(&self) -> Option<bool> {
        self.goal.map(|g| self.median <= g)
    }

    pub fn json(&self) -> Value {
        let ns = |c: f64| c / self.ticks_per_ns;
        let b = &self.breakdown;
        json!({
            "op": self.op,
            "case": self.case,
            "caps": self.caps,
            "nodes": self.nodes,
            "median_cycles": self.median,
            "p90_cycles": self.p90,
            "median_ns": ns(self.median),
            "p90_ns": ns(self.p90),
            "breakdown": {"local": b.local, "messages": b.messages, "waiting": b.waiting},
            "breakdown_ns": {"local": ns(b.local), "messages": ns(b.messages), "waiting": ns(b.waiting)},
            "round_trip_cycles": self.round_trip,
            "round_trip_ns": ns(self.round_trip),
            "messages": self.messages,
            "round_trips": self.round_trips,
            "goal_cycles": self.goal,
            "goal_met": self.goal_met(),
            "thesis_figure": self.figure,
            "thesis_cycles": self.thesis,
            "mdb_caps": self.mdb_caps,
            "samples": self.samples,
            "seed": self.seed,
            "wait": self.wait,
            "ticks_per_ns": self.ticks_per_ns,
        })
    }

    /// Reads back a line of `--json`.
    pub fn from_json(v: &Value) -> Result<Row> {
        let num = |k: &str| v[k].as_f64().ok_or_else(|| anyhow!("no number \"{k}\""));
        let text = |k: &str| {
            v[k].as_str()
                .map(String::from)
                .ok_or_else(|| anyhow!("no text \"{k}\""))
        };
        let part = |k: &str| {
            v["breakdown"][k]
                .as_f64()
                .ok_or_else(|| anyhow!("no number \"breakdown\".\"{k}\""))
        };
        Ok(Row {
            op: text("op")?,
            case: text("case")?,
            caps: num("caps")? as u32,
            nodes: num("nodes")? as u8,
            median: num("median_cycles")?,
            p90: num("p90_cycles")?,
            breakdown: Breakdown {
                local: part("local")?,
                messages: part("messages")?,
                waiting: part("waiting")?,
            },
            round_trip: num("round_trip_cycles")?,
            messages: num("messages")?,
            round_trips: num("round_trips")? as u32,
            goal: v["goal_cycles"].as_f64(),
            figure: text("thesis_figure")?,
            thesis: text("thesis_cycles")?,
            mdb_caps: num("mdb_caps")? as usize,
            samples: num("samples")? as usize,
            seed: num("seed")? as u64,
            wait: text("wait")?,
            ticks_per_ns: num("ticks_per_ns")?,
        })
    }
}
