//! Scenario tests of the invocations; every refused invocation is checked
//! to leave the whole system unchanged.

use super::cap::Rights;
use super::mdb::{BitfieldTree, NoParentTree, PackedTree};
use super::system::{Boot, Caps};
use super::types::{CapType::*, PAGE};
use super::*;
use crate::objects::{Arch, Config, ObjectType};
use crate::untyped::RetypeError;

const X64: Config = Config::new(Arch::X86_64);
const MIB: u64 = 1 << 20;
const K16: u64 = 16 << 10;

fn boot<M: Mdb>() -> (Caps<M>, Boot) {
    Caps::boot(X64, 8 * MIB, 256).unwrap()
}

fn r(b: &Boot, slot: u32) -> CapRef {
    CapRef::l1(b.cspace, slot)
}

/// Asserts that `op` fails with `err` and changes nothing.
fn refused<M: Mdb + Clone + PartialEq>(
    caps: &mut Caps<M>,
    err: CapError,
    op: impl FnOnce(&mut Caps<M>) -> Result<(), CapError>,
) {
    let before = caps.clone();
    assert_eq!(op(caps), Err(err));
    assert!(
        *caps == before,
        "a refused invocation ({err}) changed the state"
    );
}

/// Root slot 3: an L2 CNode; root slot 4: a 64 KiB RAM at 1 MiB.
fn with_l2<M: Mdb>() -> (Caps<M>, Boot) {
    let (mut c, b) = boot::<M>();
    c.retype(b.ram, L2CNode, K16, K16, 1, r(&b, 3)).unwrap();
    c.retype(b.ram, Ram, MIB, 64 << 10, 1, r(&b, 4)).unwrap();
    (c, b)
}

#[test]
fn boot_layout_and_addressing() {
    let (c, b) = with_l2::<AaTree>();
    assert_eq!(c.get(b.root).unwrap().ty, L1CNode);
    assert_eq!(c.get(b.phys).unwrap().size, 16 * MIB);
    assert_eq!(c.get(b.ram).unwrap().size, 8 * MIB - K16);
    assert_eq!(c.cspace_of(b.root), Ok(b.cspace));
    let l2 = CapRef::l2(b.cspace, 3, 7);
    assert_eq!(c.get(l2), Err(CapError::EmptySlot { addr: 0x307 }));
    assert_eq!(
        c.get(CapRef::l2(b.cspace, 4, 0)),
        Err(CapError::NotAnL2CNode {
            addr: 0x400,
            found: Ram
        })
    );
    assert_eq!(
        c.get(CapRef::l2(b.cspace, 5, 0)),
        Err(CapError::EmptyL1Slot { addr: 0x500 })
    );
    assert_eq!(
        c.get(CapRef::l1(b.cspace, 256)),
        Err(CapError::AddressOutOfRange { addr: 256 << 8 })
    );
    let ids: std::vec::Vec<_> = c.live().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 5);
    assert!(c.mdb().has_ancestors(c.slot_id(b.ram).unwrap()));
    assert!(c.mdb().has_descendants(c.slot_id(b.ram).unwrap()));
}

