//! The cases of seed 001 §4.7, set up as the thesis does as far as our
//! model allows: each node's mapping database filled with synthetic
//! capabilities by real retypes, then per case what must hold before each
//! measured request (made untimed), the request that node 0 is timed on,
//! and what puts the databases back to their size after it.
//!
//! Our model's differences, each a consequence of the simplifications in
//! `retype_core::caps::protocol`: a deleted last copy's memory stays
//! covered by the benchmark's RAM capability (the thesis's came from the
//! memory server, and its deletion made a RAM capability for it), and a
//! revoke of memory that never left its node is a local operation (the
//! thesis's always ran the two-phase commit on every core).

use anyhow::{bail, Result};
use retype_core::caps::protocol::{boot as boot_nodes, Node, NodeId, Request, Slot};
use retype_core::caps::CapType;
use retype_core::objects::{Arch, Config};
use retype_core::rng::SplitMix64;

use super::runtime::Driver;

const K4: u64 = 4096;
const M1: u64 = 1 << 20;
/// The machine of the thesis's evaluation was an x86_64.
const CONFIG: Config = Config::new(Arch::X86_64);

/// The first root slot of the synthetic capabilities; the cases use the
/// slots below it.
const SYNTHETIC: u32 = 1024;
/// Where node 0's RAM capabilities lie in its boot RAM.
const LOCAL_AT: u64 = 0;
const SHARED_AT: u64 = 64 * M1;
const SYNTHETIC_AT: u64 = 128 * M1;

// Node 0's slots.
const LOCAL: u32 = 3;
const SHARED: u32 = 4;
const RETYPE_2M: u32 = 5;
const RETYPE_4M: u32 = 6;
const RETYPE_4M_HALF: u32 = 7;
const RETYPE_SHARED: u32 = 8;
/// Memory node 0 makes for another node.
const HANDOFF: u32 = 9;
const COPY_SRC: u32 = 10;
const FOREIGN: u32 = 12;
const TARGET: u32 = 20;
const CNODE: u32 = 21;
/// Copies for the revokes: this slot and the ten after it.
const COPIES: u32 = 30;

// Every other node's slots.
const SHARED_COPY: u32 = 3;
const RETYPE_SHARED_COPY: u32 = 4;
const RETYPE_SHARED_CHILD: u32 = 5;
const OWNED: u32 = 6;
/// Node 1's capability that node 0 holds a foreign copy of.
const FOREIGN_SRC: u32 = 7;
/// Node 1's capability that node 0 revokes a foreign copy of.
const REVOKED_SRC: u32 = 8;
const RECEIVED: u32 = 20;

/// Memory per node for its synthetic capabilities: 256 per MiB.
fn synthetic_bytes(caps: u32) -> u64 {
    (caps as u64).div_ceil(256) * M1
}

/// Boots `nodes` nodes with root CNodes big enough for `caps` synthetic
/// capabilities and the cases' slots.
pub fn boot(nodes: u8, caps: u32) -> Result<Vec<Node>> {
    let slots = (SYNTHETIC + caps).next_multiple_of(256);
    let ram = SYNTHETIC_AT
        + nodes as u64 * synthetic_bytes(caps)
        + (nodes as u64 + 2) * slots as u64 * 64;
    boot_nodes(CONFIG, ram.next_multiple_of(M1), slots, nodes)
        .map_err(|e| anyhow::anyhow!("cannot boot {nodes} nodes: {e}"))
}

/// Runs a request that the setup needs; it must succeed.
fn must(d: &mut Driver, node: NodeId, req: Request) -> Result<()> {
    match d.run(node, req) {
        Ok(_) => Ok(()),
        Err(e) => bail!("setup request {req:?} on node {node} failed: {e}"),
    }
}

fn retype(src: u32, ty: CapType, offset: u64, objsize: u64, count: u64, dest: Slot) -> Request {
    Request::retype(Slot::l1(src), ty, offset, objsize, count, dest)
}

fn ram(src: u32, offset: u64, size: u64, dest: u32) -> Request {
    retype(src, CapType::Ram, offset, size, 1, Slot::l1(dest))
}

