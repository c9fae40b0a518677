//! The protocol checked against the single-core system.
//!
//! The reference is one [`Caps`] holding every node's CSpace: node `k`'s
//! CSpace is the root CNode that `boot` gives it. Random rounds of 1 to 4
//! concurrent requests run under the simulator with a seeded scheduler;
//! after each round every request must have finished, the invariants 4.1–4.3
//! must hold, and some serial order of the round's requests on the reference
//! must give the same results and the same capabilities in every slot of
//! every node (every order is tried). A request refused as retryable, or
//! for a protocol reason, must have changed nothing: it is left out.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::*;
use crate::caps::cap::Cap;
use crate::caps::cspace::{CSpace, CapRef, Level};
use crate::caps::error::CapError;
use crate::caps::mdb::AaTree;
use crate::caps::system::Caps;
use crate::caps::types::CapType::{self, *};
use crate::objects::{Arch, Config};
use crate::rng::SplitMix64;

const X64: Config = Config::new(Arch::X86_64);
const RAM: u64 = 1 << 20;
const ROOT_SLOTS: u32 = 256;
const K4: u64 = 4096;
const K16: u64 = 16 << 10;

type Reference = (Caps<AaTree>, Vec<CSpace>);

/// The single-core system with the nodes' CSpaces laid out as `boot` does.
fn reference(nodes: u8) -> Reference {
    let (mut c, b) = Caps::<AaTree>::boot(X64, RAM, ROOT_SLOTS).unwrap();
    let cnode = ROOT_SLOTS as u64 * 64;
    let mut spaces = Vec::from([b.cspace]);
    let tmp = CapRef::l1(b.cspace, 3);
    for k in 1..nodes {
        let base = node::root_base(RAM, cnode, k);
        c.retype(b.ram, L1CNode, base, cnode, 1, tmp).unwrap();
        let cs = c.cspace_of(tmp).unwrap();
        c.copy(tmp, CapRef::l1(cs, 0)).unwrap();
        c.delete(tmp).unwrap();
        spaces.push(cs);
    }
    (c, spaces)
}

fn at(spaces: &[CSpace], node: NodeId, s: Slot) -> CapRef {
    CapRef {
        cspace: spaces[node as usize],
        addr: s.addr,
        level: s.level,
    }
}

/// `req`, asked of `node`, on the reference.
fn apply(r: &mut Reference, node: NodeId, req: Request) -> Result<Vec<(u64, u64)>, CapError> {
    let (c, sp) = r;
    let res = match req {
        Request::Noop => Ok(()),
        Request::Copy {
            src,
            node: to,
            dest,
        } => c.copy(at(sp, node, src), at(sp, to, dest)),
        Request::Delete(s) => c.delete(at(sp, node, s)),
        Request::Revoke(s) => c.revoke(at(sp, node, s)),
        Request::Retype {
            src,
            ty,
            offset,
            objsize,
            count,
            dest,
        } => c.retype(
            at(sp, node, src),
            ty,
            offset,
            objsize,
            count,
            at(sp, node, dest),
        ),
    };
    let mut got = c.take_reclaimed();
    got.sort();
    res.map(|()| got)
}

/// Every capability of every CSpace, by (node, address, level).
type View = Vec<(NodeId, u32, bool, Cap)>;

fn view_ref(r: &Reference) -> View {
    let mut v = Vec::new();
    for (k, &cs) in r.1.iter().enumerate() {
        for (cr, c) in r.0.cspace_caps(cs).unwrap_or_default() {
            v.push((k as NodeId, cr.addr, cr.level == Level::L1, c));
        }
    }
    v
}

fn view(nodes: &[Node]) -> View {
    let mut v = Vec::new();
    for n in nodes {
        for (cr, c) in n.caps().cspace_caps(n.cspace()).unwrap_or_default() {
            v.push((n.id(), cr.addr, cr.level == Level::L1, c));
        }
    }
    v
}

/// Invariants 4.1–4.3, no slot or key left held, and every live slot with
/// its protocol state.
fn check_invariants(nodes: &[Node]) -> Result<(), String> {
    let mut owners: BTreeMap<_, NodeId> = BTreeMap::new();
    for n in nodes {
        if !n.is_idle() {
            return Err(format!("node {} is not idle", n.id()));
        }
        if n.meta.values().count() != n.caps.live().count() {
            return Err(format!("node {}: protocol state of dead slots", n.id()));
        }
        for (_, c, owner, _) in n.live() {
            if owner as usize >= nodes.len() {
                return Err(format!("4.1: {c:?} on node {} has no owner", n.id()));
            }
            if let Some(o) = owners.insert(c.key(), owner) {
                if o != owner {
                    return Err(format!("4.2: copies of {c:?} owned by {o} and {owner}"));
                }
            }
        }
    }
    for (key, owner) in owners {
        let holds = nodes[owner as usize]
            .live()
            .any(|(_, c, o, _)| c.key() == key && o == owner);
        if !holds {
            return Err(format!("4.3: owner {owner} holds no copy of {key:?}"));
        }
    }
    Ok(())
}