fn bad_invocations_change_nothing<M: Mdb + Clone + PartialEq>() {
    let (mut c, b) = with_l2::<M>();
    let l2 = |s| CapRef::l2(b.cspace, 3, s);
    // Frames at 1 MiB (slot 0) and a page table (slot 1).
    c.retype(r(&b, 4), Frame, 0, 4 * PAGE, 1, l2(0)).unwrap();
    c.retype(b.ram, X86Ptable, 2 * MIB, PAGE, 1, l2(1)).unwrap();
    c.mint(l2(0), l2(2), Rights::READ, 0).unwrap();
    // Overlapping retype: the page table's bytes, then the frame's.
    refused(&mut c, CapError::RevokeFirst, |c| {
        c.retype(b.ram, Frame, 2 * MIB, PAGE, 1, l2(9))
    });
    refused(&mut c, CapError::RevokeFirst, |c| {
        c.retype(r(&b, 4), Ram, PAGE, PAGE, 1, l2(9))
    });
    // Wrong types.
    refused(
        &mut c,
        CapError::InvalidRetype {
            from: Frame,
            to: L2CNode,
        },
        |c| c.retype(l2(0), L2CNode, 0, K16, 1, l2(9)),
    );
    refused(&mut c, CapError::RetypeMappingExplicit, |c| {
        c.retype(l2(0), FrameMapping, 0, 1, 1, l2(9))
    });
    refused(&mut c, CapError::NotAPageTable(Frame), |c| {
        c.map(l2(0), l2(0), 0, 0, 1, Rights::READ, l2(9))
    });
    refused(
        &mut c,
        CapError::WrongType {
            op: "modify_flags",
            found: Frame,
        },
        |c| c.modify_flags(l2(0), 0, 1, Rights::READ),
    );
    refused(
        &mut c,
        CapError::WrongType {
            op: "seL4 retype",
            found: Frame,
        },
        |c| c.retype_sel4(l2(0), ObjectType::Endpoint, 0, 1, l2(9)),
    );
    refused(&mut c, CapError::NotBadgeable(Frame), |c| {
        c.mint(l2(0), l2(9), Rights::ALL, 5)
    });
    // Missing rights: the read-only copy cannot be mapped writable.
    refused(
        &mut c,
        CapError::MissingRights {
            needed: Rights::RW,
            held: Rights::READ,
        },
        |c| c.map(l2(1), l2(2), 0, 0, 1, Rights::RW, l2(9)),
    );
    // Bad arguments.
    refused(&mut c, CapError::InvalidSize { size: 100 }, |c| {
        c.retype(b.ram, Frame, 3 * MIB, 100, 1, l2(9))
    });
    refused(&mut c, CapError::InvalidOffset { offset: 12 }, |c| {
        c.retype(b.ram, Frame, 12, PAGE, 1, l2(9))
    });
    refused(
        &mut c,
        CapError::InvalidCount {
            count: 0,
            max: 2044,
        },
        |c| c.retype(b.ram, Frame, 3 * MIB, PAGE, 0, l2(9)),
    );
    refused(
        &mut c,
        CapError::InvalidOffset {
            offset: 8 * MIB - K16,
        },
        |c| c.retype(b.ram, Frame, 8 * MIB - K16, PAGE, 1, l2(9)),
    );
    refused(&mut c, CapError::SlotInUse { addr: 0x300 }, |c| {
        c.retype(b.ram, Frame, 3 * MIB, PAGE, 1, l2(0))
    });
    refused(
        &mut c,
        CapError::SlotsInvalid {
            addr: 0x3ff,
            count: 2,
        },
        |c| c.retype(b.ram, Frame, 3 * MIB, PAGE, 2, l2(255)),
    );
    refused(
        &mut c,
        CapError::InvalidMapping {
            table: X86Ptable,
            child: X86Ptable,
        },
        |c| c.map(l2(1), l2(1), 0, 0, 1, Rights::READ, l2(9)),
    );
    refused(
        &mut c,
        CapError::InvalidEntry {
            entry: 510,
            count: 4,
        },
        |c| c.map(l2(1), l2(0), 510, 0, 4, Rights::READ, l2(9)),
    );
    refused(&mut c, CapError::InvalidOffset { offset: 2 * PAGE }, |c| {
        c.map(l2(1), l2(0), 0, 2 * PAGE, 3, Rights::READ, l2(9))
    });
    c.map(l2(1), l2(0), 0, 0, 4, Rights::RW, l2(3)).unwrap();
    refused(&mut c, CapError::EntryInUse { entry: 3 }, |c| {
        c.map(l2(1), l2(2), 3, 0, 1, Rights::READ, l2(9))
    });
    refused(
        &mut c,
        CapError::WrongType {
            op: "copy",
            found: FrameMapping,
        },
        |c| c.copy(l2(3), l2(9)),
    );
    refused(&mut c, CapError::InvalidEntry { entry: 2, count: 3 }, |c| {
        c.modify_flags(l2(3), 2, 3, Rights::READ)
    });
    c.map(l2(1), l2(2), 200, 0, 1, Rights::READ, l2(4)).unwrap();
    refused(
        &mut c,
        CapError::MissingRights {
            needed: Rights::RW,
            held: Rights::READ,
        },
        |c| c.modify_flags(l2(4), 0, 1, Rights::RW),
    );
    // Stale references.
    c.delete(l2(2)).unwrap();
    refused(&mut c, CapError::EmptySlot { addr: 0x302 }, |c| {
        c.copy(l2(2), l2(9))
    });
    refused(&mut c, CapError::EmptySlot { addr: 0x302 }, |c| {
        c.revoke(l2(2))
    });
    c.delete(r(&b, 3)).unwrap();
    refused(&mut c, CapError::EmptyL1Slot { addr: 0x300 }, |c| {
        c.delete(l2(0))
    });
    assert!(
        c.ptes().next().is_none(),
        "deleting the CNode deleted the frame, hence its mapping"
    );
}

