//! `retype caps check`: the cross-core capability protocol model-checked
//! (seed 001 chapter 5), every interleaving of the real node code.
//!
//! - [`model`]: states, actions and properties, for stateright.
//! - `search`, `symmetry`, `live`: the exhaustive search, the symmetry reduction (a state's
//!   class under renaming of operation ids) and the livelock check over the graph it leaves;
//!   `explore` ties the model to the search and the reduction.
//! - this file: the start state (booted through the node code), the run,
//!   and a counterexample as a numbered message sequence.

mod explore;
mod live;
pub mod model;
mod search;
mod symmetry;

use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use retype_core::caps::protocol::{boot as boot_nodes, Node, Request, Sim, Slot};
use retype_core::caps::types::{CapType, PAGE, SLOT_BYTES};
use retype_core::objects::{Arch, Config as Kernel};
use stateright::Model;

pub use model::{Action, CapModel, Config, Regions, State, Symmetry};
pub use search::Progress;
use search::{Explore, Graph, GONE, NO_CHANNEL, TASKS};

/// The property a livelock breaks: with fair delivery every operation
/// completes (checked over the graph of states, see `live`).
pub const NO_LIVELOCK: &str = "NoLivelock";

/// Most classes the breadth-first search for a shortest counterexample
/// goes through before it keeps the depth-first one: its queue holds
/// states, each with the node that stepped (a few kilobytes).
const SHORTEST: usize = 500_000;

/// Root CNode slots of every node: the least a CNode has.
const ROOT_SLOTS: u32 = 256;

/// What a run found.
pub struct Outcome {
    /// States generated, with repeats.
    pub states: usize,
    pub distinct: usize,
    pub depth: usize,
    pub time: Duration,
    /// Each broken property with its counterexample, numbered.
    pub violations: Vec<(&'static str, String)>,
    /// The search for livelock, made when no other property is broken.
    pub livelock_check: Option<LivelockCheck>,
}

/// How big the graph searched for livelock was, and the time it took.
pub struct LivelockCheck {
    /// Pairs of a state (class) and an operation running in it.
    pub tasks: usize,
    /// Steps between them that keep the operation running.
    pub steps: usize,
    pub time: Duration,
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        ensure!((1..=8).contains(&self.nodes), "--nodes must be 1 to 8");
        ensure!((1..=16).contains(&self.mem), "--mem must be 1 to 16 bytes");
        ensure!((1..=64).contains(&self.slots), "--slots must be 1 to 64");
        ensure!((1..=4).contains(&self.ops), "--ops must be 1 to 4");
        if self.regions == Regions::Reduced && self.mem != 3 {
            bail!("--regions reduced is Figure 5.1's set for --mem 3");
        }
        Ok(())
    }
}

/// The start state, made by the node code itself: every node booted with
/// its root CNode; node 0 retypes `mem` pages of RAM into model slot 0
/// (the thesis's Mem capability over all of memory), then deletes the boot
/// RAM and PhysAddr capabilities, so that Mem is the root of what follows.
pub fn start(cfg: &Config) -> Result<Vec<Node>> {
    let cnode = ROOT_SLOTS as u64 * SLOT_BYTES;
    let ram = cfg.mem * PAGE + cfg.nodes as u64 * cnode;
    let nodes = boot_nodes(Kernel::new(Arch::X86_64), ram, ROOT_SLOTS, cfg.nodes)
        .map_err(|e| anyhow::anyhow!("boot: {e}"))?;
    let mut sim = Sim::new(nodes, 0);
    let (n, mem) = model::slot(cfg, 0);
    let ram_slot = Slot::l1(2);
    let reqs = [
        Request::retype(ram_slot, CapType::Ram, 0, cfg.mem * PAGE, 1, mem),
        Request::Delete(ram_slot),
        Request::Delete(Slot::l1(1)),
    ];
    for (id, req) in reqs.into_iter().enumerate() {
        sim.submit(n, id as u64, req);
        ensure!(sim.run(1_000_000), "setup did not finish");
    }
    for (op, r) in &sim.done {
        r.as_ref()
            .map_err(|e| anyhow::anyhow!("setup step {}: {e}", op.id))?;
    }
    Ok(sim.nodes)
}