/// What every node is doing, for failure messages.
fn dump(nodes: &[Node]) -> String {
    let mut s = String::new();
    for n in nodes {
        s += &format!(
            "node {}: ops {:?}\n  jobs {:?}\n  parked {:?}\n  keys {:?}\n",
            n.id(),
            n.ops,
            n.jobs,
            n.parked,
            n.key_locks
        );
        for (id, c, o, st) in n.live() {
            s += &format!(
                "  {id}: {:?} {:#x}+{:#x} owner {o} {st:?}\n",
                c.ty, c.base, c.size
            );
        }
    }
    s
}

/// Two live capabilities anywhere overlap only if one lies inside the other.
fn check_no_overlap(nodes: &[Node]) -> Result<(), String> {
    let mut all: Vec<Cap> = nodes
        .iter()
        .flat_map(|n| n.live().map(|(_, c, _, _)| c))
        .filter(|c| !c.ty.is_mapping())
        .collect();
    all.sort_by_key(|c| (c.base, core::cmp::Reverse(c.size)));
    let mut stack: Vec<Cap> = Vec::new();
    for c in all {
        while stack.last().is_some_and(|t| t.end() <= c.base) {
            stack.pop();
        }
        if let Some(t) = stack.last() {
            if c.end() > t.end() {
                return Err(format!("{c:?} straddles {t:?}"));
            }
        }
        stack.push(c);
    }
    Ok(())
}

/// Finds a serial order of `ops` on `r` that explains `results` and the
/// final `seen` view; on success `r` becomes the state after it.
fn serialize(
    r: &mut Reference,
    ops: &[(NodeId, Request)],
    results: &[Outcome],
    seen: &View,
) -> Result<(), String> {
    let counted: Vec<usize> = (0..ops.len())
        .filter(|&i| matches!(results[i], Ok(_) | Err(Error::Cap(_))))
        .collect();
    let mut order = counted.clone();
    let mut tried = 0;
    loop {
        tried += 1;
        let mut trial = r.clone();
        let mut ok = true;
        for &i in &order {
            let (n, req) = ops[i];
            let want = results[i].clone();
            let got = apply(&mut trial, n, req);
            let same = match (&got, &want) {
                (Ok(_), Ok(_)) => true,
                (Err(a), Err(Error::Cap(b))) => a == b,
                _ => false,
            };
            if !same {
                ok = false;
                break;
            }
        }
        if ok && view_ref(&trial) == *seen {
            *r = trial;
            return Ok(());
        }
        if !next_permutation(&mut order) {
            return Err(format!(
                "no serial order of {} requests explains the run ({tried} tried)",
                counted.len()
            ));
        }
    }
}

fn next_permutation(v: &mut [usize]) -> bool {
    let Some(i) = (1..v.len()).rev().find(|&i| v[i - 1] < v[i]) else {
        return false;
    };
    let j = (i..v.len())
        .rev()
        .find(|&j| v[j] > v[i - 1])
        .expect("exists");
    v.swap(i - 1, j);
    v[i..].reverse();
    true
}