fn page_tables_map_unmap_modify_and_revoke<M: Mdb + Clone + PartialEq>() {
    let (mut c, b) = with_l2::<M>();
    let l2 = |s| CapRef::l2(b.cspace, 3, s);
    c.retype(b.ram, X86Pml4, 2 * MIB, PAGE, 1, l2(0)).unwrap();
    c.retype(b.ram, X86Pdpt, 2 * MIB + PAGE, PAGE, 1, l2(1))
        .unwrap();
    c.retype(b.ram, X86Pdir, 2 * MIB + 2 * PAGE, PAGE, 1, l2(2))
        .unwrap();
    c.retype(b.ram, X86Ptable, 2 * MIB + 3 * PAGE, PAGE, 1, l2(3))
        .unwrap();
    c.map(l2(0), l2(1), 0, 0, 1, Rights::RW, l2(10)).unwrap();
    c.map(l2(1), l2(2), 0, 0, 1, Rights::RW, l2(11)).unwrap();
    c.map(l2(2), l2(3), 0, 0, 1, Rights::RW, l2(12)).unwrap();
    refused(
        &mut c,
        CapError::InvalidMapping {
            table: X86Pdir,
            child: X86Pdpt,
        },
        |c| c.map(l2(2), l2(1), 1, 0, 1, Rights::RW, l2(13)),
    );
    // A 64 KiB frame mapped as 4 KiB pages twice, once through a copy.
    c.retype(r(&b, 4), Frame, 0, 16 * PAGE, 1, l2(4)).unwrap();
    c.copy(l2(4), l2(5)).unwrap();
    c.map(l2(3), l2(4), 0, 0, 16, Rights::RW, l2(20)).unwrap();
    c.map(l2(3), l2(5), 100, 4 * PAGE, 2, Rights::READ, l2(21))
        .unwrap();
    assert_eq!(c.ptes().filter(|p| !p.2.table).count(), 18);
    // A walk reads the same entries through `vnode`, table by table.
    let pt = c.vnode(2 * MIB + 3 * PAGE).expect("the PT object exists");
    assert_eq!(pt.ty, X86Ptable);
    assert_eq!(pt.entries[100].map(|p| p.phys), Some(MIB + 4 * PAGE));
    assert_eq!(pt.entries[16], None);
    let pd = c.vnode(2 * MIB + 2 * PAGE).expect("the PD object exists");
    assert_eq!(
        pd.entries[0].map(|p| (p.phys, p.table)),
        Some((2 * MIB + 3 * PAGE, true))
    );
    assert!(c.vnode(MIB).is_none(), "a frame is not a page table");
    c.modify_flags(l2(20), 1, 2, Rights::READ).unwrap();
    let flags: std::vec::Vec<_> = c
        .ptes()
        .filter(|p| !p.2.table)
        .take(4)
        .map(|p| p.2.flags)
        .collect();
    assert_eq!(flags, [Rights::RW, Rights::READ, Rights::READ, Rights::RW]);
    refused(&mut c, CapError::MappingNotInTable, |c| {
        c.unmap(l2(2), l2(21))
    });
    c.unmap(l2(3), l2(21)).unwrap();
    assert_eq!(c.ptes().filter(|p| !p.2.table).count(), 16);
    // Revoking the RAM the frame came from removes the frame and its mappings.
    c.map(l2(3), l2(5), 100, 4 * PAGE, 2, Rights::READ, l2(21))
        .unwrap();
    c.revoke(r(&b, 4)).unwrap();
    assert_eq!(c.get(l2(4)), Err(CapError::EmptySlot { addr: 0x304 }));
    assert_eq!(
        c.ptes().filter(|p| !p.2.table).count(),
        0,
        "no mapping outlives the frame"
    );
    assert_eq!(c.ptes().count(), 3, "the table hierarchy stays");
    // The memory went back to the parent: the same frame can be made again.
    c.retype(r(&b, 4), Frame, 0, 16 * PAGE, 1, l2(4)).unwrap();
    // Deleting a middle table drops its entries and its own mapping.
    c.delete(l2(2)).unwrap();
    assert_eq!(c.ptes().count(), 1, "only PML4 -> PDPT remains");
    assert!(
        c.vnode(2 * MIB + 2 * PAGE).is_none(),
        "the deleted PD is gone"
    );
    assert_eq!(c.get(l2(11)), Err(CapError::EmptySlot { addr: 0x30b }));
    assert_eq!(c.get(l2(12)), Err(CapError::EmptySlot { addr: 0x30c }));
}

