//! Random operation sequences on the capability system, run on the tree and
//! the list mapping databases side by side and checked after every step
//! against a reference model that records who was derived from whom:
//!
//! - tree and list give the same result and end in the same state, and their
//!   queries match a brute-force answer over the live capabilities;
//! - a refused invocation changes nothing;
//! - an offset-mode retype succeeds exactly when no live capability other
//!   than an ancestor of the source overlaps the region;
//! - no two live objects overlap unless one derives from the other;
//! - nothing is mapped without a capability;
//! - revoke leaves no copy, no descendant and no mapping of them.
//!
//! 512 cases of about 200 operations: over 10^5 operations per run.

use std::collections::HashMap;

use proptest::prelude::*;
use retype_core::caps::cap::Key;
use retype_core::caps::types::{CapType, CapType::*, PAGE};
use retype_core::caps::{AaTree, Boot, Cap, CapError, CapRef, Caps, List, Mdb, Rights};
use retype_core::objects::{Arch, Config, ObjectType};

const RAM: u64 = 1 << 20;

#[derive(Clone, Debug)]
enum Op {
    Retype {
        src: u8,
        ty: u8,
        pages: u64,
        misalign: bool,
        size: u64,
        count: u64,
        dest: u8,
    },
    Sel4 {
        src: u8,
        ty: u8,
        count: u64,
        dest: u8,
    },
    Mint {
        src: u8,
        dest: u8,
        rights: u8,
        badge: u64,
    },
    Delete(u8),
    Revoke(u8),
    Map {
        table: u8,
        src: u8,
        entry: u64,
        pages: u64,
        count: u64,
        write: bool,
        dest: u8,
    },
    Unmap {
        table: u8,
        mapping: u8,
    },
    Modify {
        mapping: u8,
        first: u64,
        pages: u64,
        write: bool,
    },
}

const TYPES: [CapType; 12] = [
    Ram,
    Frame,
    DevFrame,
    L2CNode,
    L1CNode,
    X86Ptable,
    X86Pdir,
    X86Pdpt,
    X86Pml4,
    Endpoint,
    Tcb,
    FrameMapping,
];
const SEL4: [(ObjectType, u32); 7] = [
    (ObjectType::Endpoint, 0),
    (ObjectType::Notification, 0),
    (ObjectType::Tcb, 0),
    (ObjectType::SmallPage, 0),
    (ObjectType::Untyped, 12),
    (ObjectType::CapTable, 4),
    (ObjectType::PageTable, 0),
];

fn op() -> impl Strategy<Value = Op> {
    let name = any::<u8>;
    prop_oneof![
        6 => (name(), any::<u8>(), 0u64..256, proptest::bool::weighted(0.05), 1u64..9, 1u64..4, name())
            .prop_map(|(src, ty, pages, misalign, size, count, dest)| Op::Retype { src, ty, pages, misalign, size, count, dest }),
        2 => (name(), 0u8..7, 1u64..4, name()).prop_map(|(src, ty, count, dest)| Op::Sel4 { src, ty, count, dest }),
        3 => (name(), name(), 0u8..16, prop_oneof![3 => Just(0u64), 1 => 1u64..4])
            .prop_map(|(src, dest, rights, badge)| Op::Mint { src, dest, rights, badge }),
        2 => name().prop_map(Op::Delete),
        1 => name().prop_map(Op::Revoke),
        4 => (name(), name(), 0u64..8, 0u64..4, 1u64..4, any::<bool>(), name())
            .prop_map(|(table, src, entry, pages, count, write, dest)| Op::Map { table, src, entry, pages, count, write, dest }),
        1 => (name(), name()).prop_map(|(table, mapping)| Op::Unmap { table, mapping }),
        1 => (name(), 0u64..3, 1u64..3, any::<bool>()).prop_map(|(mapping, first, pages, write)| Op::Modify { mapping, first, pages, write }),
    ]
}

/// 34 slot names: PhysAddr, RAM, root slots 3..=16, and slots 0..9 of the
/// L2 CNodes that may sit in root slots 3 and 4.
fn name(b: &Boot, n: u8) -> CapRef {
    match n {
        0 => b.phys,
        1 => b.ram,
        2..=15 => CapRef::l1(b.cspace, n as u32 + 1),
        _ => CapRef::l2(b.cspace, 3 + (n as u32 - 16) / 9, (n - 16) % 9),
    }
}

/// What a selector should find in its slot.
#[derive(Clone, Copy)]
enum Want {
    Empty,
    Any,
    Kind(fn(CapType) -> bool),
}

