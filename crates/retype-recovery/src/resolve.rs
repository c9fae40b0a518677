//! The entry: recovers the requests of one or more logs, picking among the
//! three searches.
//!
//! The deferred search (`deferred`) runs first: where the logs allow it (the
//! kept rule, one allocation per free) it ends fast with a match or a proof.
//! Only when it cannot does the depth-first search (`depth_first`) run; when
//! its bound stops it, the breadth-first `sweep` over distinct states tries
//! again without look-aheads: a proof when the states stay few.
//!
//! When no branch gets past some request, that request and the proof (how
//! many branches died, whether all were tried, the closest counters) are
//! reported, and the rest of the log is recovered as well as it can be: by
//! the look-ahead alone (`lookahead::walk`) from the closest branch, or from
//! the start, whichever matches more requests — never fewer than the
//! look-ahead alone. When the per-slab dumps are what no branch got past,
//! the searches run again without them ([`SetAside`]).

use alloc::vec::Vec;

use retype_core::mm::MemoryManager;
use retype_core::workload::script::Script;

use crate::dumps::Dumps;
use crate::end::{Death, End, ResolveError};
use crate::log::{delta, Checkpoint, LoggedOp, SlabCounters};
use crate::lookahead::walk;
use crate::replay::Replay;
use crate::{deferred, depth_first, sweep};

/// One log to recover: its requests, its per-slab dumps in request order
/// (none for most logs), and a fresh manager with the policy and accounting
/// that produced it.
pub struct Log<'a> {
    pub ops: &'a [LoggedOp],
    pub checkpoints: &'a [Checkpoint],
    pub manager: MemoryManager,
}

/// A log's recovered requests, and how sure the recovery is.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub script: Script,
    /// Frees for which more than one set of allocations agreed with the logs.
    pub ambiguous_frees: usize,
    /// Refused allocations whose size the log did not give (replayed as one
    /// page: the smallest object that still fails when memory is full).
    pub unsized_refusals: usize,
    /// The first request no choice of frees got past, with the proof.
    pub death: Option<Death>,
    /// The per-slab dumps the search went on without, if any.
    pub set_aside: Option<SetAside>,
}

/// When no branch got past a request, the dumps from there on are set aside
/// and the search runs again; this says which, and why, if it then got
/// further without them.
#[derive(Clone, Debug)]
pub struct SetAside {
    /// Requests after which a dump was set aside.
    pub dumps: Vec<usize>,
    /// How the search died with them: the request, and the slabs there.
    pub death: Death,
}

