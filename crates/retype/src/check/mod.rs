//! `retype caps check`: the cross-core capability protocol model-checked
//! (seed 001 chapter 5), every interleaving of the real node code.
//!
//! - [`model`]: states, actions and properties, for stateright.
//! - this file: the start state (booted through the node code), the run,
//!   and a counterexample as a numbered message sequence.

pub mod model;
mod search;

use std::fmt::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use retype_core::caps::distributed::{self, Node, Request, Sim, Slot};
use retype_core::caps::types::{CapType, PAGE, SLOT_BYTES};
use retype_core::objects::{Arch, Config as Kernel};
use stateright::Model;

pub use model::{Action, CapModel, Config, Regions, State};
pub use search::Progress;

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
    let nodes = distributed::boot(Kernel::new(Arch::X86_64), ram, ROOT_SLOTS, cfg.nodes)
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
/// first broken property.
pub fn explore(model: CapModel, threads: usize, progress: &Progress<'_>) -> Outcome {
    let t = Instant::now();
    let key = search::fingerprint::<State>;
    let found = search::search(&model, threads, &key, progress);
    let time = t.elapsed();
    let violations = found
        .broken
        .into_iter()
        .map(|(name, path)| (name, counterexample(&model, path)))
        .collect();
    Outcome {
        states: found.states,
        distinct: found.distinct,
        depth: found.depth,
        time,
        violations,
    }
}

/// The path as numbered steps: who acts on what, what it sends, what
/// finishes, which slots change; then the property broken.
pub fn counterexample(m: &CapModel, actions: Vec<Action>) -> String {
    let mut out = String::new();
    let mut s = m.init.clone();
    for (i, a) in actions.into_iter().enumerate() {
        let (n, what) = match &a {
            Action::Start { id, node, req } => (*node, format!("op {id}: {req:?}")),
            Action::Deliver { from, to } => {
                let k = m.cfg.nodes as usize;
                let msg = &s.chans[*from as usize * k + *to as usize][0];
                (*to, format!("from node {from}: {msg:?}"))
            }
        };
        let before = s.clone();
        let Some(next) = m.next_state(&s, a) else {
            break;
        };
        let _ = writeln!(out, "{:>3}. node {n} takes {what}", i + 1);
        for line in changes(m, &before, &next, n) {
            let _ = writeln!(out, "       {line}");
        }
        s = next;
    }
    if let Some((name, e)) = &s.broken {
        let _ = writeln!(out, "     broken: {name}: {e}");
    }
    out
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
