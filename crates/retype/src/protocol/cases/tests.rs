//! Every case runs on one to three nodes, sends messages between nodes
//! exactly when its goal counts round trips, and leaves every database as
//! it found it.

use retype_core::caps::protocol::Node;
use retype_core::caps::Mdb;

use super::*;
use crate::protocol::runtime::{run, Kind, Wait};

const CAPS: u32 = 256;

fn sizes(nodes: &[Node]) -> Vec<usize> {
    nodes.iter().map(|n| n.caps().mdb().len()).collect()
}

#[test]
fn every_case_runs_and_leaves_the_databases_as_they_were() {
    for n in 1..=3 {
        let (_, populated) = run(boot(n, CAPS).unwrap(), Wait::Block, |d| {
            populate(d, CAPS, 7).unwrap()
        });
        assert!(populated
            .iter()
            .all(|node| node.caps().mdb().len() > CAPS as usize));
        let (_, after) = run(boot(n, CAPS).unwrap(), Wait::Block, |d| {
            populate(d, CAPS, 7).unwrap();
            for case in all().iter().filter(|c| n as usize >= c.min_nodes) {
                for i in 0..3 {
                    let req = case.prepare(d, i).unwrap();
                    let op = d.submit(0, req);
                    let (r, _) = d.wait(op);
                    assert!(r.is_ok(), "{} {}: {r:?}", case.op, case.case);
                    let events = d.events();
                    let transits = events
                        .iter()
                        .filter(|e| e.op == op && e.kind == Kind::Transit);
                    // The request's own transit, then messages between nodes.
                    assert_eq!(
                        transits.count() > 1,
                        matches!(case.goal, Goal::RoundTrips(_)),
                        "{} {}",
                        case.op,
                        case.case
                    );
                    case.clean(d).unwrap();
                }
            }
        });
        assert_eq!(sizes(&after), sizes(&populated), "{n} nodes");
        assert!(after.iter().all(Node::is_idle));
    }
}

#[test]
fn cases_have_distinct_names_and_cross_node_ones_count_their_round_trips() {
    let all = all();
    for (i, c) in all.iter().enumerate() {
        assert!(
            all[..i].iter().all(|o| (o.op, o.case) != (c.op, c.case)),
            "{}",
            c.case
        );
        if let Goal::RoundTrips(f) = c.goal {
            assert_eq!(c.min_nodes, 2, "{}", c.case);
            assert!(f(2) >= 1 && f(3) >= f(2));
        }
    }
}
