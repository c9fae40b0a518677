//! Test vector V12 and every implementation against a sorted-vector model:
//! each test is a generic function, run once per implementation by
//! `tests_for!` at the end.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::caps::cap::Cap;
use crate::caps::types::CapType::{self, *};
use crate::rng::SplitMix64;

fn key(ty: CapType, base: u64, size: u64) -> Key {
    Cap::new(ty, base, size).key()
}

/// The entries of V12 (docs/design.md#v12), shuffled into slots.
fn v12() -> [(CapId, Key); 7] {
    let mut mapping = Cap::new(FrameMapping, 0, 1);
    mapping.map = Some(crate::caps::cap::MapInfo {
        ptable: 0x10_0000,
        entry: 0,
        pte_count: 4,
        offset: 0,
        target: Frame,
        target_base: 0,
        target_size: 0x4000,
        flags: crate::caps::cap::Rights::RW,
    });
    [
        (6, key(PhysAddr, 0, 1 << 20)),
        (3, key(Ram, 0, 64 << 10)),
        (5, key(Ram, 0, 16 << 10)),
        (0, key(Frame, 0, 16 << 10)),
        (4, mapping.key()),
        (2, key(Ram, 0x4000, 4 << 10)),
        (1, key(Frame, 0x4000, 4 << 10)),
    ]
}

fn v12_on<M: Mdb>() {
    let entries = v12();
    let mut m = M::new();
    for &(id, k) in entries.iter().rev() {
        m.insert(id, k).unwrap();
    }
    let mut order = Vec::new();
    let mut n = m.first();
    while let Some(id) = n {
        order.push(id);
        n = m.successor(id);
    }
    let expected: Vec<CapId> = entries.iter().map(|e| e.0).collect();
    assert_eq!(order, expected, "{}: ascending order of V12", m.name());
    assert!(m.has_descendants(5), "RAM 0/16K has the Frame below it");
    assert!(!m.has_descendants(1), "Frame 0x4000 has none");
    assert!(m.has_ancestors(4) && m.has_ancestors(1));
    assert!(!m.has_ancestors(6), "PhysAddr is the root");
    assert!(!m.has_copies(3));
    let at = |off| m.query(1, off, 0x1000, Relation::Surrounding);
    assert_eq!(
        at(0x4000),
        Found {
            relation: Relation::Surrounding,
            id: Some(1)
        },
        "exact equality is surrounding; the latest (tightest) wins"
    );
    assert_eq!(
        at(0x8000).id,
        Some(3),
        "free region: RAM 0/64K surrounds it"
    );
    let inner = m.query(1, 0, 0x10000, Relation::Partial);
    assert_eq!(inner.relation, Relation::Inner);
    assert_eq!(inner.id, Some(5), "the earliest inner entry");
    assert_eq!(m.insert(3, key(Ram, 0, 1)), Err(MdbError::DuplicateEntry));
    assert_eq!(m.remove(9), Err(MdbError::EntryNotFound));
}

fn partial_prefers_an_entry_starting_before<M: Mdb>() {
    let mut m = M::new();
    m.insert(0, key(Ram, 0x1000, 0x1000)).unwrap();
    m.insert(1, key(Ram, 0x3000, 0x1000)).unwrap();
    let f = m.query(1, 0x1800, 0x2000, Relation::Partial);
    assert_eq!((f.relation, f.id), (Relation::Partial, Some(0)));
    let f = m.query(1, 0x2000, 0x1000, Relation::Partial);
    assert_eq!(f.relation, Relation::NotFound);
}

/// The model: every entry in a sorted vector, every query by brute force
/// from the definitions (no use of the invariant).
#[derive(Default)]
struct Model(Vec<(Key, CapId)>);