/// A random request of node `n`, mostly on slots that hold something.
fn random_request(rng: &mut SplitMix64, nodes: &[Node], n: NodeId) -> Request {
    let node = &nodes[n as usize];
    let held: Vec<(Slot, Cap)> = node
        .caps()
        .cspace_caps(node.cspace())
        .unwrap_or_default()
        .into_iter()
        .map(|(r, c)| {
            (
                Slot {
                    addr: r.addr,
                    level: r.level,
                },
                c,
            )
        })
        .collect();
    let l2s: Vec<u32> = held
        .iter()
        .filter(|(s, c)| c.ty == L2CNode && s.level == Level::L1)
        .map(|(s, _)| s.addr >> 8)
        .collect();
    let any_slot = |rng: &mut SplitMix64| -> Slot {
        if !l2s.is_empty() && rng.below(4) == 0 {
            Slot::l2(
                l2s[rng.below(l2s.len() as u64) as usize],
                rng.below(8) as u8,
            )
        } else {
            Slot::l1(1 + rng.below(15) as u32)
        }
    };
    // The nodes' root CNodes sit at the top of RAM: a revoke of memory
    // around them, or a delete of a root, ends the nodes' CSpaces. Left
    // out: a request that races such a revoke may find its slot already
    // empty rather than its CSpace gone (see the module's docs).
    let roots = RAM - (nodes.len() as u64 + 1) * K16;
    let kind = rng.below(10);
    let pick = |rng: &mut SplitMix64| -> Option<(Slot, Cap)> {
        let cands: Vec<&(Slot, Cap)> = held
            .iter()
            .filter(|(s, c)| {
                let fatal = s.addr == 0 || (kind == 6 && c.end() > roots);
                let boot = n == 0 && s.addr <= 2 << 8 && (4..=6).contains(&kind);
                !fatal && (!boot || rng.below(64) == 0)
            })
            .collect();
        (!cands.is_empty()).then(|| *cands[rng.below(cands.len() as u64) as usize])
    };
    let Some((src, cap)) = pick(rng) else {
        return Request::Noop;
    };
    match kind {
        0 => Request::Noop,
        1..=3 => Request::Copy {
            src,
            node: rng.below(nodes.len() as u64) as NodeId,
            dest: any_slot(rng),
        },
        4 | 5 => Request::Delete(src),
        6 => Request::Revoke(src),
        _ => {
            let (ty, objsize) = match rng.below(6) {
                0 | 1 => (Ram, K4 << rng.below(5)),
                2 | 3 => (Frame, K4 << rng.below(3)),
                4 => (L2CNode, K16),
                _ => (
                    Endpoint,
                    X64.object_bits(crate::objects::ObjectType::Endpoint, 0)
                        .map(|b| 1 << b)
                        .unwrap_or(16),
                ),
            };
            let slots = (cap.size / objsize).max(1);
            let offset = if rng.below(3) == 0 {
                0
            } else {
                rng.below(slots.min(64)) * objsize
            };
            Request::Retype {
                src,
                ty,
                offset,
                objsize,
                count: 1 + rng.below(2),
                dest: any_slot(rng),
            }
        }
    }
}

/// Requests and successes by kind, over a run.
#[derive(Default)]
struct Tally {
    asked: BTreeMap<&'static str, usize>,
    done: BTreeMap<&'static str, usize>,
}

fn kind(r: &Request) -> &'static str {
    match r {
        Request::Noop => "noop",
        Request::Copy { .. } => "copy",
        Request::Delete(_) => "delete",
        Request::Revoke(_) => "revoke",
        Request::Retype { .. } => "retype",
    }
}

/// Runs `rounds` random rounds on `nodes` nodes from `seed`.
fn random_run(seed: u64, n: u8, rounds: usize, tally: &mut Tally) {
    let mut rng = SplitMix64::new(seed);
    let nodes = boot(X64, RAM, ROOT_SLOTS, n).unwrap();
    let mut reference = reference(n);
    assert_eq!(view(&nodes), view_ref(&reference), "boot layouts differ");
    let mut sim = Sim::new(nodes, seed ^ 0x5eed);
    let mut next_id = 0;
    for round in 0..rounds {
        let k = 1 + rng.below(4) as usize;
        let mut ops = Vec::new();
        for _ in 0..k {
            let node = rng.below(n as u64) as NodeId;
            let req = random_request(&mut rng, &sim.nodes, node);
            next_id += 1;
            sim.submit(node, next_id, req);
            ops.push((node, req, next_id));
        }
        let before_dump = dump(&sim.nodes);
        let quiet = sim.run(1_000_000);
        let ctx = || format!("seed {seed}, {n} nodes, round {round}: {ops:?}");
        assert!(quiet, "{}: the run did not finish", ctx());
        let results: Vec<Outcome> = ops
            .iter()
            .map(|&(node, _, id)| {
                sim.done.remove(&OpRef { node, id }).unwrap_or_else(|| {
                    panic!(
                        "{}: request {id} never finished\n{}",
                        ctx(),
                        dump(&sim.nodes)
                    )
                })
            })
            .collect();
        check_invariants(&sim.nodes).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\nbefore:\n{}\nafter:\n{}",
                ctx(),
                before_dump,
                dump(&sim.nodes)
            )
        });
        check_no_overlap(&sim.nodes).unwrap_or_else(|e| panic!("{}: {e}", ctx()));
        let plain: Vec<(NodeId, Request)> = ops.iter().map(|&(n, r, _)| (n, r)).collect();
        for (&(_, r), res) in plain.iter().zip(&results) {
            *tally.asked.entry(kind(&r)).or_default() += 1;
            *tally.done.entry(kind(&r)).or_default() += res.is_ok() as usize;
        }
        let before = reference.clone();
        serialize(&mut reference, &plain, &results, &view(&sim.nodes))
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}\nresults {results:?}\nbefore:\n{before_dump}\nafter:\n{}\nreference before: {:?}",
                    ctx(),
                    dump(&sim.nodes),
                    view_ref(&before)
                )
            });
        // A delete alone reclaims exactly what one core would; a revoke's
        // deletes run on all nodes at once, in another order.
        if k == 1 && matches!(plain[0].1, Request::Delete(_)) {
            if let Ok(done) = &results[0] {
                let mut again = before;
                let mut mine = done.reclaimed.clone();
                mine.sort();
                let want = apply(&mut again, plain[0].0, plain[0].1).unwrap();
                assert_eq!(mine, want, "{}: reclaimed memory", ctx());
            }
        }
    }
}

