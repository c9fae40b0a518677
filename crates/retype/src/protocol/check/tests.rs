//! The checker finds nothing in a correct protocol and finds every planted
//! bug, with a counterexample.

use retype_core::caps::protocol::mutation::Mutation;

use super::*;

fn cfg(nodes: u8, mem: u64, slots: u32, ops: u64) -> Config {
    Config {
        nodes,
        mem,
        slots,
        ops,
        regions: Regions::All,
        symmetry: Symmetry::Off,
    }
}

/// CI's configuration: two nodes, two bytes, three slots, two operations
/// in flight, every region, operations counted up to numbering (the
/// default). It found two real bugs (a revoke done before another
/// delete's slot went; two revokes waiting for each other).
#[test]
fn the_ci_configuration_breaks_nothing() {
    breaks_nothing(cfg(2, 2, 3, 2));
}

/// Three nodes, one byte, four slots, two operations: the smallest
/// configuration that found retype's check taking no snapshot (a frame
/// that landed on the requester after it had checked itself, bug 4 of
/// docs/model-check.md) and a revoke missing what landed after its mark.
#[test]
fn three_nodes_with_two_operations_break_nothing() {
    breaks_nothing(cfg(3, 1, 4, 2));
}

/// Explores `c` with the symmetry reduction on two threads: no property
/// broken, livelock included.
fn breaks_nothing(c: Config) {
    let c = Config {
        symmetry: Symmetry::On,
        ..c
    };
    let o = run(c, 2, &|_, _, _| ()).unwrap();
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    assert!(
        o.distinct > 1000 && o.states >= o.distinct,
        "{} {}",
        o.states,
        o.distinct
    );
    let live = o.livelock_check.expect("made when nothing else broke");
    assert!(live.tasks > 1000 && live.steps > 1000);
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

/// Explores `c` with every node given `m`: the first property found broken
/// and its counterexample. One thread, so that "first" is the same on every
/// run: with two, the thread that wins the race decides which of a bug's
/// broken properties is reported (a retype that skips its check breaks
/// ownership too). The search counting states up to numbering must find
/// the same property. A broken state property's counterexample must be as
/// short as any (against a plain breadth-first search).
fn find(c: Config, m: Mutation) -> (&'static str, String) {
    let mut nodes = start(&c).unwrap();
    nodes.iter_mut().for_each(|n| n.plant(m));
    let model = |symmetry| CapModel::new(Config { symmetry, ..c }, nodes.clone());
    let two = explore(model(Symmetry::On), 2, &|_, _, _| ());
    assert_eq!(
        two.violations.len(),
        1,
        "{m:?} on two threads: {:?}",
        two.violations
    );
    let o = explore(model(Symmetry::Off), 1, &|_, _, _| ());
    assert_eq!(o.violations.len(), 1, "{m:?}: {:?}", o.violations);
    let r = explore(model(Symmetry::On), 1, &|_, _, _| ());
    assert_eq!(r.violations.len(), 1, "{m:?}: {:?}", r.violations);
    let (name, trace) = o.violations.into_iter().next().unwrap();
    assert_eq!(r.violations[0].0, name, "{m:?}: {:?}", r.violations);
    if name != NO_LIVELOCK {
        let steps = |t: &str| (t.lines()).filter(|l| l.contains(". node ")).count();
        let least = least_depth(&model(Symmetry::Off), name);
        assert_eq!(steps(&trace), least, "{m:?}: not the shortest:\n{trace}");
        assert_eq!(steps(&r.violations[0].1), least, "{m:?}, symmetry on");
    }
    (name, trace)
}

/// The fewest steps from the start to a state that breaks `property`.
fn least_depth(m: &CapModel, property: &str) -> usize {
    let mut seen = HashSet::from([fingerprint(&m.init)]);
    let mut queue = VecDeque::from([(m.init.clone(), 0)]);
    while let Some((s, depth)) = queue.pop_front() {
        if s.broken.as_ref().is_some_and(|b| b.0 == property) {
            return depth;
        }
        for (_, t) in successors(m, &s) {
            if seen.insert(fingerprint(&t)) {
                queue.push_back((t, depth + 1));
            }
        }
    }
    panic!("{property} is never broken")
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
        (Mutation::MoveRetriedForever, cfg(2, 1, 2, 1), NO_LIVELOCK),
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

// ----- the symmetry reduction -----

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use search::fingerprint;

/// `s` with every operation id `i` renamed `p[i]`: the symmetry's action,
/// done the long way.
fn rename(s: &State, p: &[u64]) -> State {
    let mut t = s.clone();
    for n in &mut t.nodes {
        Arc::make_mut(n).rename_ops(|i| p[i as usize]);
    }
    for m in t.chans.iter_mut().flatten() {
        let op = m.op_mut();
        op.id = p[op.id as usize];
    }
    for (i, o) in s.ops.iter().enumerate() {
        t.ops[p[i] as usize] = o.clone();
    }
    t
}

fn rename_action(a: &Action, p: &[u64]) -> Action {
    match a.clone() {
        Action::Start { id, node, req } => Action::Start {
            id: p[id as usize],
            node,
            req,
        },
        deliver => deliver,
    }
}

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<u64>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..n {
            let mut q = p.clone();
            q.insert(at, n as u64 - 1);
            out.push(q);
        }
    }
    out
}