/// Recovers the requests of one or more logs that got the same requests
/// (seed 000's runs without OOMs, and its applications), each replayed on its
/// manager: every free must then agree with all the logs at once, and every
/// per-slab dump with its log's slabs. The recovery is exact (see the
/// [crate]'s documentation): the result agrees with every logged counter and
/// dump, or [`Resolved::death`] names the first request no choice of frees
/// got past.
pub fn resolve(logs: Vec<Log<'_>>) -> Result<Resolved, ResolveError> {
    let n = logs.first().map_or(0, |l| l.ops.len());
    for (m, log) in logs.iter().enumerate() {
        check_dumps(m, log)?;
    }
    let checkpoints: Vec<Vec<Checkpoint>> = logs.iter().map(|l| l.checkpoints.to_vec()).collect();
    let (logs, mms): (Vec<&[LoggedOp]>, Vec<MemoryManager>) =
        logs.into_iter().map(|l| (l.ops, l.manager)).unzip();
    for (i, pair) in logs.windows(2).enumerate() {
        if let Some(op) =
            (0..n.max(pair[1].len())).find(|&j| delta(pair[0], j) != delta(pair[1], j))
        {
            return Err(ResolveError {
                op,
                message: alloc::format!("logs {i} and {} did not get the same requests", i + 1),
            });
        }
    }
    let search = |aside: &[usize]| {
        let dumps = logs
            .iter()
            .zip(&checkpoints)
            .zip(&mms)
            .map(|((ops, cs), mm)| {
                let kept = cs.iter().filter(|c| !aside.contains(&c.op));
                Dumps::new(ops, kept.cloned().collect(), mm)
            })
            .collect();
        recover(&logs, Replay::new(mms.clone(), dumps))
    };
    // When no branch gets past a request, the dumps from there on are set
    // aside and the search runs again, kept if it gets further: the dumps
    // guide the search as far as they can be met, the counters alone beyond.
    let mut found = search(&[])?;
    let mut set_aside = None;
    if let Some(d) = &found.death {
        let mut later: Vec<usize> = checkpoints
            .iter()
            .flatten()
            .map(|c| c.op)
            .filter(|&op| op >= d.op)
            .collect();
        later.sort_unstable();
        later.dedup();
        if !later.is_empty() {
            let reach = |f: &Found| f.death.as_ref().map_or(usize::MAX, |d| d.op);
            let retried = search(&later)?;
            if reach(&retried) > reach(&found) {
                let death = found.death.take().expect("the first search died");
                set_aside = Some(SetAside {
                    dumps: later,
                    death,
                });
                found = retried;
            }
        }
    }
    Ok(Resolved {
        script: Script::new(found.replay.script()),
        ambiguous_frees: found.replay.ambiguous_frees,
        unsized_refusals: found.replay.unsized_refusals,
        death: found.death,
        set_aside,
    })
}

/// A log's dumps must be in request order, within the log, one slab each
/// per slab of its manager, and sum to the log's own counters there: a dump
/// of another run would mislead the search.
fn check_dumps(m: usize, log: &Log<'_>) -> Result<(), ResolveError> {
    let mut last = None;
    for c in log.checkpoints {
        let fail = |message: &str| ResolveError {
            op: c.op,
            message: alloc::format!("log {m}'s per-slab dump: {message}"),
        };
        let Some(op) = log.ops.get(c.op) else {
            return Err(fail("after a request the log does not have"));
        };
        if last.is_some_and(|l| l >= c.op) {
            return Err(fail("dumps out of request order"));
        }
        last = Some(c.op);
        if c.slabs.len() != log.manager.slabs().len() {
            return Err(fail("a different number of slabs than the layout's"));
        }
        let sum = |f: fn(&SlabCounters) -> u64| c.slabs.iter().map(f).sum::<u64>();
        if (sum(|s| s.frag_watermark), sum(|s| s.frag_alignment))
            != (op.after.frag_watermark, op.after.frag_alignment)
        {
            return Err(fail(
                "its fragmentation does not add up to the log's after that request (another run's dump?)",
            ));
        }
    }
    Ok(())
}

/// The outcome of a whole recovery.
struct Found {
    replay: Replay,
    death: Option<Death>,
}

