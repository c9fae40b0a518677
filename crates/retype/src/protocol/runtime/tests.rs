//! The runtime against the deterministic simulator of retype-core: the
//! same requests, one at a time, give the same outcomes and leave every
//! node in the same state; requests in flight together all get their
//! outcome. Nothing here depends on how fast or how many the cores are.

use retype_core::caps::protocol::{boot, Error, Node, NodeId, OpRef, Request, Sim, Slot};
use retype_core::caps::{CapError, CapType};
use retype_core::objects::{Arch, Config};

use super::*;

const RAM: u64 = 1 << 20;
const K4: u64 = 4096;
const RAM_SLOT: Slot = Slot {
    addr: 2 << 8,
    level: retype_core::caps::Level::L1,
};

fn nodes(n: u8) -> Vec<Node> {
    boot(Config::new(Arch::X86_64), RAM, 256, n).unwrap()
}

fn copy(src: u32, node: NodeId, dest: u32) -> Request {
    Request::Copy {
        src: Slot::l1(src),
        node,
        dest: Slot::l1(dest),
    }
}

/// Every case of §4.7 on three nodes, with refusals among them.
fn script() -> Vec<(NodeId, Request)> {
    let l1 = Slot::l1;
    vec![
        (
            0,
            Request::retype(RAM_SLOT, CapType::Ram, 0, 64 * K4, 1, l1(4)),
        ),
        (0, copy(4, 1, 5)),
        // From a foreign copy, through the owner.
        (1, copy(5, 2, 6)),
        // A retype by a non-owner, then one that overlaps its result.
        (
            1,
            Request::retype(l1(5), CapType::Frame, 2 * K4, K4, 1, l1(7)),
        ),
        (0, Request::retype(l1(4), CapType::Ram, 0, 4 * K4, 1, l1(8))),
        (
            0,
            Request::retype(l1(4), CapType::Ram, 4 * K4, 4 * K4, 1, l1(8)),
        ),
        (1, copy(5, 1, 9)),
        (1, Request::Delete(l1(9))),
        // The owner's last copy: ownership moves.
        (0, Request::Delete(l1(4))),
        // A foreign copy's revoke takes ownership, then clears every node.
        (2, Request::Revoke(l1(6))),
        (
            0,
            Request::retype(RAM_SLOT, CapType::L2CNode, 128 * K4, 4 * K4, 1, l1(10)),
        ),
        (
            0,
            Request::retype(RAM_SLOT, CapType::Ram, 160 * K4, K4, 4, Slot::l2(10, 0)),
        ),
        (0, Request::Delete(l1(10))),
        (0, Request::Delete(l1(9))),
        (0, Request::Noop),
        (0, copy(0, 1, 11)),
        (2, Request::Delete(l1(6))),
        (1, Request::Revoke(l1(7))),
    ]
}

#[test]
fn serial_requests_match_the_simulator() {
    let mut sim = Sim::new(nodes(3), 1);
    let want: Vec<_> = script()
        .into_iter()
        .enumerate()
        .map(|(i, (node, req))| {
            let id = i as u64 + 1;
            sim.submit(node, id, req);
            assert!(sim.run(1_000_000));
            sim.done.remove(&OpRef { node, id }).unwrap()
        })
        .collect();
    assert!(want.iter().any(|r| r.is_ok()) && want.iter().any(|r| r.is_err()));
    assert_eq!(want[15], Err(Error::NotTransferable(CapType::L1CNode)));
    assert_eq!(
        want[13],
        Err(Error::Cap(CapError::EmptySlot { addr: 9 << 8 }))
    );
    for wait in [Wait::Spin, Wait::Block] {
        let (got, after) = run(nodes(3), wait, |d| {
            let got: Vec<_> = script().into_iter().map(|(n, r)| d.run(n, r)).collect();
            assert_eq!(d.nodes(), 3);
            got
        });
        assert_eq!(got, want, "{wait:?}");
        assert!(
            after == sim.nodes,
            "{wait:?}: the nodes differ from the simulator's"
        );
    }
}

#[test]
fn every_request_in_flight_gets_its_outcome() {
    for (n, wait) in [(2, Wait::Spin), (4, Wait::Block), (3, Wait::Spin)] {
        let (_, after) = run(nodes(n), wait, |d| {
            for (node, req) in script().into_iter().take(2) {
                d.run(node, req).unwrap();
            }
            // Copies, deletes and no-ops at once, on every node: some are
            // refused as locked, none is lost.
            let mut ops = Vec::new();
            for round in 0..20u32 {
                for k in 0..n {
                    let req = match round % 4 {
                        0 => copy(4 + k as u32 % 2, (k + 1) % n, 20 + round),
                        1 => Request::Delete(Slot::l1(19 + round)),
                        2 => Request::Noop,
                        _ => Request::Delete(Slot::l1(17 + round)),
                    };
                    ops.push(d.submit(k, req));
                }
            }
            for op in &ops {
                let (r, _) = d.wait(*op);
                assert!(!matches!(r, Err(Error::NoSuchNode(_))), "{r:?}");
            }
            d.settle();
            assert!(d
                .events()
                .iter()
                .all(|e| e.start <= e.end || e.kind == Kind::Transit));
        });
        assert!(after.iter().all(Node::is_idle), "{n} nodes, {wait:?}");
    }
}

#[test]
fn a_round_trip_comes_back_and_events_name_their_operation() {
    let (trips, _) = run(nodes(2), Wait::Block, |d| {
        let trips: Vec<u64> = (0..10).map(|_| d.round_trip(1)).collect();
        d.events();
        let op = d.submit(0, copy(2, 1, 3));
        d.wait(op).0.unwrap();
        let events = d.events();
        let steps = events.iter().filter(|e| e.kind == Kind::Step).count();
        // The request, the transfer and its reply.
        assert_eq!(steps, 3, "{events:?}");
        assert!(events.iter().all(|e| e.op == op));
        trips
    });
    assert_eq!(trips.len(), 10);
}

/// A no-op and the delete of a local copy, timed as `bench protocol` times
/// them (submit, wait, collect the events), wake no node but node 0 on 2
/// nodes or 16, after a copy to node 1 has woken that one: what a local
/// operation costs cannot grow with the nodes that exist.
#[test]
fn local_operations_wake_no_other_node() {
    for n in [2u8, 16] {
        run(nodes(n), Wait::Block, |d| {
            let l1 = Slot::l1;
            let ram = Request::retype(RAM_SLOT, CapType::Ram, 0, 64 * K4, 1, l1(4));
            d.run(0, ram).unwrap();
            d.run(0, copy(4, 1, 5)).unwrap();
            d.events();
            let before: Vec<u64> = (1..n as usize).map(|k| received(d, k)).collect();
            for req in [Request::Noop, copy(4, 0, 6), Request::Delete(l1(6))] {
                let op = d.submit(0, req);
                d.wait(op).0.unwrap();
                let events = d.events();
                assert!(events.iter().all(|e| e.op == op), "{events:?}");
                d.settle();
            }
            let after: Vec<u64> = (1..n as usize).map(|k| received(d, k)).collect();
            assert_eq!(after, before, "{n} nodes: envelopes taken by nodes 1..");
            assert!(before[0] > 0, "node 1 took the copy");
        });
    }
}

/// The envelopes node `k` has taken from its inbox so far.
fn received(d: &Driver, k: usize) -> u64 {
    d.home.counts[k].received.load(Ordering::Acquire)
}