/// Turns a selector into a slot name: mostly one whose slot holds what the
/// operation wants (so that most operations get past the lookup), sometimes
/// any name at all (so that lookups fail too).
fn pick<M: Mdb>(c: &Caps<M>, b: &Boot, sel: u8, want: Want) -> CapRef {
    let raw = name(b, sel % 34);
    let phys_kept_out = match (c.get(raw), want) {
        (Ok(cap), Want::Kind(f)) => cap.ty == PhysAddr && !f(PhysAddr),
        _ => false,
    };
    if sel >= 232 && !phys_kept_out {
        return raw;
    }
    let fits = |r: CapRef| match (c.get(r), want) {
        (Err(CapError::EmptySlot { .. }), Want::Empty) => true,
        (Ok(_), Want::Any) => true,
        (Ok(cap), Want::Kind(f)) => f(cap.ty),
        _ => false,
    };
    let names: Vec<CapRef> = (0..34).map(|i| name(b, i)).filter(|&r| fits(r)).collect();
    if names.is_empty() {
        name(b, sel % 34)
    } else {
        names[sel as usize % names.len()]
    }
}

fn memory(t: CapType) -> bool {
    matches!(t, PhysAddr | Ram | Frame | DevFrame)
}

/// Revoking PhysAddr (or a copy) takes everything but the root CNode.
fn not_phys(t: CapType) -> bool {
    t != PhysAddr
}

fn flags(write: bool) -> Rights {
    if write {
        Rights::RW
    } else {
        Rights::READ
    }
}

/// The reference model: which object each object was derived from.
#[derive(Default)]
struct Model {
    parent: HashMap<Key, Key>,
}

impl Model {
    fn derived(&mut self, child: Key, parent: Key) {
        if child != parent {
            self.parent.insert(child, parent);
        }
    }

    /// `a` is a strict ancestor of `d` by recorded derivation.
    fn is_ancestor(&self, a: &Key, d: &Key) -> bool {
        let mut k = *d;
        for _ in 0..64 {
            match self.parent.get(&k) {
                Some(p) if p == a => return true,
                Some(p) => k = *p,
                None => return false,
            }
        }
        false
    }
}

fn overlaps(a: &Cap, b: &Cap) -> bool {
    a.base < b.end() && b.base < a.end()
}

fn live<M: Mdb>(c: &Caps<M>) -> Vec<(u32, Cap)> {
    c.live().map(|(id, cap)| (id, *cap)).collect()
}

/// Runs one operation on one system.
fn apply<M: Mdb>(c: &mut Caps<M>, b: &Boot, op: &Op) -> Result<(), CapError> {
    let empty = Want::Empty;
    let p = |c: &Caps<M>, sel, want| pick(c, b, sel, want);
    match *op {
        Op::Retype {
            src,
            ty,
            pages,
            misalign,
            size,
            count,
            dest,
        } => {
            let offset = pages * PAGE + if misalign { 16 } else { 0 };
            let (s, d) = (p(c, src, Want::Kind(memory)), p(c, dest, empty));
            let ty = retype_target(c, s, ty);
            c.retype(s, ty, offset, objsize(c, ty, size), count, d)
        }
        Op::Sel4 {
            src,
            ty,
            count,
            dest,
        } => {
            let (t, bits) = SEL4[ty as usize];
            let (s, d) = (
                p(c, src, Want::Kind(|t| matches!(t, Ram | DevFrame))),
                p(c, dest, empty),
            );
            c.retype_sel4(s, t, bits, count, d)
        }
        Op::Mint {
            src,
            dest,
            rights,
            badge,
        } => {
            let (s, d) = (p(c, src, Want::Any), p(c, dest, empty));
            c.mint(s, d, Rights::from_bits(rights), badge)
        }
        Op::Delete(r) => c.delete(p(c, r, Want::Kind(not_phys))),
        Op::Revoke(r) => c.revoke(p(c, r, Want::Kind(not_phys))),
        Op::Map {
            table,
            src,
            entry,
            pages,
            count,
            write,
            dest,
        } => {
            let t = p(c, table, Want::Kind(CapType::is_vnode));
            let s = p(c, src, Want::Kind(|t| t.mapping_type().is_some()));
            let d = p(c, dest, empty);
            c.map(t, s, entry, pages * PAGE, count, flags(write), d)
        }
        Op::Unmap { table, mapping } => {
            let t = p(c, table, Want::Kind(CapType::is_vnode));
            c.unmap(t, p(c, mapping, Want::Kind(CapType::is_mapping)))
        }
        Op::Modify {
            mapping,
            first,
            pages,
            write,
        } => {
            let m = p(c, mapping, Want::Kind(CapType::is_mapping));
            c.modify_flags(m, first, pages, flags(write))
        }
    }
}