#[test]
fn large_pages_go_in_page_directories_only() {
    let (mut c, b) = boot::<List>();
    let s = |i| r(&b, i);
    c.retype(b.ram, X86Pdir, MIB, PAGE, 1, s(3)).unwrap();
    c.retype(b.ram, X86Ptable, MIB + PAGE, PAGE, 1, s(4))
        .unwrap();
    c.retype(b.ram, Frame, 2 * MIB, 2 * MIB, 1, s(5)).unwrap();
    c.map(s(3), s(5), 7, 0, 1, Rights::RW, s(6)).unwrap();
    assert_eq!(c.ptes().next().map(|p| p.2.phys), Some(2 * MIB));
    refused(&mut c, CapError::InvalidOffset { offset: PAGE }, |c| {
        c.map(s(3), s(5), 8, PAGE, 1, Rights::RW, s(7))
    });
    c.map(s(4), s(5), 0, PAGE, 511, Rights::READ, s(7)).unwrap();
    c.delete(s(5)).unwrap();
    assert_eq!(c.ptes().count(), 0, "the last frame cap took both mappings");
}

fn cnode_cascades_cross_cycles<M: Mdb>() {
    let (mut c, b) = boot::<M>();
    // Two L2 CNodes A (root slot 3) and B (root slot 4) from the RAM in root
    // slot 5, each holding copies of the other's capability, A a frame.
    c.retype(b.ram, Ram, MIB, 64 << 10, 1, r(&b, 5)).unwrap();
    c.retype(r(&b, 5), L2CNode, 0, K16, 1, r(&b, 3)).unwrap();
    c.retype(r(&b, 5), L2CNode, K16, K16, 1, r(&b, 4)).unwrap();
    let a = |s| CapRef::l2(b.cspace, 3, s);
    let bb = |s| CapRef::l2(b.cspace, 4, s);
    c.copy(r(&b, 4), a(0)).unwrap();
    c.copy(r(&b, 3), bb(0)).unwrap();
    c.copy(r(&b, 3), bb(1)).unwrap();
    c.retype(b.ram, Frame, 2 * MIB, PAGE, 1, a(1)).unwrap();
    let before = c.live().count();
    c.delete(r(&b, 4)).unwrap();
    assert_eq!(c.live().count(), before - 1, "B has a copy in A: not final");
    // Revoking the RAM deletes A's copies one by one; the last one empties A,
    // which holds B's last capability, so B is emptied too, and B held
    // copies of A that the cascade finds already gone.
    c.revoke(r(&b, 5)).unwrap();
    assert_eq!(
        c.live().count(),
        4,
        "root, PhysAddr, RAM and the revoked RAM remain"
    );
    assert!(!c.mdb().has_descendants(c.slot_id(r(&b, 5)).unwrap()));
    // The CNodes' memory is free again.
    c.retype(r(&b, 5), Frame, 0, 2 * K16, 1, r(&b, 3)).unwrap();
}