/// At least 10^5 requests per run, on 2, 3 and 4 nodes; every kind of
/// request must succeed often, or the test proves little. A longer search:
/// `RETYPE_PROTOCOL_SEEDS=5000 cargo test --release -p retype-core random_concurrent`.
#[test]
fn random_concurrent_rounds_match_a_serial_order() {
    let seeds = std::env::var("RETYPE_PROTOCOL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250u64);
    let mut tally = Tally::default();
    for seed in 0..seeds {
        random_run(seed, 2 + (seed % 3) as u8, 200, &mut tally);
    }
    std::println!("asked {:?}\nsucceeded {:?}", tally.asked, tally.done);
    let asked: usize = tally.asked.values().sum();
    assert!(asked >= 100_000, "{asked} requests");
    for (k, &n) in &tally.asked {
        let ok = tally.done.get(k).copied().unwrap_or(0);
        assert!(ok * 10 >= n, "{k}: {ok} of {n} succeeded");
    }
}

// ----- the cases of §4.7, one at a time -----

fn sim(n: u8) -> Sim {
    Sim::new(boot(X64, RAM, ROOT_SLOTS, n).unwrap(), 7)
}

/// Runs one request of `node` to the end; returns its outcome.
fn run(s: &mut Sim, node: NodeId, req: Request) -> Outcome {
    static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    s.submit(node, id, req);
    assert!(s.run(100_000), "did not finish");
    s.done.remove(&OpRef { node, id }).expect("finished")
}

fn retype(src: Slot, ty: CapType, offset: u64, objsize: u64, dest: Slot) -> Request {
    Request::retype(src, ty, offset, objsize, 1, dest)
}

fn copy(src: Slot, node: NodeId, dest: Slot) -> Request {
    Request::Copy { src, node, dest }
}

const RAM_SLOT: Slot = Slot {
    addr: 2 << 8,
    level: Level::L1,
};

#[test]
fn copy_to_another_node_is_owned_by_the_owner() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(5))).unwrap();
    // From a foreign copy, through the owner.
    run(&mut s, 1, copy(Slot::l1(5), 2, Slot::l1(6))).unwrap();
    for (n, slot) in [(0, 4), (1, 5), (2, 6)] {
        let (c, owner, state) = s.nodes[n].slot(Slot::l1(slot)).unwrap();
        assert_eq!(
            (c.base, c.size, owner, state),
            (0, 64 * K4, 0, SlotState::Ready)
        );
    }
    assert!(s.nodes[0].relations(Slot::l1(4)).unwrap().copies);
    check_invariants(&s.nodes).unwrap();
}