/// Mostly a type the source may become, sometimes any type.
fn retype_target<M: Mdb>(c: &Caps<M>, src: CapRef, sel: u8) -> CapType {
    let allowed: Vec<CapType> = match c.get(src) {
        Ok(s) if sel < 224 => TYPES
            .into_iter()
            .filter(|&t| s.ty.can_retype_to(t))
            .collect(),
        _ => Vec::new(),
    };
    if allowed.is_empty() {
        TYPES[sel as usize % TYPES.len()]
    } else {
        allowed[sel as usize % allowed.len()]
    }
}

fn objsize<M: Mdb>(c: &Caps<M>, ty: CapType, pages: u64) -> u64 {
    match ty {
        Ram | Frame | DevFrame => pages * PAGE,
        L1CNode => 16 << 10,
        _ => ty.fixed_size(c.config()).unwrap_or(PAGE),
    }
}

/// Records in the model what a successful operation derived.
fn record(model: &mut Model, before: &[(u32, Cap)], after: &[(u32, Cap)], src: Option<Key>) {
    let old: HashMap<u32, Cap> = before.iter().copied().collect();
    for (id, cap) in after {
        if old.get(id) == Some(cap) {
            continue;
        }
        let parent = match cap.map {
            Some(m) => Some(Cap::new(m.target, m.target_base, m.target_size).key()),
            None => src,
        };
        if let Some(p) = parent {
            model.derived(cap.key(), p);
        }
    }
}

fn check_invariants<M: Mdb>(c: &Caps<M>, model: &Model) {
    let caps = live(c);
    let keys: Vec<Key> = caps.iter().map(|x| x.1.key()).collect();
    // No two live objects overlap unless one derives from the other.
    for (i, (_, a)) in caps.iter().enumerate() {
        for (j, (_, b)) in caps.iter().enumerate().skip(i + 1) {
            // Badged capabilities to one endpoint name the same object.
            let same_object = (a.ty, a.base, a.size) == (b.ty, b.base, b.size);
            if a.map.is_some() || b.map.is_some() || same_object || !overlaps(a, b) {
                continue;
            }
            assert!(
                model.is_ancestor(&keys[i], &keys[j]) || model.is_ancestor(&keys[j], &keys[i]),
                "unrelated live objects overlap: {a:?} and {b:?}"
            );
        }
    }
    // Nothing is mapped without a capability.
    let by_id: HashMap<u32, Cap> = caps.iter().copied().collect();
    for (table, e, pte) in c.ptes() {
        assert!(
            caps.iter().any(|(_, t)| t.ty.is_vnode() && t.base == table),
            "entry in a table nobody holds"
        );
        let m = by_id
            .get(&pte.mapping)
            .and_then(|m| m.map)
            .expect("entry without its Mapping capability");
        assert!(
            m.ptable == table && (m.entry as u64..m.entry as u64 + m.pte_count as u64).contains(&e)
        );
        let target = Cap::new(m.target, m.target_base, m.target_size).key();
        assert!(
            keys.contains(&target),
            "entry maps an object without a capability"
        );
        assert!(pte.phys >= m.target_base && pte.phys < m.target_base + m.target_size);
    }
    for (id, cap) in &caps {
        if let Some(m) = cap.map {
            let n = c.ptes().filter(|p| p.2.mapping == *id).count();
            assert_eq!(
                n, m.pte_count as usize,
                "a Mapping capability owns its entries"
            );
        }
    }
}