#[test]
fn deleting_a_cspace_root_makes_its_references_stale() {
    let (mut c, b) = boot::<AaTree>();
    c.retype(b.ram, L1CNode, MIB, K16, 1, r(&b, 3)).unwrap();
    let cs = c.cspace_of(r(&b, 3)).unwrap();
    c.retype(b.ram, Endpoint, 2 * MIB, 16, 1, CapRef::l1(cs, 0))
        .unwrap();
    c.mint(CapRef::l1(cs, 0), CapRef::l1(cs, 1), Rights::ALL, 7)
        .unwrap();
    refused(&mut c, CapError::AlreadyBadged, |c| {
        c.mint(CapRef::l1(cs, 1), CapRef::l1(cs, 2), Rights::ALL, 8)
    });
    c.delete(r(&b, 3)).unwrap();
    refused(&mut c, CapError::StaleCSpace, |c| {
        c.delete(CapRef::l1(cs, 0))
    });
    assert_eq!(c.live().count(), 3, "the endpoints went with their CNode");
}

#[test]
fn memory_comes_back_as_a_fresh_region_when_nothing_covers_it() {
    let (mut c, b) = boot::<AaTree>();
    c.retype(b.ram, Frame, MIB, 4 * PAGE, 1, r(&b, 3)).unwrap();
    c.delete(b.ram).unwrap();
    c.delete(b.phys).unwrap();
    assert!(
        c.take_reclaimed().is_empty(),
        "the root CNode and the frame remain"
    );
    c.delete(r(&b, 3)).unwrap();
    assert_eq!(c.take_reclaimed(), [(MIB, 4 * PAGE)]);
}

/// Test vectors V1, V4 and V5 (docs/design.md#test-vectors) through capabilities: the watermark
/// mode reuses `untyped::Untyped`; memory comes back only by reset.
fn sel4_watermark_mode<M: Mdb + Clone + PartialEq>() {
    let (mut c, b) = boot::<M>();
    let s = |i| r(&b, i);
    c.retype(b.ram, Ram, MIB, PAGE, 1, s(3)).unwrap();
    c.retype_sel4(s(3), ObjectType::Endpoint, 0, 1, s(4))
        .unwrap();
    c.retype_sel4(s(3), ObjectType::Notification, 0, 1, s(5))
        .unwrap();
    assert_eq!(c.get(s(5)).unwrap().base, MIB + 0x20);
    c.retype_sel4(s(3), ObjectType::CapTable, 4, 1, s(6))
        .unwrap();
    assert_eq!(c.get(s(6)).unwrap().base, MIB + 0x200);
    c.retype_sel4(s(3), ObjectType::Tcb, 0, 1, s(7)).unwrap();
    assert_eq!(c.get(s(7)).unwrap().base, MIB + 0x800);
    refused(
        &mut c,
        CapError::Sel4(RetypeError::NotEnoughMemory { memory_left: 0 }),
        |c| c.retype_sel4(s(3), ObjectType::Endpoint, 0, 1, s(8)),
    );
    refused(&mut c, CapError::Sel4(RetypeError::DeleteFirst), |c| {
        c.retype_sel4(s(3), ObjectType::Endpoint, 0, 1, s(4))
    });
    // V4: a copy of an object cap keeps the untyped from resetting.
    c.copy(s(7), s(8)).unwrap();
    for i in 4..8 {
        c.delete(s(i)).unwrap();
    }
    refused(
        &mut c,
        CapError::Sel4(RetypeError::NotEnoughMemory { memory_left: 0 }),
        |c| c.retype_sel4(s(3), ObjectType::Endpoint, 0, 1, s(4)),
    );
    c.delete(s(8)).unwrap();
    c.retype_sel4(s(3), ObjectType::Endpoint, 0, 1, s(4))
        .unwrap();
    assert_eq!(c.get(s(4)).unwrap().base, MIB, "reset to offset 0");
    // V5: revoke frees everything; a frame then fits.
    c.revoke(s(3)).unwrap();
    c.retype_sel4(s(3), ObjectType::SmallPage, 0, 1, s(4))
        .unwrap();
    assert_eq!(c.get(s(4)).unwrap().ty, Frame);
    // The offset mode sees the watermark's objects, and the reverse.
    refused(&mut c, CapError::RevokeFirst, |c| {
        c.retype(s(3), Frame, 0, PAGE, 1, s(5))
    });
    c.retype(b.ram, Ram, 2 * MIB, 2 * PAGE, 1, s(9)).unwrap();
    c.retype(s(9), Frame, 0, PAGE, 1, s(10)).unwrap();
    // The watermark of s(9) is fresh, so it would start at 0, over the frame.
    refused(&mut c, CapError::RevokeFirst, |c| {
        c.retype_sel4(s(9), ObjectType::SmallPage, 0, 2, s(11))
    });
    c.revoke(s(9)).unwrap();
    c.retype_sel4(s(9), ObjectType::SmallPage, 0, 2, s(11))
        .unwrap();
    assert_eq!(c.get(s(12)).unwrap().base, 2 * MIB + PAGE);
}