/// Recovers every logged request from `root` (before request 0).
fn recover(logs: &[&[LoggedOp]], root: Replay) -> Result<Found, ResolveError> {
    // The search that defers frees first: it ends fast, with a match or a
    // proof, when the logs allow it.
    let deferred = deferred::defer(logs, root.clone())?;
    let settled = |e: &End| match e {
        End::Done(_) => true,
        End::Died(_, _, d) => d.exhaustive,
    };
    let end = match deferred {
        Some(e) if settled(&e) => e,
        _ => {
            let mut end = depth_first::search(logs, root.clone(), depth_first::BUDGET)?;
            // A bounded search proves nothing; the sweep may, when few states differ.
            if matches!(&end, End::Died(_, _, d) if !d.exhaustive) {
                if let Some(swept) = sweep::sweep(logs, root.clone())? {
                    end = swept;
                }
            }
            end
        }
    };
    let (closest, from, death) = match end {
        End::Done(replay) => {
            return Ok(Found {
                replay,
                death: None,
            })
        }
        End::Died(closest, from, death) => (closest, from, death),
    };
    let continued = walk(logs, closest, from)?;
    let plain = walk(logs, root, 0)?;
    let replay = if plain.matched > continued.matched {
        plain
    } else {
        continued
    };
    Ok(Found {
        replay,
        death: Some(death),
    })
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use proptest::prelude::*;

    use super::*;
    use crate::log::{type_for_size, LogCounters};
    use retype_core::mm::slab::WatermarkRule;
    use retype_core::mm::{Accounting, Layout, PolicyKind};
    use retype_core::objects::{Arch, Config};
    use retype_core::workload::{drive, Op};

    const RV32: Config = Config::new(Arch::Riscv32);

    /// Slabs of 16, 16 and 1 KiB: [`late_script`]'s; the generated logs'
    /// also have some of 64, 32 and 8 KiB, so that they rarely run out.
    fn manager(policy: PolicyKind, large: bool) -> MemoryManager {
        let bits = if large {
            vec![16, 15, 14, 14, 13, 10]
        } else {
            vec![14, 14, 10]
        };
        let layout = Layout::from_bits(bits).unwrap();
        MemoryManager::new(RV32, &layout, WatermarkRule::Kept, policy)
            .with_accounting(Accounting::LOGS)
    }

    fn alloc(id: u32, bytes: u64) -> Op {
        Op::Alloc {
            id,
            request: vec![type_for_size(bytes)],
        }
    }

    /// The log a run of `ops` under `policy` prints.
    fn log_of(ops: &[Op], policy: PolicyKind, large: bool) -> Vec<LoggedOp> {
        let mut log = Vec::new();
        let mut script = Script::new(ops.to_vec());
        drive(
            &mut manager(policy, large),
            &mut script,
            || 0,
            |step, _| {
                log.push(LoggedOp {
                    after: LogCounters::of(&step.stats),
                    ..LoggedOp::default()
                })
            },
        )
        .unwrap();
        log
    }

    fn input(ops: &[LoggedOp], policy: PolicyKind, large: bool) -> Log<'_> {
        Log {
            ops,
            checkpoints: &[],
            manager: manager(policy, large),
        }
    }

    fn resolve_one(log: &[LoggedOp], large: bool) -> Resolved {
        resolve(vec![input(log, PolicyKind::BestFit, large)]).unwrap()
    }

    /// Two 8 KiB allocations in different slabs, each beside a live 4 KiB
    /// one: freeing either locks 8 KiB alike. Only 120 requests later, when
    /// the second slab's last object goes and the slab resets, does the log
    /// show which one went: beyond the look-ahead.
    fn late_script() -> Vec<Op> {
        let mut ops = vec![
            alloc(0, 8192),
            alloc(1, 4096),
            alloc(2, 8192),
            alloc(3, 4096),
            alloc(4, 4096),
            Op::Free { ids: vec![2] },
        ];
        for id in 5..65 {
            ops.push(alloc(id, 16));
            ops.push(Op::Free { ids: vec![id] });
        }
        ops.push(Op::Free { ids: vec![4] });
        ops
    }

    #[test]
    fn the_search_recovers_a_free_that_shows_only_much_later() {
        let ops = late_script();
        let log = log_of(&ops, PolicyKind::BestFit, false);
        let r = resolve_one(&log, false);
        assert_eq!(r.death, None);
        assert_eq!(
            r.script.ops()[5],
            Op::Free { ids: vec![2] },
            "not the oldest 8 KiB"
        );
        assert_eq!(
            log_of(r.script.ops(), PolicyKind::BestFit, false),
            log,
            "every counter of every request"
        );
        assert_eq!(r.ambiguous_frees, 1);
    }

    #[test]
    fn a_contradictory_log_dies_where_no_branch_agrees() {
        let mut log = log_of(&late_script(), PolicyKind::BestFit, false);
        let last = log.len() - 1;
        log[last].after.slab_resets += 1;
        let r = resolve_one(&log, false);
        let d = r.death.expect("no replay gives that many resets");
        assert_eq!((d.op, d.exhaustive), (last, true));
        // The 8 KiB free stays pending: one branch, dead at the last free.
        assert_eq!(d.branches, 1);
        let diffs = d.differences(0, &log);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert_eq!(diffs[0].0, "slab resets");
        assert_eq!(diffs[0].2, diffs[0].1 + 1, "ours, the log's");
        assert_eq!(
            r.script.ops().len(),
            log.len(),
            "recovered to the end all the same"
        );
    }

    /// 64 endpoints fill the 1 KiB slab, 64 more go to the first 16 KiB one;
    /// then 60 frees from each, alternating: every free could come from
    /// either slab, and no counter tells which until one of them empties.
    /// Up to 64 distinct states per request, each reached by many paths.
    fn spread_script() -> Vec<Op> {
        let mut ops: Vec<Op> = (0..128).map(|id| alloc(id, 16)).collect();
        for k in 1..=60 {
            ops.push(Op::Free { ids: vec![k] });
            ops.push(Op::Free { ids: vec![64 + k] });
        }
        ops
    }

    /// The same frees, then a request no replay can match: every distinct
    /// state is tried, so its death is a proof, not the bound.
    #[test]
    fn an_impossible_request_behind_many_equal_frees_is_proved_so() {
        let mut log = log_of(&spread_script(), PolicyKind::BestFit, false);
        let last = log.len() - 1;
        log[last].after.frag_watermark += 1 << 20;
        let d = resolve_one(&log, false)
            .death
            .expect("no replay locks a MiB more");
        assert_eq!((d.op, d.exhaustive), (last, true), "{d:?}");
    }

    /// A request sequence: allocations of a few sizes (runs of one to three
    /// pages among them), frees of one live allocation each (picked by the
    /// seeds), so that many frees are ambiguous.
    fn requests() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            (
                prop::bool::weighted(0.55),
                0usize..5,
                1u32..4,
                any::<usize>(),
            ),
            1..120,
        )
        .prop_map(|steps| {
            let sizes = [16, 32, 512, 4096, 8192];
            let (mut ops, mut live, mut next) = (Vec::new(), Vec::new(), 0u32);
            for (grow, size, pages, seed) in steps {
                if grow || live.is_empty() {
                    let mut op = alloc(next, sizes[size]);
                    if let Op::Alloc { request, .. } = &mut op {
                        if sizes[size] == 4096 {
                            request[0].count = pages;
                        }
                    }
                    ops.push(op);
                    live.push(next);
                    next += 1;
                } else {
                    let id = live.swap_remove(seed % live.len());
                    ops.push(Op::Free { ids: vec![id] });
                }
            }
            ops
        })
    }

    /// The per-slab dumps of a run of `ops` under `policy`: after every
    /// `every`-th request and after the last.
    fn dumps_of(ops: &[Op], policy: PolicyKind, every: usize) -> Vec<Checkpoint> {
        let mut dumps = Vec::new();
        let mut script = Script::new(ops.to_vec());
        let mut k = 0;
        drive(
            &mut manager(policy, true),
            &mut script,
            || 0,
            |_, mm| {
                if k % every == every - 1 || k + 1 == ops.len() {
                    dumps.push(Checkpoint {
                        op: k,
                        slabs: SlabCounters::all(mm),
                    });
                }
                k += 1;
            },
        )
        .unwrap();
        dumps
    }

    /// What the search returned for logs that a known request sequence made:
    /// every request matched; or, if the search bound came first, no proof
    /// (that sequence exists) and requests that agree with the logs at least
    /// as often as the branch that got furthest (every log, up to there).
    fn recovered(r: &Resolved, logs: &[(&[LoggedOp], PolicyKind)]) -> Result<(), TestCaseError> {
        let agreed = match &r.death {
            None => logs[0].0.len(),
            Some(d) => {
                prop_assert!(
                    !d.exhaustive && d.replayed >= crate::depth_first::BUDGET,
                    "{:?}",
                    d
                );
                d.op
            }
        };
        let same: usize = logs
            .iter()
            .map(|&(log, policy)| {
                let got = log_of(r.script.ops(), policy, true);
                got.iter().zip(log).filter(|(a, b)| a == b).count()
            })
            .sum();
        prop_assert!(
            same >= logs.len() * agreed,
            "{} agree, {} needed",
            same,
            logs.len() * agreed
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Logs generated by a known request sequence (no OOMs: the layout is
        /// large enough) are matched on every request, alone and together, or
        /// the search reaches its bound first (seeds in proptest-regressions do)
        /// and says so (see `recovered`).
        #[test]
        fn the_search_recovers_every_request_of_a_generated_log(ops in requests()) {
            let bf = log_of(&ops, PolicyKind::BestFit, true);
            let nf = log_of(&ops, PolicyKind::BlindNextFit, true);
            prop_assume!(bf.iter().chain(&nf).all(|o| o.after.ooms == 0));
            recovered(&resolve_one(&bf, true), &[(&bf, PolicyKind::BestFit)])?;
            let both = resolve(vec![
                input(&bf, PolicyKind::BestFit, true),
                input(&nf, PolicyKind::BlindNextFit, true),
            ])
            .unwrap();
            recovered(&both, &[(&bf, PolicyKind::BestFit), (&nf, PolicyKind::BlindNextFit)])?;
        }

        /// With per-slab dumps every few requests, the search (which prunes
        /// branches that cannot reach the next dump) still recovers every
        /// request and dump, alone and with both policies' logs together,
        /// unless its bound comes first (see `recovered`).
        #[test]
        fn the_search_recovers_a_generated_log_with_its_dumps(ops in requests(), every in 3usize..40) {
            let bf = log_of(&ops, PolicyKind::BestFit, true);
            let nf = log_of(&ops, PolicyKind::BlindNextFit, true);
            prop_assume!(bf.iter().chain(&nf).all(|o| o.after.ooms == 0));
            let (bf_dumps, nf_dumps) = (
                dumps_of(&ops, PolicyKind::BestFit, every),
                dumps_of(&ops, PolicyKind::BlindNextFit, every),
            );
            let with = |log, dumps, policy| Log { checkpoints: dumps, ..input(log, policy, true) };
            // The dumps are met too, unless the search bound came first (then
            // the dumps set aside never carry a proof either).
            let met = |r: &Resolved| -> Result<bool, TestCaseError> {
                if let Some(s) = &r.set_aside {
                    prop_assert!(!s.death.exhaustive, "{:?}", s.death);
                }
                Ok(r.death.is_none() && r.set_aside.is_none())
            };
            let one = resolve(vec![with(&bf, &bf_dumps, PolicyKind::BestFit)]).unwrap();
            recovered(&one, &[(&bf, PolicyKind::BestFit)])?;
            if met(&one)? {
                prop_assert_eq!(dumps_of(one.script.ops(), PolicyKind::BestFit, every), bf_dumps.clone());
            }
            let both = resolve(vec![
                with(&bf, &bf_dumps, PolicyKind::BestFit),
                with(&nf, &nf_dumps, PolicyKind::BlindNextFit),
            ])
            .unwrap();
            recovered(&both, &[(&bf, PolicyKind::BestFit), (&nf, PolicyKind::BlindNextFit)])?;
            if met(&both)? {
                prop_assert_eq!(dumps_of(both.script.ops(), PolicyKind::BestFit, every), bf_dumps);
                prop_assert_eq!(dumps_of(both.script.ops(), PolicyKind::BlindNextFit, every), nf_dumps);
            }
        }

        /// The search that defers frees, alone, on logs a known request
        /// sequence made (both policies, with their dumps): it may give up,
        /// but it never proves them impossible (which would show its
        /// relaxation, its choices without loss of generality or its merged
        /// states wrong), and a match it returns meets every log and dump.
        #[test]
        fn the_deferred_search_never_proves_a_possible_log_impossible(ops in requests(), every in 3usize..40) {
            let policies = [PolicyKind::BestFit, PolicyKind::BlindNextFit];
            let logs: Vec<Vec<LoggedOp>> = policies.iter().map(|&p| log_of(&ops, p, true)).collect();
            prop_assume!(logs.iter().flatten().all(|o| o.after.ooms == 0));
            let dumps: Vec<Vec<Checkpoint>> = policies.iter().map(|&p| dumps_of(&ops, p, every)).collect();
            let views: Vec<&[LoggedOp]> = logs.iter().map(Vec::as_slice).collect();
            let root = Replay::new(
                policies.iter().map(|&p| manager(p, true)).collect(),
                views.iter().zip(&dumps).zip(policies).map(|((l, d), p)| Dumps::new(l, d.clone(), &manager(p, true))).collect(),
            );
            match deferred::defer(&views, root).unwrap() {
                None => {}
                Some(End::Died(_, _, d)) => prop_assert!(!d.exhaustive, "{:?}", d),
                Some(End::Done(r)) => {
                    for (k, &p) in policies.iter().enumerate() {
                        prop_assert_eq!(&log_of(&r.script(), p, true), &logs[k]);
                        prop_assert_eq!(&dumps_of(&r.script(), p, every), &dumps[k]);
                    }
                }
            }
        }

        /// A dump no run can print (a watermark above its slab) is proved
        /// unreachable: every branch dies at it or before it; the search
        /// then goes on without it, or stops there.
        #[test]
        fn an_impossible_dump_is_proved_so(ops in requests(), every in 3usize..40, at in any::<prop::sample::Index>()) {
            let log = log_of(&ops, PolicyKind::BestFit, true);
            prop_assume!(log.iter().all(|o| o.after.ooms == 0));
            let mut dumps = dumps_of(&ops, PolicyKind::BestFit, every);
            let k = at.index(dumps.len());
            dumps[k].slabs[0].watermark = 1 << 17;
            let r = resolve(vec![Log { checkpoints: &dumps, ..input(&log, PolicyKind::BestFit, true) }]).unwrap();
            // Dies there, or goes on without the dumps from there and says why.
            let d = r.set_aside.as_ref().map(|s| &s.death).or(r.death.as_ref()).expect("no run reaches that dump");
            prop_assert!(d.exhaustive || d.replayed >= crate::depth_first::BUDGET, "{:?}", d);
            prop_assert!(d.op <= dumps[k].op, "died at {} after the dump at {}", d.op, dumps[k].op);
            if let Some(s) = &r.set_aside {
                prop_assert!(s.dumps.contains(&dumps[k].op), "{:?} kept the dump at {}", s.dumps, dumps[k].op);
            }
            prop_assert_eq!(r.script.ops().len(), log.len());
        }

        /// The same logs with one counter of one request made impossible
        /// (more watermarking than the slabs could lock) die at that request,
        /// every branch tried, with that counter named.
        #[test]
        fn an_impossible_request_is_proved_so(ops in requests(), at in any::<prop::sample::Index>()) {
            let mut log = log_of(&ops, PolicyKind::BestFit, true);
            prop_assume!(log.iter().all(|o| o.after.ooms == 0));
            let k = at.index(log.len());
            log[k].after.frag_watermark += 1 << 20;
            let r = resolve_one(&log, true);
            let d = r.death.expect("no replay locks a MiB more");
            prop_assert_eq!(d.op, k);
            // A proof, unless the frees before it branch beyond the bound.
            prop_assert!(d.exhaustive || d.replayed >= crate::depth_first::BUDGET, "{:?}", d);
            let diffs = d.differences(0, &log);
            prop_assert!(diffs.iter().any(|c| c.0 == "watermarking"), "{:?}", diffs);
            prop_assert_eq!(r.script.ops().len(), log.len());
        }
    }
}