fn copy(src: u32, node: NodeId, dest: u32) -> Request {
    Request::Copy {
        src: Slot::l1(src),
        node,
        dest: Slot::l1(dest),
    }
}

fn others(d: &Driver) -> std::ops::Range<NodeId> {
    1..d.nodes() as NodeId
}

/// Fills every node's mapping database with `caps` synthetic capabilities,
/// in batches of up to 256 objects of one kind each (4 KiB frames or RAM,
/// endpoints, notifications: the seed picks), every node from memory of its
/// own; then makes what the cases share.
pub fn populate(d: &mut Driver, caps: u32, seed: u64) -> Result<()> {
    let mut rng = SplitMix64::new(seed);
    const BOOT_RAM: u32 = 2;
    must(d, 0, ram(BOOT_RAM, LOCAL_AT, 64 * M1, LOCAL))?;
    must(d, 0, ram(BOOT_RAM, SHARED_AT, 64 * M1, SHARED))?;
    let bytes = synthetic_bytes(caps);
    for node in 0..d.nodes() as NodeId {
        // Node 0 makes the memory; another node gets it and owns it.
        let at = SYNTHETIC_AT + node as u64 * bytes;
        let dest = if node == 0 { SYNTHETIC - 1 } else { OWNED };
        if node == 0 {
            must(d, 0, ram(BOOT_RAM, at, bytes, dest))?;
        } else {
            must(d, 0, ram(BOOT_RAM, at, bytes, HANDOFF))?;
            must(d, 0, copy(HANDOFF, node, dest))?;
            must(d, 0, Request::Delete(Slot::l1(HANDOFF)))?;
        }
        let mut made = 0;
        while made < caps {
            let count = (caps - made).min(256) as u64;
            let (ty, size) = match rng.below(4) {
                0 => (CapType::Frame, K4),
                1 => (CapType::Ram, K4),
                2 => (CapType::Endpoint, 16),
                _ => (CapType::Notification, 32),
            };
            let offset = made as u64 / 256 * M1;
            let into = Slot::l1(SYNTHETIC + made);
            must(d, node, retype(dest, ty, offset, size, count, into))?;
            made += count as u32;
        }
    }
    // Retype's sources: 2 MiB; 4 MiB with its second half retyped; 4 MiB
    // on every node, each other node holding a page of it.
    must(d, 0, ram(LOCAL, 8 * M1, 2 * M1, RETYPE_2M))?;
    must(d, 0, ram(LOCAL, 12 * M1, 4 * M1, RETYPE_4M))?;
    must(d, 0, ram(RETYPE_4M, 2 * M1, 2 * M1, RETYPE_4M_HALF))?;
    must(d, 0, ram(SHARED, 8 * M1, 4 * M1, RETYPE_SHARED))?;
    for k in others(d) {
        must(d, 0, copy(RETYPE_SHARED, k, RETYPE_SHARED_COPY))?;
        let page = ram(
            RETYPE_SHARED_COPY,
            2 * M1 + k as u64 * K4,
            K4,
            RETYPE_SHARED_CHILD,
        );
        must(d, k, page)?;
    }
    // A RAM capability to copy; another node's view of node 0's shared RAM,
    // to make capabilities that node owns; one of them copied to node 0.
    must(d, 0, ram(LOCAL, 0, K4, COPY_SRC))?;
    if d.nodes() > 1 {
        must(d, 0, copy(SHARED, 1, SHARED_COPY))?;
        must(d, 1, ram(SHARED_COPY, 0, K4, FOREIGN_SRC))?;
        must(d, 1, copy(FOREIGN_SRC, 0, FOREIGN))?;
    }
    Ok(())
}

/// What the goal of a case is measured against.
#[derive(Clone, Copy, Debug)]
pub enum Goal {
    /// A single-node case: at most a fifth of the thesis's cycles.
    Cycles(f64),
    /// A cross-node case: this many round trips in sequence, on `n` nodes,
    /// plus its local work.
    RoundTrips(fn(usize) -> u32),
    /// The thesis gives no figure to hold it to.
    None,
}