#[test]
fn delete_in_each_state_of_4_7_3() {
    let mut s = sim(2);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    // 1. Local with local copies: no message.
    run(&mut s, 0, copy(Slot::l1(4), 0, Slot::l1(5))).unwrap();
    let before = s.messages;
    run(&mut s, 0, Request::Delete(Slot::l1(5))).unwrap();
    assert_eq!(s.messages, before);
    // 2. Foreign: no message.
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(5))).unwrap();
    run(&mut s, 1, copy(Slot::l1(5), 1, Slot::l1(6))).unwrap();
    let before = s.messages;
    run(&mut s, 1, Request::Delete(Slot::l1(6))).unwrap();
    assert_eq!(s.messages, before);
    // 4. Local with only foreign copies: ownership moves to node 1.
    let done = run(&mut s, 0, Request::Delete(Slot::l1(4))).unwrap();
    assert!(done.reclaimed.is_empty());
    assert_eq!(s.nodes[1].slot(Slot::l1(5)).unwrap().1, 1);
    check_invariants(&s.nodes).unwrap();
    // 3. The last copy: its memory stays in the boot RAM, nothing reclaimed.
    let done = run(&mut s, 1, Request::Delete(Slot::l1(5))).unwrap();
    assert!(done.reclaimed.is_empty());
    // The region is free again: retype it.
    run(&mut s, 0, retype(RAM_SLOT, Frame, 0, 64 * K4, Slot::l1(4))).unwrap();
}

#[test]
fn the_last_copy_of_memory_nothing_covers_is_reclaimed_across_nodes() {
    let mut s = sim(2);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(4))).unwrap();
    run(&mut s, 1, retype(Slot::l1(4), Frame, K4, K4, Slot::l1(5))).unwrap();
    // PhysAddr and the boot RAM go: the 256 KiB RAM has no ancestor left.
    run(&mut s, 0, Request::Delete(Slot::l1(1))).unwrap();
    run(&mut s, 0, Request::Delete(RAM_SLOT)).unwrap();
    run(&mut s, 0, Request::Delete(Slot::l1(4))).unwrap();
    // Its last copy, on node 1, has a descendant there: nothing reclaimed.
    let done = run(&mut s, 1, Request::Delete(Slot::l1(4))).unwrap();
    assert!(done.reclaimed.is_empty());
    // The frame is now the last thing over its page: reclaimed.
    let done = run(&mut s, 1, Request::Delete(Slot::l1(5))).unwrap();
    assert_eq!(done.reclaimed, [(K4, K4)]);
}

#[test]
fn retype_finds_descendants_on_other_nodes() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 2, Slot::l1(4))).unwrap();
    run(
        &mut s,
        2,
        retype(Slot::l1(4), Frame, 8 * K4, K4, Slot::l1(5)),
    )
    .unwrap();
    let overlap = retype(Slot::l1(4), Ram, 0, 16 * K4, Slot::l1(6));
    assert_eq!(
        run(&mut s, 0, overlap),
        Err(Error::Cap(CapError::RevokeFirst))
    );
    let apart = retype(Slot::l1(4), Ram, 16 * K4, 16 * K4, Slot::l1(6));
    run(&mut s, 0, apart).unwrap();
}

#[test]
fn revoke_of_a_foreign_copy_takes_ownership_and_clears_every_node() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    for n in 1..3 {
        run(&mut s, 0, copy(Slot::l1(4), n, Slot::l1(4))).unwrap();
        run(
            &mut s,
            n,
            retype(Slot::l1(4), Frame, n as u64 * K4, K4, Slot::l1(5)),
        )
        .unwrap();
        run(&mut s, n, copy(Slot::l1(4), n, Slot::l1(6))).unwrap();
    }
    run(&mut s, 1, Request::Revoke(Slot::l1(4))).unwrap();
    let (c, owner, _) = s.nodes[1].slot(Slot::l1(4)).unwrap();
    assert_eq!(owner, 1);
    for n in &s.nodes {
        for (_, d, _, _) in n.live() {
            let inside = d.base >= c.base && d.end() <= c.end() && d.key() >= c.key();
            assert!(
                !inside || (n.id() == 1 && d == c),
                "node {} kept {d:?}",
                n.id()
            );
        }
    }
    check_invariants(&s.nodes).unwrap();
}

#[test]
fn deleting_a_cnode_deletes_what_it_holds_on_every_node() {
    let mut s = sim(2);
    run(&mut s, 0, retype(RAM_SLOT, L2CNode, 0, K16, Slot::l1(4))).unwrap();
    for i in 0..4u8 {
        let r = retype(RAM_SLOT, Ram, (8 + i as u64) * K4, K4, Slot::l2(4, i));
        run(&mut s, 0, r).unwrap();
    }
    // One of them also on node 1: ownership moves there when the CNode goes.
    run(
        &mut s,
        0,
        Request::Copy {
            src: Slot::l2(4, 0),
            node: 1,
            dest: Slot::l1(4),
        },
    )
    .unwrap();
    run(&mut s, 0, Request::Delete(Slot::l1(1))).unwrap();
    run(&mut s, 0, Request::Delete(RAM_SLOT)).unwrap();
    let done = run(&mut s, 0, Request::Delete(Slot::l1(4))).unwrap();
    // The CNode's own memory and three of the four RAMs have nothing left.
    let mut got = done.reclaimed.clone();
    got.sort();
    assert_eq!(got, [(0, K16), (9 * K4, K4), (10 * K4, K4), (11 * K4, K4)]);
    assert_eq!(s.nodes[1].slot(Slot::l1(4)).unwrap().1, 1);
    check_invariants(&s.nodes).unwrap();
}