/// Runs each scenario above, generic over the mapping database, on every
/// implementation: `caps::tests::SCENARIO::IMPLEMENTATION`.
macro_rules! on_every_mdb {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;

            #[test]
            fn tree() {
                super::$scenario::<AaTree>();
            }

            #[test]
            fn tree_noparent() {
                super::$scenario::<NoParentTree>();
            }

            #[test]
            fn tree_packed() {
                super::$scenario::<PackedTree>();
            }

            #[test]
            fn tree_bitfield() {
                super::$scenario::<BitfieldTree>();
            }

            #[test]
            fn list() {
                super::$scenario::<List>();
            }
        }
    )*};
}

on_every_mdb!(
    bad_invocations_change_nothing,
    page_tables_map_unmap_modify_and_revoke,
    cnode_cascades_cross_cycles,
    sel4_watermark_mode,
);

/// A RAM, Frame or Endpoint capability over pages `[base, base + pages)`
/// of the memory at 1 MiB (an endpoint of any size: only its key matters).
fn over_pages(ty: u8, base: u64, pages: u64) -> cap::Cap {
    let ty = [Ram, Frame, Endpoint][ty as usize];
    cap::Cap::new(ty, MIB + base * PAGE, pages * PAGE)
}

proptest::proptest! {
    /// `in_the_way` is `descendant_overlaps` asked of one capability: some
    /// capability of the database is in the way exactly when the database
    /// says a descendant overlaps (the census of a retype relies on it).
    #[test]
    fn in_the_way_is_descendant_overlaps_one_capability_at_a_time(
        held in proptest::collection::vec((0u8..3, 0u64..8, 1u64..5), 0..10),
        k in (0u8..3, 0u64..8, 1u64..5),
        q in (0u64..8, 1u64..5),
    ) {
        let (mut c, b) = boot::<AaTree>();
        for (i, &(ty, base, pages)) in held.iter().enumerate() {
            let cap = over_pages(ty, base, pages);
            c.install_at(r(&b, 8 + i as u32), cap).unwrap();
        }
        let k = over_pages(k.0, k.1, k.2).key();
        let (base, len) = (MIB + q.0 * PAGE, q.1 * PAGE);
        let one_by_one = c.live().any(|(_, x)| system::in_the_way(&x.key(), &k, base, len));
        proptest::prop_assert_eq!(c.descendant_overlaps(&k, base, len), one_by_one);
    }
}