/// One measured case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub op: &'static str,
    pub case: &'static str,
    /// The thesis's figure and its value for 4096 capabilities (or the
    /// range over database sizes) in cycles.
    pub figure: &'static str,
    pub thesis: &'static str,
    pub goal: Goal,
    /// Nodes the setup needs.
    pub min_nodes: usize,
    setup: Setup,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    Noop,
    DeleteLocalCopy,
    DeleteForeign,
    DeleteLastCopy,
    DeleteWithForeignCopies,
    DeleteCNode(u32),
    RevokeLocal,
    RevokeForeignCopy,
    RevokeForeignRelations,
    Retype(u32),
}

/// Occupied slots of the CNode sweep (Figure 4.19).
pub const CNODE_SLOTS: [(u32, &str); 9] = [
    (1, "occupied-1"),
    (2, "occupied-2"),
    (4, "occupied-4"),
    (8, "occupied-8"),
    (16, "occupied-16"),
    (32, "occupied-32"),
    (64, "occupied-64"),
    (128, "occupied-128"),
    (256, "occupied-256"),
];

/// Every case, in the thesis's order.
pub fn all() -> Vec<Case> {
    let one = |op, case, figure, thesis, goal, setup: Setup| Case {
        op,
        case,
        figure,
        thesis,
        goal,
        min_nodes: 1,
        setup,
    };
    let cross = |op, case, figure, thesis, rounds: fn(usize) -> u32, setup| Case {
        min_nodes: 2,
        ..one(op, case, figure, thesis, Goal::RoundTrips(rounds), setup)
    };
    let mut all = vec![
        one(
            "noop",
            "noop",
            "4.8",
            "< 250",
            Goal::Cycles(50.0),
            Setup::Noop,
        ),
        one(
            "delete",
            "local-copies",
            "4.9",
            "4,092",
            Goal::Cycles(800.0),
            Setup::DeleteLocalCopy,
        ),
        // A copy owned by node 1: a single-node delete, set up by two.
        Case {
            min_nodes: 2,
            ..one(
                "delete",
                "foreign",
                "4.11",
                "6,000–10,000",
                Goal::Cycles(1_200.0),
                Setup::DeleteForeign,
            )
        },
        one(
            "delete",
            "last-copy",
            "4.15",
            "10,168",
            Goal::Cycles(2_000.0),
            Setup::DeleteLastCopy,
        ),
        // Ask for copies, move ownership; with more than two nodes the
        // others learn the new owner.
        cross(
            "delete",
            "foreign-copies",
            "4.13",
            "257 k",
            |n| 2 + (n > 2) as u32,
            Setup::DeleteWithForeignCopies,
        ),
    ];
    for (slots, case) in CNODE_SLOTS {
        let (thesis, goal) = match slots {
            4 => ("80 k (65–140 k)", Goal::Cycles(16_000.0)),
            256 => ("1.7 M", Goal::Cycles(340_000.0)),
            1 | 2 => ("≈ 50 k", Goal::Cycles(10_000.0)),
            _ => ("", Goal::None),
        };
        let figure = if slots == 4 { "4.17–4.19" } else { "4.19" };
        all.push(one(
            "delete-cnode",
            case,
            figure,
            thesis,
            goal,
            Setup::DeleteCNode(slots),
        ));
    }
    all.extend([
        one(
            "revoke",
            "no-foreign",
            "4.20",
            "300–350 k",
            Goal::Cycles(60_000.0),
            Setup::RevokeLocal,
        ),
        // Take ownership (and tell the others), mark, commit.
        cross(
            "revoke",
            "foreign-copy",
            "4.22",
            "538 k",
            |n| 3 + (n > 2) as u32,
            Setup::RevokeForeignCopy,
        ),
        cross(
            "revoke",
            "foreign-relations",
            "4.24",
            "300–350 k",
            |_| 2,
            Setup::RevokeForeignRelations,
        ),
        one(
            "retype",
            "no-foreign",
            "4.26",
            "4,000–5,000",
            Goal::Cycles(1_000.0),
            Setup::Retype(RETYPE_2M),
        ),
        one(
            "retype",
            "local-descendants",
            "4.28",
            "4,500–8,000",
            Goal::Cycles(1_500.0),
            Setup::Retype(RETYPE_4M),
        ),
        cross(
            "retype",
            "remote-descendants",
            "4.30",
            "213 k",
            |_| 1,
            Setup::Retype(RETYPE_SHARED),
        ),
    ]);
    all
}