impl Model {
    fn insert(&mut self, id: CapId, k: Key) {
        let i = self.0.partition_point(|e| *e < (k, id));
        self.0.insert(i, (k, id));
    }
    fn remove(&mut self, id: CapId) {
        self.0.retain(|e| e.1 != id);
    }
    fn get(&self, id: CapId) -> Key {
        self.0.iter().find(|e| e.1 == id).unwrap().0
    }
    fn neighbour(&self, id: CapId, d: isize) -> Option<CapId> {
        let i = self.0.iter().position(|e| e.1 == id)? as isize + d;
        self.0.get(usize::try_from(i).ok()?).map(|e| e.1)
    }
    fn has_copies(&self, id: CapId) -> bool {
        let k = self.get(id);
        self.0.iter().any(|e| e.1 != id && e.0 == k)
    }
    fn has_descendants(&self, id: CapId) -> bool {
        let k = self.get(id);
        self.0
            .iter()
            .any(|e| e.0 > k && e.0.root == k.root && e.0.base >= k.base && e.0.end() <= k.end())
    }
    fn has_ancestors(&self, id: CapId) -> bool {
        let k = self.get(id);
        self.0
            .iter()
            .any(|e| e.0 < k && e.0.root == k.root && e.0.base <= k.base && e.0.end() >= k.end())
    }
    fn query(&self, root: u8, addr: u64, size: u64, max: Relation) -> Found {
        let mut q = RangeQuery::new(root, addr, size, max);
        for &(k, id) in &self.0 {
            if q.offer(id, &k) {
                break;
            }
        }
        q.best
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        bits: u32,
        slot: u64,
        copy_of: Option<usize>,
        ty: bool,
    },
    Remove(usize),
    Query {
        bits: u32,
        slot: u64,
        max: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..10, any::<u64>(), proptest::option::weighted(0.15, any::<usize>()), any::<bool>())
            .prop_map(|(bits, slot, copy_of, ty)| Op::Insert { bits, slot, copy_of, ty }),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => (0u32..11, any::<u64>(), 0u8..4).prop_map(|(bits, slot, max)| Op::Query { bits, slot, max }),
    ]
}

/// Naturally aligned power-of-two regions inside 1 KiB: any two nest or are
/// disjoint, as the derivation invariant demands.
fn check<M: Mdb>(ops: &[Op], check_tree: impl Fn(&M)) {
    let mut m = M::new();
    let mut model = Model::default();
    let mut live: Vec<CapId> = Vec::new();
    let mut next_id: CapId = 0;
    let maxes = [
        Relation::NotFound,
        Relation::Surrounding,
        Relation::Inner,
        Relation::Partial,
    ];
    for op in ops {
        match *op {
            Op::Insert {
                bits,
                slot,
                copy_of,
                ty,
            } => {
                let k = match copy_of.filter(|_| !live.is_empty()) {
                    Some(i) => model.get(live[i % live.len()]),
                    None => {
                        let size = 1u64 << bits;
                        let base = (slot % (1024 >> bits)) * size;
                        key(if ty { Ram } else { Frame }, base, size)
                    }
                };
                // Slot ids are reused out of order, as slots are.
                let id = (next_id * 7) % 4099;
                next_id += 1;
                if model.0.iter().any(|e| e.1 == id) {
                    continue;
                }
                m.insert(id, k).unwrap();
                model.insert(id, k);
                live.push(id);
            }
            Op::Remove(i) if !live.is_empty() => {
                let id = live.swap_remove(i % live.len());
                m.remove(id).unwrap();
                model.remove(id);
                assert_eq!(m.remove(id), Err(MdbError::EntryNotFound));
            }
            Op::Remove(_) => {}
            Op::Query { bits, slot, max } => {
                let size = 1u64 << bits;
                let addr = slot % 1100;
                let max = maxes[max as usize];
                assert_eq!(m.query(1, addr, size, max), model.query(1, addr, size, max));
            }
        }
        check_tree(&m);
        assert_eq!(m.len(), model.0.len());
        assert_eq!(m.first(), model.0.first().map(|e| e.1));
        for &id in &live {
            assert_eq!(m.key(id), Some(model.get(id)));
            assert_eq!(m.successor(id), model.neighbour(id, 1));
            assert_eq!(m.predecessor(id), model.neighbour(id, -1));
            assert_eq!(m.has_copies(id), model.has_copies(id), "copies of {id}");
            assert_eq!(
                m.has_descendants(id),
                model.has_descendants(id),
                "descendants of {id}"
            );
            assert_eq!(
                m.has_ancestors(id),
                model.has_ancestors(id),
                "ancestors of {id}"
            );
            let k = model.get(id);
            for inclusive in [false, true] {
                let want = model
                    .0
                    .iter()
                    .find(|e| e.0 > k || (inclusive && e.0 == k))
                    .map(|e| e.1);
                assert_eq!(m.seek(&k, inclusive), want);
            }
        }
    }
}

