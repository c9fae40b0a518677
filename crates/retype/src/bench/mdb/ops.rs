//! The mapping-database benchmark as seed 001 §4.5 defines it: the thesis's
//! capability generator, its low-level operations, and the operation mixes
//! of its boot phase (table 4.2) and process-management workload (table
//! 4.3). Timing is the caller's ([`super::measure`]).

use retype_core::caps::cap::{Cap, Key};
use retype_core::caps::mdb::{CapId, Mdb, Relation};
use retype_core::caps::types::CapType;
use retype_core::rng::SplitMix64;

/// One low-level operation of table 4.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum Op {
    Insert,
    Remove,
    Successor,
    Iterate10,
    Iterate100,
    Copies,
    Descendants,
    Ancestors,
    RangeQuery,
}

impl Op {
    pub const ALL: &'static [Op] = <Op as strum::VariantArray>::VARIANTS;

    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Remove => "remove",
            Op::Successor => "successor",
            Op::Iterate10 => "iterate10",
            Op::Iterate100 => "iterate100",
            Op::Copies => "copies",
            Op::Descendants => "descendants",
            Op::Ancestors => "ancestors",
            Op::RangeQuery => "range_query",
        }
    }
}

/// A workload's operation frequencies (they sum to 1).
pub type Mix = [(Op, f64); 7];

/// Table 4.2: Barrelfish's boot phase.
pub const BOOT: Mix = [
    (Op::Insert, 0.280),
    (Op::Remove, 0.177),
    (Op::Successor, 0.110),
    (Op::Copies, 0.181),
    (Op::Ancestors, 0.071),
    (Op::Descendants, 0.154),
    (Op::RangeQuery, 0.027),
];

/// Table 4.3: many short-lived processes.
pub const PROCMGMT: Mix = [
    (Op::Insert, 0.199),
    (Op::Remove, 0.193),
    (Op::Successor, 0.077),
    (Op::Copies, 0.198),
    (Op::Ancestors, 0.124),
    (Op::Descendants, 0.184),
    (Op::RangeQuery, 0.025),
];

/// The score of a mix: the weighted sum of the operations' medians.
pub fn score(mix: &Mix, median: impl Fn(Op) -> f64) -> f64 {
    mix.iter().map(|&(op, f)| f * median(op)).sum()
}

/// The thesis's generator: `n` naturally aligned RAM capabilities in a
/// memory of `2^mem_bits` bytes; about 10 % are copies of an earlier one, the
/// others have `P[log2(size) = x] = 2^(-x-1)` for `x < mem_bits`. It draws
/// from the project's documented SplitMix64, so the benchmark is
/// reproducible from its seed.
pub fn generate(n: usize, mem_bits: u32, seed: u64) -> Vec<Key> {
    let mut rng = SplitMix64::new(seed);
    let mut keys: Vec<Key> = Vec::with_capacity(n);
    while keys.len() < n {
        if !keys.is_empty() && rng.below(10) == 0 {
            let k = keys[rng.below(keys.len() as u64) as usize];
            keys.push(k);
            continue;
        }
        let x = rng.next_u64().trailing_zeros();
        if x >= mem_bits {
            continue;
        }
        let size = 1u64 << x;
        let base = rng.below(1u64 << (mem_bits - x)) << x;
        keys.push(Cap::new(CapType::Ram, base, size).key());
    }
    keys
}

/// Untimed set-up before timing `op` on slot `id`: an insert is measured by
/// taking the entry out first.
pub fn prepare<M: Mdb>(mdb: &mut M, op: Op, id: CapId) {
    if op == Op::Insert {
        mdb.remove(id).expect("benchmark entries are present");
    }
}

/// The timed part: one operation on slot `id` (with key `k`); returns a
/// value that depends on the result, for the caller to black-box.
pub fn run<M: Mdb>(mdb: &mut M, op: Op, id: CapId, k: &Key) -> u64 {
    match op {
        Op::Insert => mdb.insert(id, *k).is_ok() as u64,
        Op::Remove => mdb.remove(id).is_ok() as u64,
        Op::Successor => mdb.successor(id).unwrap_or(0) as u64,
        Op::Iterate10 | Op::Iterate100 => {
            let steps = if op == Op::Iterate10 { 10 } else { 100 };
            let mut n = Some(id);
            let mut sum = 0u64;
            for _ in 0..steps {
                match n.and_then(|x| mdb.successor(x)) {
                    Some(x) => {
                        sum += x as u64;
                        n = Some(x);
                    }
                    None => break,
                }
            }
            sum
        }
        Op::Copies => mdb.has_copies(id) as u64,
        Op::Descendants => mdb.has_descendants(id) as u64,
        Op::Ancestors => mdb.has_ancestors(id) as u64,
        // The query a retype of this region makes.
        Op::RangeQuery => {
            let f = mdb.query(k.root, k.base, k.size, Relation::Surrounding);
            f.relation as u64 + f.id.unwrap_or(0) as u64
        }
    }
}

/// Untimed clean-up: a removed entry goes back, so the database keeps `n`.
pub fn restore<M: Mdb>(mdb: &mut M, op: Op, id: CapId, k: &Key) {
    if op == Op::Remove {
        mdb.insert(id, *k).expect("just removed");
    }
}

#[cfg(test)]
mod tests {
    use retype_core::caps::mdb::{AaTree, BitfieldTree, List, NoParentTree, PackedTree};

    use super::super::build;
    use super::*;

    #[test]
    fn generator_follows_the_thesis() {
        let keys = generate(20_000, 32, 1);
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        let copies = keys.len() - sorted.len();
        assert!(
            (1600..2600).contains(&copies),
            "about 10 % copies, got {copies}"
        );
        let small = keys.iter().filter(|k| k.size == 1).count();
        assert!(
            (8000..10_000).contains(&small),
            "half are of size 2^0, got {small}"
        );
        assert!(keys
            .iter()
            .all(|k| k.base % k.size == 0 && k.end() <= 1 << 32));
    }

    /// `op` on `id` as the benchmark times it, set-up and clean-up around.
    fn once<M: Mdb>(m: &mut M, op: Op, id: CapId, k: &Key) -> u64 {
        prepare(m, op, id);
        let r = run(m, op, id, k);
        restore(m, op, id, k);
        assert_eq!(m.len(), 500, "{}: {op:?}", m.name());
        r
    }

    #[test]
    fn operations_leave_the_database_as_it_was() {
        let keys = generate(500, 20, 7);
        let mut l: List = build(&keys);
        let mut t: AaTree = build(&keys);
        let mut np: NoParentTree = build(&keys);
        let mut pk: PackedTree = build(&keys);
        let mut bf: BitfieldTree = build(&keys);
        for &op in Op::ALL {
            for id in [0u32, 17, 499] {
                let k = keys[id as usize];
                let want = once(&mut l, op, id, &k);
                assert_eq!(once(&mut t, op, id, &k), want, "tree {op:?}");
                assert_eq!(once(&mut np, op, id, &k), want, "tree-noparent {op:?}");
                assert_eq!(once(&mut pk, op, id, &k), want, "tree-packed {op:?}");
                assert_eq!(once(&mut bf, op, id, &k), want, "tree-bitfield {op:?}");
                t.check();
                np.check();
                pk.check();
                bf.check();
            }
        }
        assert!((score(&PROCMGMT, |_| 1.0) - 1.0).abs() < 1e-9);
        assert!((score(&BOOT, |_| 1.0) - 1.0).abs() < 1e-9);
    }
}