#[test]
fn bad_requests_change_nothing_on_any_node() {
    let mut s = sim(2);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(4))).unwrap();
    run(&mut s, 1, retype(Slot::l1(4), Frame, 0, K4, Slot::l1(5))).unwrap();
    let before = s.nodes.clone();
    let bad = [
        (
            0,
            Request::Delete(Slot::l1(9)),
            Error::Cap(CapError::EmptySlot { addr: 9 << 8 }),
        ),
        (
            0,
            Request::Copy {
                src: Slot::l1(4),
                node: 5,
                dest: Slot::l1(6),
            },
            Error::NoSuchNode(5),
        ),
        (
            0,
            Request::Copy {
                src: Slot::l1(0),
                node: 1,
                dest: Slot::l1(6),
            },
            Error::NotTransferable(L1CNode),
        ),
        (
            1,
            Request::Copy {
                src: Slot::l1(4),
                node: 0,
                dest: Slot::l1(4),
            },
            Error::Cap(CapError::SlotInUse { addr: 4 << 8 }),
        ),
        (
            0,
            retype(Slot::l1(4), Frame, 0, 2 * K4, Slot::l1(6)),
            Error::Cap(CapError::RevokeFirst),
        ),
        (
            1,
            retype(Slot::l1(4), Frame, 0, K4, Slot::l1(5)),
            Error::Cap(CapError::RevokeFirst),
        ),
    ];
    for (n, req, err) in bad {
        assert_eq!(run(&mut s, n, req), Err(err), "{req:?}");
        assert!(s.nodes == before, "{req:?} changed a node");
    }
}

#[test]
fn a_locked_capability_is_refused_and_left_as_it_was() {
    let mut s = sim(2);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 64 * K4, Slot::l1(4))).unwrap();
    // A copy to node 1 in flight holds slot 4; a delete of it is refused.
    let out = s.nodes[0].step(Input::Request(
        1,
        Request::Copy {
            src: Slot::l1(4),
            node: 1,
            dest: Slot::l1(4),
        },
    ));
    assert!(out.done.is_empty() && out.sends.len() == 1);
    let before = s.nodes[0].clone();
    let out = s.nodes[0].step(Input::Request(2, Request::Delete(Slot::l1(4))));
    assert_eq!(out.done, [(2, Err(Error::Locked))]);
    assert!(s.nodes[0] == before);
}

/// Nodes stepped by hand: messages wait until the test delivers them.
struct Net {
    nodes: Vec<Node>,
    held: Vec<(NodeId, NodeId, Msg)>,
    done: Vec<(NodeId, u64, Outcome)>,
}

impl Net {
    fn step(&mut self, n: NodeId, input: Input) {
        let out = self.nodes[n as usize].step(input);
        self.held
            .extend(out.sends.into_iter().map(|(to, m)| (n, to, m)));
        self.done
            .extend(out.done.into_iter().map(|(id, r)| (n, id, r)));
    }

    /// Delivers the head message of the channel from `from` to `to`, which
    /// must be one that `is` takes.
    fn deliver(&mut self, from: NodeId, to: NodeId, is: impl Fn(&Msg) -> bool) {
        let i = self
            .held
            .iter()
            .position(|(f, t, _)| (*f, *t) == (from, to))
            .unwrap_or_else(|| panic!("nothing held {from}->{to}"));
        let (_, _, m) = self.held.remove(i);
        assert!(is(&m), "{from}->{to} delivers {m:?} first");
        self.step(to, Input::Message(from, m));
    }

    /// Delivers the oldest held message until none is left.
    fn drain(&mut self) {
        while !self.held.is_empty() {
            let (from, to, m) = self.held.remove(0);
            self.step(to, Input::Message(from, m));
        }
    }
}

