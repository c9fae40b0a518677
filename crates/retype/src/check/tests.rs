//! The checker finds nothing in a correct protocol and finds every planted
//! bug, with a counterexample.

use retype_core::caps::distributed::mutation::Mutation;

use super::*;

fn cfg(nodes: u8, mem: u64, slots: u32, ops: u64) -> Config {
    Config {
        nodes,
        mem,
        slots,
        ops,
        regions: Regions::All,
    }
}

/// CI's configuration: two nodes, two bytes, three slots, two operations
/// in flight, every region. It found two real bugs (a revoke done before
/// another delete's slot went; two revokes waiting for each other).
#[test]
fn the_ci_configuration_breaks_nothing() {
    let o = run(cfg(2, 2, 3, 2), 2, &|_, _, _| ()).unwrap();
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    assert!(
        o.distinct > 1000 && o.states >= o.distinct,
        "{} {}",
        o.states,
        o.distinct
    );
}

/// Our search against stateright's breadth-first checker as the reference:
/// the same distinct states, on one thread and on two.
#[test]
fn the_search_finds_the_states_stateright_finds() {
    use stateright::{Checker, Model};
    for c in [cfg(2, 1, 2, 1), cfg(3, 1, 3, 1), cfg(2, 2, 3, 1)] {
        let model = || CapModel::new(c, start(&c).unwrap());
        let reference = model().checker().spawn_bfs().join();
        assert!(reference.discoveries().is_empty(), "{c:?}");
        for threads in [1, 2] {
            let o = explore(model(), threads, &|_, _, _| ());
            assert!(o.violations.is_empty(), "{c:?}: {:?}", o.violations);
            assert_eq!(o.distinct, reference.unique_state_count(), "{c:?}");
            assert!(o.states >= o.distinct && o.depth > 0, "{c:?}");
        }
    }
}

#[test]
fn bad_configurations_are_refused() {
    for c in [
        cfg(0, 2, 3, 1),
        cfg(2, 0, 3, 1),
        cfg(2, 2, 0, 1),
        cfg(2, 2, 3, 0),
        cfg(2, 2, 3, 9),
    ] {
        assert!(run(c, 1, &|_, _, _| ()).is_err(), "{c:?}");
    }
    let reduced = Config {
        regions: Regions::Reduced,
        ..cfg(2, 2, 3, 1)
    };
    let e = run(reduced, 1, &|_, _, _| ()).err().unwrap().to_string();
    assert!(e.contains("--mem 3"), "{e}");
}

/// Explores `c` with every node given `m`: the first property found broken.
/// One thread, so that "first" is the same on every run: with two, the
/// thread that wins the race decides which of a bug's broken properties is
/// reported (a retype that skips its check breaks ownership too).
fn find(c: Config, m: Mutation) -> (&'static str, String) {
    let mut nodes = start(&c).unwrap();
    nodes.iter_mut().for_each(|n| n.plant(m));
    let model = || CapModel::new(c, nodes.clone());
    let two = explore(model(), 2, &|_, _, _| ());
    assert_eq!(
        two.violations.len(),
        1,
        "{m:?} on two threads: {:?}",
        two.violations
    );
    let o = explore(model(), 1, &|_, _, _| ());
    assert_eq!(o.violations.len(), 1, "{m:?}: {:?}", o.violations);
    o.violations.into_iter().next().unwrap()
}

#[test]
fn every_planted_bug_is_found_with_its_counterexample() {
    let cases = [
        (
            Mutation::RetypeSkipsCheck,
            cfg(2, 2, 3, 1),
            "RetypesDisjoint",
        ),
        (
            Mutation::DeleteIgnoresForeignCopies,
            cfg(2, 1, 2, 1),
            "OwnershipInvariants",
        ),
        (
            Mutation::RevokeSkipsSweep,
            cfg(2, 1, 2, 1),
            "RevokeRemovesAll",
        ),
        (
            Mutation::MoveWithoutUpdate,
            cfg(3, 1, 3, 1),
            "OwnershipInvariants",
        ),
        (
            Mutation::LockKeptOnError,
            cfg(2, 1, 2, 1),
            "EveryOperationCompletes",
        ),
    ];
    let all = <Mutation as strum::VariantArray>::VARIANTS;
    assert_eq!(cases.len(), all.len(), "a planted bug without a case");
    for (m, c, property) in cases {
        let (found, trace) = find(c, m);
        println!("{m:?}: {found}\n{trace}");
        assert_eq!(found, property, "{m:?}:\n{trace}");
        assert!(
            trace.contains("  1. node "),
            "{m:?}: not numbered:\n{trace}"
        );
        assert!(trace.contains(&format!("broken: {property}")), "{trace}");
    }
}