/// Long random churn over naturally aligned RAM capabilities of random sizes
/// in 1 MiB: the implementation's invariants hold after every insert and
/// remove, and in-order traversal matches a sorted model.
fn stays_consistent_under_churn<M: Mdb>(check_tree: impl Fn(&M)) {
    let mut rng = SplitMix64::new(9);
    let keys: Vec<Key> = (0..3000)
        .map(|_| {
            let x = rng.below(20);
            key(Ram, rng.below(1 << (20 - x)) << x, 1 << x)
        })
        .collect();
    let mut t = M::new();
    let mut model = Model::default();
    for _ in 0..6000 {
        let id = rng.below(keys.len() as u64) as CapId;
        if t.contains(id) {
            t.remove(id).unwrap();
            model.remove(id);
        } else {
            t.insert(id, keys[id as usize]).unwrap();
            model.insert(id, keys[id as usize]);
        }
        check_tree(&t);
    }
    let mut order = Vec::new();
    let mut n = t.first();
    while let Some(id) = n {
        order.push(id);
        n = t.successor(id);
    }
    let want: Vec<CapId> = model.0.iter().map(|e| e.1).collect();
    assert_eq!(order, want);
}

/// The first slot id an implementation cannot link is refused, and the
/// refusal changes nothing.
fn refuses_ids_past_its_links<M: Mdb + Clone + PartialEq + core::fmt::Debug>(first_out: CapId) {
    let mut m = M::new();
    m.insert(0, key(Ram, 0, 0x1000)).unwrap();
    let before = m.clone();
    assert_eq!(
        m.insert(first_out, key(Ram, 0, 0x1000)),
        Err(MdbError::IdOutOfRange)
    );
    assert_eq!(m, before);
}

/// One module per implementation, every test above on it; `$check` checks
/// its invariants.
macro_rules! tests_for {
    ($($module:ident: $mdb:ty, $check:expr;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn v12_ordering_and_queries() {
                v12_on::<$mdb>();
            }

            #[test]
            fn partial_prefers_an_entry_starting_before() {
                super::partial_prefers_an_entry_starting_before::<$mdb>();
            }

            #[test]
            fn stays_consistent_under_churn() {
                super::stays_consistent_under_churn::<$mdb>($check);
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(64))]

                #[test]
                fn matches_the_model(ops in proptest::collection::vec(op(), 1..200)) {
                    check::<$mdb>(&ops, $check);
                }
            }
        }
    )*};
}

tests_for! {
    tree: AaTree, |t: &AaTree| { t.check(); };
    tree_noparent: NoParentTree, |t: &NoParentTree| { t.check(); };
    tree_packed: PackedTree, |t: &PackedTree| { t.check(); };
    tree_bitfield: BitfieldTree, |t: &BitfieldTree| { t.check(); };
    list: List, |_: &List| {};
}

#[test]
fn trees_refuse_ids_past_their_links() {
    refuses_ids_past_its_links::<AaTree>(u32::MAX);
    refuses_ids_past_its_links::<NoParentTree>(u32::MAX);
    refuses_ids_past_its_links::<PackedTree>((1 << 24) - 1);
    refuses_ids_past_its_links::<BitfieldTree>((1 << 24) - 1);
}