/// Brute-force mdb answers over the live capabilities, by address.
fn check_queries<M: Mdb>(c: &Caps<M>, model: &Model) {
    let caps = live(c);
    let mdb = c.mdb();
    for (id, cap) in &caps {
        let k = cap.key();
        let copies = caps.iter().any(|(j, x)| j != id && x.key() == k);
        let inside = |x: &Cap| x.base >= cap.base && x.end() <= cap.end();
        let covers = |x: &Cap| x.base <= cap.base && x.end() >= cap.end();
        let desc = caps.iter().any(|(_, x)| x.key() > k && inside(x));
        let anc = caps.iter().any(|(_, x)| x.key() < k && covers(x));
        assert_eq!(
            mdb.has_copies(*id),
            copies,
            "{}: copies of {cap:?}",
            mdb.name()
        );
        assert_eq!(
            mdb.has_descendants(*id),
            desc,
            "{}: descendants of {cap:?}",
            mdb.name()
        );
        assert_eq!(
            mdb.has_ancestors(*id),
            anc,
            "{}: ancestors of {cap:?}",
            mdb.name()
        );
        // Derivation implies the address relations the database reports.
        let by_model_d = caps.iter().any(|(_, x)| model.is_ancestor(&k, &x.key()));
        let by_model_a = caps.iter().any(|(_, x)| model.is_ancestor(&x.key(), &k));
        assert!(
            !by_model_d || desc,
            "a derived capability is not seen as a descendant"
        );
        assert!(!by_model_a || anc, "an ancestor is not seen as one");
    }
}

fn run(ops: &[Op]) {
    let config = Config::new(Arch::X86_64);
    let (mut tree, b) = Caps::<AaTree>::boot(config, RAM, 256).unwrap();
    let (mut list, _) = Caps::<List>::boot(config, RAM, 256).unwrap();
    let mut model = Model::default();
    let boot = live(&tree);
    model.derived(boot[2].1.key(), boot[1].1.key());
    model.derived(boot[0].1.key(), boot[1].1.key());
    for op in ops {
        let before = live(&tree);
        let (tree0, list0) = (tree.clone(), list.clone());
        let src_ref = match *op {
            Op::Retype { src, .. } => Some(pick(&tree, &b, src, Want::Kind(memory))),
            Op::Revoke(r) => Some(pick(&tree, &b, r, Want::Kind(not_phys))),
            Op::Sel4 { src, .. } => Some(pick(
                &tree,
                &b,
                src,
                Want::Kind(|t| matches!(t, Ram | DevFrame)),
            )),
            Op::Mint { src, .. } => Some(pick(&tree, &b, src, Want::Any)),
            _ => None,
        };
        let src = src_ref.and_then(|r| tree.get(r).ok());
        let region = retype_region(op, &tree, &b);
        let rt = apply(&mut tree, &b, op);
        let rl = apply(&mut list, &b, op);
        assert_eq!(rt, rl, "tree and list disagree on {op:?}");
        let after = live(&tree);
        assert_eq!(
            after,
            live(&list),
            "tree and list states differ after {op:?}"
        );
        tree.mdb().check();
        match rt {
            Err(_) => {
                assert!(
                    tree == tree0 && list == list0,
                    "a refused {op:?} changed the state"
                );
            }
            Ok(()) => record(&mut model, &before, &after, src.map(|s| s.key())),
        }
        if let (Some((base, end)), Some(s)) = (region, src) {
            if matches!(rt, Ok(()) | Err(CapError::RevokeFirst)) {
                let conflict = before.iter().any(|(_, x)| {
                    x.base < end
                        && base < x.end()
                        && x.key() != s.key()
                        && !model.is_ancestor(&x.key(), &s.key())
                });
                assert_eq!(rt.is_ok(), !conflict, "retype {op:?} against the model");
            }
        }
        if let (Op::Revoke(_), Ok(()), Some(s)) = (op, rt, src) {
            let k = s.key();
            // The revoked slot, resolved before: revoke may delete the path to it.
            let r = tree0.slot_id(src_ref.unwrap()).ok();
            for (id, x) in &after {
                assert!(
                    Some(*id) == r || x.key() != k,
                    "a copy survived revoke: {x:?}"
                );
                assert!(
                    !model.is_ancestor(&k, &x.key()),
                    "a descendant survived revoke: {x:?}"
                );
            }
        }
        check_invariants(&tree, &model);
        check_queries(&tree, &model);
        check_queries(&list, &model);
    }
}

/// The region an offset-mode retype asks for, computed before it runs.
fn retype_region<M: Mdb>(op: &Op, c: &Caps<M>, b: &Boot) -> Option<(u64, u64)> {
    let Op::Retype {
        src,
        ty,
        pages,
        misalign: false,
        size,
        count,
        ..
    } = *op
    else {
        return None;
    };
    let r = pick(c, b, src, Want::Kind(memory));
    let ty = retype_target(c, r, ty);
    let base = c.get(r).ok()?.base + pages * PAGE;
    Some((base, base + count * objsize(c, ty, size)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_operations_keep_the_invariants(ops in proptest::collection::vec(op(), 150..250)) {
        run(&ops);
    }
}