impl Case {
    /// Makes what sample `i` needs; returns the request to time on node 0.
    pub fn prepare(&self, d: &mut Driver, i: usize) -> Result<Request> {
        Ok(match self.setup {
            Setup::Noop => Request::Noop,
            Setup::DeleteLocalCopy => {
                must(d, 0, copy(COPY_SRC, 0, TARGET))?;
                Request::Delete(Slot::l1(TARGET))
            }
            Setup::DeleteForeign => {
                must(d, 0, copy(FOREIGN, 0, TARGET))?;
                Request::Delete(Slot::l1(TARGET))
            }
            Setup::DeleteLastCopy => {
                must(d, 0, ram(LOCAL, M1, K4, TARGET))?;
                Request::Delete(Slot::l1(TARGET))
            }
            Setup::DeleteWithForeignCopies => {
                must(d, 0, ram(SHARED, M1, K4, TARGET))?;
                for k in others(d) {
                    must(d, 0, copy(TARGET, k, RECEIVED))?;
                }
                Request::Delete(Slot::l1(TARGET))
            }
            Setup::DeleteCNode(slots) => {
                let cnode = retype(
                    LOCAL,
                    CapType::L2CNode,
                    2 * M1,
                    16 << 10,
                    1,
                    Slot::l1(CNODE),
                );
                must(d, 0, cnode)?;
                let fill = retype(
                    LOCAL,
                    CapType::Ram,
                    3 * M1,
                    K4,
                    slots as u64,
                    Slot::l2(CNODE, 0),
                );
                must(d, 0, fill)?;
                Request::Delete(Slot::l1(CNODE))
            }
            Setup::RevokeLocal => {
                must(d, 0, ram(LOCAL, 4 * M1, K4, TARGET))?;
                self.ten_copies(d, 0, TARGET)?;
                Request::Revoke(Slot::l1(TARGET))
            }
            Setup::RevokeForeignCopy => {
                // Node 1 makes it, node 0 gets a copy and makes ten more.
                must(d, 1, ram(SHARED_COPY, 2 * M1, K4, REVOKED_SRC))?;
                must(d, 1, copy(REVOKED_SRC, 0, TARGET))?;
                self.ten_copies(d, 0, TARGET)?;
                Request::Revoke(Slot::l1(TARGET))
            }
            Setup::RevokeForeignRelations => {
                must(d, 0, ram(SHARED, 3 * M1, K4, TARGET))?;
                for k in others(d) {
                    must(d, 0, copy(TARGET, k, RECEIVED))?;
                    self.ten_copies(d, k, RECEIVED)?;
                }
                Request::Revoke(Slot::l1(TARGET))
            }
            // Equation 4.1: a 4 KiB frame at (i × 4 KiB) mod 2 MiB.
            Setup::Retype(src) => retype(
                src,
                CapType::Frame,
                (i as u64 * K4) % (2 * M1),
                K4,
                1,
                Slot::l1(TARGET),
            ),
        })
    }

    fn ten_copies(&self, d: &mut Driver, node: NodeId, src: u32) -> Result<()> {
        (1..=10).try_for_each(|c| must(d, node, copy(src, node, COPIES + c)))
    }

    /// Deletes what the measured request left, so that every sample finds
    /// the databases as the first did.
    pub fn clean(&self, d: &mut Driver) -> Result<()> {
        match self.setup {
            Setup::Noop | Setup::DeleteLocalCopy | Setup::DeleteForeign | Setup::DeleteLastCopy => {
                Ok(())
            }
            Setup::DeleteCNode(_) => Ok(()),
            Setup::DeleteWithForeignCopies => {
                others(d).try_for_each(|k| must(d, k, Request::Delete(Slot::l1(RECEIVED))))
            }
            Setup::RevokeLocal
            | Setup::RevokeForeignCopy
            | Setup::RevokeForeignRelations
            | Setup::Retype(_) => must(d, 0, Request::Delete(Slot::l1(TARGET))),
        }
    }
}

#[cfg(test)]
mod tests;