/// Every state reachable in `m`, breadth first, no symmetry.
fn all_states(m: &CapModel) -> Vec<State> {
    let mut seen = HashSet::new();
    let mut states = vec![m.init.clone()];
    let mut queue = VecDeque::from([m.init.clone()]);
    seen.insert(fingerprint(&m.init));
    while let Some(s) = queue.pop_front() {
        for (_, t) in successors(m, &s) {
            if seen.insert(fingerprint(&t)) {
                states.push(t.clone());
                queue.push_back(t);
            }
        }
    }
    states
}

/// Configurations small enough to hold every state, two with two
/// operations in flight.
fn small() -> Vec<Config> {
    vec![cfg(2, 1, 3, 2), cfg(3, 1, 3, 2), cfg(2, 2, 3, 1)]
}

/// Two renamings that generate every renaming of `n` ids: swapping the
/// first two, and turning all of them round by one.
fn generators(n: usize) -> Vec<Vec<u64>> {
    let mut swap: Vec<u64> = (0..n as u64).collect();
    swap.swap(0, 1);
    let turn = (0..n as u64).map(|i| (i + 1) % n as u64).collect();
    vec![swap, turn]
}

/// The claim the reduction rests on, on every state of the small
/// configurations and every renaming (checked for two that generate them
/// all): renaming commutes with every step, keeps the key and the names of
/// the running operations.
#[test]
fn renaming_operations_maps_every_step_onto_a_step() {
    for c in small() {
        let m = CapModel::new(c, start(&c).unwrap());
        let states = all_states(&m);
        let perms = generators(2 * c.ops as usize);
        let sym = CapModel::new(
            Config {
                symmetry: Symmetry::On,
                ..c
            },
            start(&c).unwrap(),
        );
        let mut steps = 0;
        for s in &states {
            let canon = sym.canon(s);
            let names = |s: &State, c: &search::Canon| {
                (0..search::TASKS)
                    .filter(|&i| sym.running(s) & 1 << i != 0)
                    .fold(0u8, |m, i| m | 1 << c.rank[i])
            };
            let mut actions = Vec::new();
            m.actions(s, &mut actions);
            for p in &perms {
                let r = rename(s, p);
                let rc = sym.canon(&r);
                assert_eq!(rc.key, canon.key, "{c:?}: renaming {p:?} changed the key");
                assert_eq!(names(&r, &rc), names(s, &canon), "{c:?}");
                for a in &actions {
                    let t = m.next_state(s, a.clone()).map(|t| rename(&t, p));
                    let u = m.next_state(&r, rename_action(a, p));
                    assert!(
                        t == u,
                        "{c:?}: {a:?} renamed by {p:?} is not the renamed step"
                    );
                    steps += 1;
                }
            }
        }
        assert!(steps > 1000, "{c:?}: {steps} steps");
    }
}

/// The reduced search against the full one on the small configurations:
/// the same verdict, and one state per class, the classes counted the long
/// way (the least fingerprint over every renaming of each full state).
#[test]
fn the_reduced_search_meets_each_class_of_the_full_one_once() {
    for c in small() {
        let full = CapModel::new(c, start(&c).unwrap());
        let states = all_states(&full);
        let perms = permutations(2 * c.ops as usize);
        let classes: HashSet<u64> = states
            .iter()
            .map(|s| {
                let fp = |p: &Vec<u64>| fingerprint(&rename(s, p));
                perms.iter().map(fp).min().unwrap()
            })
            .collect();
        let sym = Config {
            symmetry: Symmetry::On,
            ..c
        };
        let reduced = CapModel::new(sym, start(&c).unwrap());
        let keys: HashMap<u64, usize> = states.iter().map(|s| (reduced.canon(s).key, 0)).collect();
        assert_eq!(
            keys.len(),
            classes.len(),
            "{c:?}: the key is not one per class"
        );
        let o = explore(full, 2, &|_, _, _| ());
        let r = explore(reduced, 2, &|_, _, _| ());
        assert!(o.violations.is_empty() && r.violations.is_empty(), "{c:?}");
        assert_eq!(o.distinct, states.len(), "{c:?}");
        assert_eq!(r.distinct, classes.len(), "{c:?}");
        assert!(r.distinct < o.distinct, "{c:?}: nothing reduced");
        println!("{c:?}: {} states, {} classes", o.distinct, r.distinct);
    }
}