/// Explores every state reachable from [`start`], up to the first broken
/// property, telling `progress` how far it has come.
pub fn run(cfg: Config, threads: usize, progress: &Progress<'_>) -> Result<Outcome> {
    cfg.validate()?;
    let model = CapModel::new(cfg, start(&cfg).context("start state")?);
    Ok(explore(model, threads, progress))
}

/// Explores every state of `model` reachable from its start, up to the
/// first broken property; if none is, looks for a livelock.
pub fn explore(model: CapModel, threads: usize, progress: &Progress<'_>) -> Outcome {
    let t = Instant::now();
    let found = search::search(&model, threads, progress);
    let mut violations: Vec<_> = found
        .broken
        .into_iter()
        .map(|(name, path)| {
            let breaks = |s: &State| s.broken.as_ref().is_some_and(|b| b.0 == name);
            let path = search::shortest(&model, breaks, SHORTEST).unwrap_or(path);
            (name, counterexample(&model, &path))
        })
        .collect();
    let mut livelock_check = None;
    if let Some(g) = &found.graph {
        let t = Instant::now();
        if let Some(l) = live::find(g) {
            violations.push((NO_LIVELOCK, livelock(&model, g, &l)));
        }
        let tasks = g.running.iter().map(|r| r.count_ones() as usize).sum();
        livelock_check = Some(LivelockCheck {
            tasks,
            steps: g.to.len(),
            time: t.elapsed(),
        });
    }
    Outcome {
        states: found.states,
        distinct: found.distinct,
        depth: found.depth,
        time: t.elapsed(),
        violations,
        livelock_check,
    }
}

/// The path as numbered steps: who acts on what, what it sends, what
/// finishes, which slots change; then the property broken.
pub fn counterexample(m: &CapModel, actions: &[Action]) -> String {
    let (mut out, s, _) = steps(m, actions, None);
    if let Some((name, e)) = &s.broken {
        let _ = writeln!(out, "     broken: {name}: {e}");
    }
    out
}

/// A livelock as numbered steps: the shortest way from the start into
/// the component, then a fair cycle in it, and which operation never
/// finishes.
fn livelock(m: &CapModel, g: &Graph, l: &live::Livelock) -> String {
    let classes: HashMap<u64, u32> = l.classes().map(|c| (g.key[c as usize], c)).collect();
    let into = |s: &State| classes.contains_key(&m.canon(s).key);
    let mut actions = search::shortest(m, into, SHORTEST).unwrap_or_else(|| {
        let c = l.classes().next().expect("not empty");
        along(m, g, &l.path_to(c))
    });
    let mut s = m.init.clone();
    for a in &actions {
        s = m.next_state(&s, a.clone()).expect("a path of the search");
    }
    let cycle = l.cycle(classes[&m.canon(&s).key]);
    let k = actions.len();
    let canon = m.canon(&s);
    let running = m.running(&s);
    let id = (0..TASKS)
        .find(|&i| running & 1 << i != 0 && canon.rank[i] == cycle.name)
        .expect("the task runs");
    let mut name = cycle.name as u32;
    for &i in &cycle.steps {
        let (to, r) = (g.to[i], (g.keep[i] >> (4 * name)) & GONE);
        let (a, t) = successors(m, &s)
            .find(|(a, t)| {
                let c = m.canon(t);
                c.key == g.key[to as usize]
                    && m.running(t) & 1 << id != 0
                    && c.rank[id] as u32 == r
                    && m.channel(a).unwrap_or(NO_CHANNEL) == g.channel[i]
            })
            .expect("each step of the class graph is a step of each state of the class");
        actions.push(a);
        (s, name) = (t, r);
    }
    let (mut out, end, first) = steps(m, &actions, Some(k));
    let back = if k == 0 {
        "the start state".to_string()
    } else {
        format!("the state after step {k}")
    };
    let again = if end == first {
        format!("     back at {back}: the cycle repeats forever")
    } else {
        format!(
            "     back at {back} but for how operations are numbered: repeated, the cycle comes back to it exactly"
        )
    };
    let _ = writeln!(out, "{again}");
    let _ = writeln!(
        out,
        "     broken: {NO_LIVELOCK}: op {id} never finishes, and every channel that stays busy is delivered"
    );
    out
}