/// The race the census closes: node 1 deletes the last copy of a frame
/// whose one ancestor, on node 0, is copied to node 2 and then deleted on
/// node 0 while node 1's question passes. Node 2 answers before the copy
/// arrives, so its answer alone misses node 2's RAM; its recording of the
/// channel from node 0, open until node 0's marker, finds it. Every channel
/// delivers in order.
#[test]
fn a_copy_in_flight_is_not_missed_when_memory_is_reclaimed() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, 16 * K4, Slot::l1(4))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(4))).unwrap();
    run(&mut s, 1, retype(Slot::l1(4), Frame, 0, K4, Slot::l1(5))).unwrap();
    for (n, slot) in [(1, 4), (0, 1), (0, 2)] {
        run(&mut s, n, Request::Delete(Slot::l1(slot))).unwrap();
    }
    let mut net = Net {
        nodes: s.nodes,
        held: Vec::new(),
        done: Vec::new(),
    };
    net.step(1, Input::Request(1, Request::Delete(Slot::l1(5))));
    net.step(0, Input::Request(2, copy(Slot::l1(4), 2, Slot::l1(4))));
    net.deliver(1, 2, |m| matches!(m, Msg::FindRelations { .. }));
    net.deliver(0, 2, |m| matches!(m, Msg::Transfer { .. }));
    let recorded = &net.nodes[2].recordings[&(1, OpRef { node: 1, id: 1 })];
    assert!(recorded.found, "{recorded:?}");
    net.deliver(2, 0, |m| matches!(m, Msg::Marker { .. }));
    net.deliver(2, 0, |m| matches!(m, Msg::TransferDone { .. }));
    net.step(0, Input::Request(3, Request::Delete(Slot::l1(4))));
    net.drain();
    let outcomes: Vec<_> = net
        .done
        .iter()
        .map(|(n, id, r)| (*n, *id, r.clone()))
        .collect();
    assert!(outcomes.iter().all(|(_, _, r)| r.is_ok()), "{outcomes:?}");
    let (_, _, deleted) = outcomes
        .iter()
        .find(|(n, id, _)| (*n, *id) == (1, 1))
        .unwrap();
    assert_eq!(
        deleted.as_ref().unwrap().reclaimed,
        [],
        "reclaimed under node 2's RAM"
    );
    assert_eq!(net.nodes[2].slot(Slot::l1(4)).unwrap().0.size, 16 * K4);
}

/// The race a revoke's marks close (found by `retype caps check` on three
/// nodes): node 1 revokes RAM of which node 0 holds a frame that node 0
/// starts copying to node 2 once it has handed node 1 the ownership. Node 2
/// is marked before the frame lands; node 0's mark waits for its copy to be
/// done. Unless node 2, between its mark and the commit, marks what of the
/// scope lands, the frame is ready there and could be copied on to node 0
/// after node 0's commit, outliving the revoke.
#[test]
fn a_capability_that_lands_after_the_mark_is_marked_too() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, K16, Slot::l1(4))).unwrap();
    run(&mut s, 0, retype(Slot::l1(4), Frame, 0, K4, Slot::l1(5))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(4))).unwrap();
    let mut net = Net {
        nodes: s.nodes,
        held: Vec::new(),
        done: Vec::new(),
    };
    let revoke = OpRef { node: 1, id: 1 };
    net.step(1, Input::Request(revoke.id, Request::Revoke(Slot::l1(4))));
    net.deliver(1, 0, |m| matches!(m, Msg::Retrieve { .. }));
    net.step(0, Input::Request(2, copy(Slot::l1(5), 2, Slot::l1(4))));
    net.deliver(0, 2, |m| matches!(m, Msg::OwnerUpdate { .. }));
    net.deliver(2, 0, |m| matches!(m, Msg::OwnerAck { .. }));
    net.deliver(0, 1, |m| matches!(m, Msg::Retrieved { .. }));
    net.deliver(1, 0, |m| matches!(m, Msg::Mark { .. }));
    assert_eq!(
        net.nodes[0].parked.len(),
        1,
        "node 0's mark waits for the copy"
    );
    net.deliver(1, 2, |m| matches!(m, Msg::Mark { .. }));
    net.deliver(0, 2, |m| matches!(m, Msg::Transfer { .. }));
    let landed = net.nodes[2].slot(Slot::l1(4)).unwrap();
    assert_eq!(landed.2, SlotState::InDelete(revoke), "{landed:?}");
    net.step(2, Input::Request(3, copy(Slot::l1(4), 0, Slot::l1(6))));
    assert!(
        net.done
            .iter()
            .any(|(n, id, r)| (*n, *id, *r == Err(Error::Locked)) == (2, 3, true)),
        "{:?}",
        net.done
    );
    net.drain();
    let revoked = net.done.iter().find(|(n, id, _)| (*n, *id) == (1, 1));
    assert!(matches!(revoked, Some((_, _, Ok(_)))), "{:?}", net.done);
    for n in &net.nodes {
        let left: Vec<_> = n.live().filter(|(_, c, ..)| c.ty == Frame).collect();
        assert!(left.is_empty(), "node {} keeps {left:?}", n.id());
    }
}

