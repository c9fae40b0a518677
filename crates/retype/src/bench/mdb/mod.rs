//! The mapping-database benchmark of seed 001 §4.5 (`retype bench mdb`):
//! databases of 4096 to 65536 capabilities from the thesis's generator
//! ([`ops`]), the latency of each low-level operation (median, standard
//! deviation and 99th percentile, as Figs. 4.3 to 4.6 give them) on each
//! implementation of Fig. 4.6 (the augmented AA tree with and without
//! parent pointers, with links packed by shifts and masks and by bitfields,
//! and the seL4-style list),
//! in the same run, and the weighted scores of the boot and
//! process-management mixes, in TSC cycles.

pub mod ops;

use std::collections::BTreeMap;
use std::hint::black_box;

use anyhow::{bail, Result};
use retype_core::caps::cap::Key;
use retype_core::caps::mdb::{AaTree, BitfieldTree, CapId, List, Mdb, NoParentTree, PackedTree};
use retype_core::rng::SplitMix64;

use crate::progress::Progress;
use crate::timing::{median, percentile, stddev, ticks};
use ops::{Op, BOOT, PROCMGMT};

/// What a run measures.
pub struct Config {
    /// Database sizes.
    pub caps: Vec<usize>,
    /// Measurements per operation and implementation.
    pub samples: usize,
    /// Seed of the capability generator and of the target choice.
    pub seed: u64,
    /// log2 of the memory the capabilities cover.
    pub mem_bits: u32,
}

/// Measures every size of `c`, a row per implementation (the trees with
/// parent pointers, without them, packed and as bitfields, then the list);
/// `overhead` is
/// the timer's own cost in cycles, taken off each measurement.
pub fn run(c: &Config, overhead: u64) -> Result<Vec<Row>> {
    if c.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if c.caps.iter().any(|&n| n < 2) {
        bail!("--caps: each size must be at least 2");
    }
    if !(8..=48).contains(&c.mem_bits) {
        bail!("--mem-bits must be in 8..=48");
    }
    let mut rows = Vec::new();
    let mut progress = Progress::new(c.caps.len() as u64, "bench mdb");
    for &n in &c.caps {
        progress.step(&format!("{n} capabilities"));
        let keys = ops::generate(n, c.mem_bits, c.seed);
        let mut tree: AaTree = build(&keys);
        let mut noparent: NoParentTree = build(&keys);
        let mut packed: PackedTree = build(&keys);
        let mut bitfield: BitfieldTree = build(&keys);
        let mut list: List = build(&keys);
        let mut rng = SplitMix64::new(c.seed ^ n as u64);
        let mut samples: [BTreeMap<&'static str, Vec<u64>>; 5] = Default::default();
        // Two rounds of a block of each implementation in turn (A B C D E
        // A B C D E), so that drift in the machine's speed hits all alike. Within
        // a block the database stays in cache, as in the thesis, where each
        // measurement followed a fresh fill; the list's long walks would
        // otherwise evict the trees between operations.
        for round in 0..2 {
            let count = c.samples / 2 + (round == 0) as usize * (c.samples % 2);
            let targets: Vec<Vec<CapId>> = Op::ALL
                .iter()
                .map(|_| (0..count).map(|_| rng.below(n as u64) as CapId).collect())
                .collect();
            block(&mut tree, &keys, &targets, overhead, &mut samples[0]);
            block(&mut noparent, &keys, &targets, overhead, &mut samples[1]);
            block(&mut packed, &keys, &targets, overhead, &mut samples[2]);
            block(&mut bitfield, &keys, &targets, overhead, &mut samples[3]);
            block(&mut list, &keys, &targets, overhead, &mut samples[4]);
        }
        let names = [
            tree.name(),
            noparent.name(),
            packed.name(),
            bitfield.name(),
            list.name(),
        ];
        for (name, s) in names.into_iter().zip(samples) {
            let (mut medians, mut stddevs, mut p99s) =
                (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
            for (op, mut v) in s {
                medians.insert(op, median(&mut v));
                stddevs.insert(op, stddev(&v));
                p99s.insert(op, percentile(&mut v, 99.0));
            }
            let boot = ops::score(&BOOT, |op| medians[op.name()]);
            let procmgmt = ops::score(&PROCMGMT, |op| medians[op.name()]);
            rows.push(Row {
                name,
                caps: n,
                medians,
                stddevs,
                p99s,
                boot,
                procmgmt,
            });
        }
    }
    Ok(rows)
}

/// Times `samples` runs of `op` on random entries of `mdb`.
fn measure<M: Mdb>(
    mdb: &mut M,
    keys: &[Key],
    op: Op,
    targets: &[CapId],
    overhead: u64,
) -> Vec<u64> {
    targets
        .iter()
        .map(|&id| {
            let k = keys[id as usize];
            ops::prepare(mdb, op, id);
            let t0 = ticks();
            let r = ops::run(mdb, op, id, &k);
            let t1 = ticks();
            black_box(r);
            ops::restore(mdb, op, id, &k);
            (t1 - t0).saturating_sub(overhead)
        })
        .collect()
}

/// Measures every operation on `mdb` after one untimed walk through it.
fn block<M: Mdb>(
    mdb: &mut M,
    keys: &[Key],
    targets: &[Vec<CapId>],
    overhead: u64,
    out: &mut BTreeMap<&'static str, Vec<u64>>,
) {
    let mut n = mdb.first();
    while let Some(id) = n {
        n = black_box(mdb.successor(id));
    }
    for (&op, t) in Op::ALL.iter().zip(targets) {
        let v = measure(mdb, keys, op, t, overhead);
        out.entry(op.name()).or_default().extend(v);
    }
}

/// Builds the list front-first (descending order), so that building is
/// O(n); the trees take the capabilities in generation order.
pub fn build<M: Mdb>(keys: &[Key]) -> M {
    let mut m = M::new();
    let mut order: Vec<CapId> = (0..keys.len() as CapId).collect();
    if m.name() == "list" {
        order.sort_by(|&a, &b| (keys[b as usize], b).cmp(&(keys[a as usize], a)));
    }
    for id in order {
        m.insert(id, keys[id as usize]).expect("fresh ids");
    }
    m
}

/// One database's figures, in TSC cycles.
pub struct Row {
    /// The implementation's [`Mdb::name`].
    pub name: &'static str,
    pub caps: usize,
    /// Each operation's median latency.
    pub medians: BTreeMap<&'static str, f64>,
    /// Each operation's standard deviation (of all its samples, as numpy's
    /// `std`, which the thesis used).
    pub stddevs: BTreeMap<&'static str, f64>,
    /// Each operation's 99th percentile.
    pub p99s: BTreeMap<&'static str, u64>,
    /// The scores of the boot and process-management mixes.
    pub boot: f64,
    pub procmgmt: f64,
}