/// Actions from the start through the classes `path` (the first is the
/// start's): a state of a class has a successor in each class its class
/// leads to.
fn along(m: &CapModel, g: &Graph, path: &[u32]) -> Vec<Action> {
    let mut s = m.init.clone();
    let mut actions = Vec::new();
    for &c in &path[1..] {
        let (a, t) = successors(m, &s)
            .find(|(_, t)| m.canon(t).key == g.key[c as usize])
            .expect("a step between the classes");
        actions.push(a);
        s = t;
    }
    actions
}

/// Every successor of `s`, with its action.
fn successors<'a>(m: &'a CapModel, s: &'a State) -> impl Iterator<Item = (Action, State)> + 'a {
    let mut actions = Vec::new();
    m.actions(s, &mut actions);
    actions
        .into_iter()
        .filter_map(move |a| m.next_state(s, a.clone()).map(|t| (a, t)))
}

/// The actions as numbered steps from the start; with `cycle`, a line
/// after that many steps says the cycle begins. Returns the text, the last
/// state and the state where the cycle begins (the start without one).
fn steps(m: &CapModel, actions: &[Action], cycle: Option<usize>) -> (String, State, State) {
    let mut out = String::new();
    let mut s = m.init.clone();
    let mut mark = s.clone();
    for (i, a) in actions.iter().enumerate() {
        if cycle == Some(i) {
            let _ = writeln!(out, "     then, the cycle:");
            mark = s.clone();
        }
        let (n, what) = match a {
            Action::Start { id, node, req } => (*node, format!("op {id}: {req:?}")),
            Action::Deliver { from, to } => {
                let k = m.cfg.nodes as usize;
                let msg = &s.chans[*from as usize * k + *to as usize][0];
                (*to, format!("from node {from}: {msg:?}"))
            }
        };
        let before = s.clone();
        let Some(next) = m.next_state(&s, a.clone()) else {
            break;
        };
        let _ = writeln!(out, "{:>3}. node {n} takes {what}", i + 1);
        for line in changes(m, &before, &next, n) {
            let _ = writeln!(out, "       {line}");
        }
        s = next;
    }
    (out, s, mark)
}

/// What one step of node `n` changed.
fn changes(m: &CapModel, before: &State, after: &State, n: u8) -> Vec<String> {
    let k = m.cfg.nodes as usize;
    let mut v = Vec::new();
    for to in 0..k {
        let (b, a) = (
            &before.chans[n as usize * k + to],
            &after.chans[n as usize * k + to],
        );
        for msg in a.iter().skip(b.len()) {
            v.push(format!("sends node {to}: {msg:?}"));
        }
    }
    for (id, (b, a)) in before.ops.iter().zip(&after.ops).enumerate() {
        if matches!(b, model::Op::Running { .. }) && !matches!(a, model::Op::Running { .. }) {
            v.push(format!("op {id} finished"));
        }
    }
    let (b, a) = (&before.nodes[n as usize], &after.nodes[n as usize]);
    for i in 0..m.cfg.slots {
        let (node, slot) = model::slot(&m.cfg, i);
        if node != n {
            continue;
        }
        let (x, y) = (b.slot(slot).ok(), a.slot(slot).ok());
        if x != y {
            let show = |c: Option<(retype_core::caps::cap::Cap, u8, _)>| match c {
                Some((c, owner, state)) => format!(
                    "{} [{}, {}) owner {owner} {state:?}",
                    c.ty,
                    c.base / PAGE,
                    c.end() / PAGE
                ),
                None => "empty".into(),
            };
            v.push(format!("slot {i}: {} -> {}", show(x), show(y)));
        }
    }
    v
}

#[cfg(test)]
mod tests;