/// The race a census of the region closes (found by `retype caps check` on
/// three nodes, docs/model-check.md's bug 4): node 0 asks node 1, the
/// owner of its RAM, for a frame over memory where it found nothing in the
/// way itself. A frame over that memory then lands on node 0 from node 2,
/// and node 2 deletes its own copy. Were only the other nodes asked, node 2
/// would say "none" and node 1 would grant a second frame over the frame's
/// memory. (In the checker's counterexample the frame then moved away again
/// to free the only destination slot, and the two frames, copies with
/// different owners, broke RevokeRemovesAll and OwnershipInvariants; here
/// the new frame is larger and overlaps at once.)
#[test]
fn a_capability_that_lands_on_the_requester_after_its_check_is_found() {
    let mut s = sim(3);
    run(&mut s, 0, retype(RAM_SLOT, Ram, 0, K16, Slot::l1(4))).unwrap();
    run(&mut s, 0, retype(Slot::l1(4), Frame, 0, K4, Slot::l1(5))).unwrap();
    run(&mut s, 0, copy(Slot::l1(5), 2, Slot::l1(5))).unwrap();
    run(&mut s, 0, copy(Slot::l1(4), 1, Slot::l1(4))).unwrap();
    for slot in [5, 4] {
        run(&mut s, 0, Request::Delete(Slot::l1(slot))).unwrap();
    }
    run(&mut s, 1, copy(Slot::l1(4), 0, Slot::l1(4))).unwrap();
    assert_eq!(s.nodes[0].slot(Slot::l1(4)).unwrap().1, 1, "RAM owned by 1");
    assert_eq!(
        s.nodes[2].slot(Slot::l1(5)).unwrap().1,
        2,
        "frame owned by 2"
    );
    let mut net = Net {
        nodes: s.nodes,
        held: Vec::new(),
        done: Vec::new(),
    };
    let overlapping = retype(Slot::l1(4), Frame, 0, 2 * K4, Slot::l1(6));
    net.step(0, Input::Request(1, overlapping));
    net.step(2, Input::Request(2, copy(Slot::l1(5), 0, Slot::l1(5))));
    net.deliver(2, 0, |m| matches!(m, Msg::Transfer { .. }));
    net.deliver(0, 2, |m| matches!(m, Msg::TransferDone { .. }));
    net.step(2, Input::Request(3, Request::Delete(Slot::l1(5))));
    net.deliver(2, 0, |m| matches!(m, Msg::FindCopies { .. }));
    net.deliver(2, 1, |m| matches!(m, Msg::FindCopies { .. }));
    net.deliver(0, 2, |m| matches!(m, Msg::Copies { found: true, .. }));
    net.deliver(1, 2, |m| matches!(m, Msg::Copies { found: false, .. }));
    net.deliver(2, 0, |m| matches!(m, Msg::Move { .. }));
    net.deliver(0, 2, |m| matches!(m, Msg::Moved { ok: true, .. }));
    net.deliver(2, 1, |m| matches!(m, Msg::OwnerUpdate { .. }));
    net.deliver(1, 2, |m| matches!(m, Msg::OwnerAck { .. }));
    net.deliver(2, 0, |m| matches!(m, Msg::MoveDone { .. }));
    let frames = |net: &Net| -> Vec<(NodeId, Cap, NodeId)> {
        (net.nodes.iter())
            .flat_map(|n| n.live().map(move |(_, c, o, _)| (n.id(), c, o)))
            .filter(|(_, c, _)| c.ty == Frame)
            .collect()
    };
    assert_eq!(frames(&net), [(0, Cap::new(Frame, 0, K4), 0)]);
    net.drain();
    let retyped = net.done.iter().find(|(n, id, _)| (*n, *id) == (0, 1));
    assert_eq!(
        retyped.map(|(_, _, r)| r.clone()),
        Some(Err(Error::Cap(CapError::RevokeFirst))),
        "{:?}",
        net.done
    );
    assert_eq!(frames(&net), [(0, Cap::new(Frame, 0, K4), 0)]);
    assert!(net.nodes.iter().all(|n| n.is_idle()));
}
