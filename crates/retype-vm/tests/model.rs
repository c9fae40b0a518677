//! On random sequences of map, unmap, protect, revoke, delete and page-table
//! moves, every read and write of every page the tables can reach succeeds or
//! faults exactly as the simulated page tables of retype-core say, and reads
//! the physical page they say.
//!
//! The expectation is computed from `Caps::ptes` alone (not from the walk
//! the space uses): a page at window offset p is PD entry p / 2 MiB, then
//! PT entry p / 4 KiB % 512; it is readable when the leaf and the PD entry
//! both allow READ or WRITE (x86 cannot write without reading) and writable
//! when both allow WRITE. Probes go through the kernel (see `Probe`): no
//! signal handler is involved.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};
use retype_vm::{Probe, Vm, VmError};

const FRAMES: u32 = 4;
const FRAME_PAGES: u64 = 4;
/// PD entries and PT entries the operations use (and the probes cover).
const PD_ENTRIES: u64 = 3;
const PT_ENTRIES: u64 = 10;

#[derive(Clone, Debug)]
enum Op {
    Map {
        pt: u32,
        frame: u32,
        entry: u64,
        offset: u64,
        count: u64,
        flags: u8,
        slot: u32,
    },
    Unmap {
        pt: u32,
        slot: u32,
    },
    Protect {
        slot: u32,
        first: u64,
        pages: u64,
        flags: u8,
    },
    Revoke {
        frame: u32,
    },
    Delete {
        frame: u32,
    },
    Remake {
        frame: u32,
    },
    MapTable {
        pt: u32,
        entry: u64,
        flags: u8,
    },
    UnmapTable {
        pt: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let flags = 0u8..4;
    prop_oneof![
        4 => (0..2u32, 0..FRAMES, 0..8u64, 0..FRAME_PAGES, 1..4u64, flags.clone(), 0..8u32)
            .prop_map(|(pt, frame, entry, offset, count, flags, slot)| Op::Map {
                pt, frame, entry, offset, count, flags, slot
            }),
        2 => (0..2u32, 0..8u32).prop_map(|(pt, slot)| Op::Unmap { pt, slot }),
        3 => (0..8u32, 0..4u64, 1..4u64, flags.clone())
            .prop_map(|(slot, first, pages, flags)| Op::Protect { slot, first, pages, flags }),
        1 => (0..FRAMES).prop_map(|frame| Op::Revoke { frame }),
        1 => (0..FRAMES).prop_map(|frame| Op::Delete { frame }),
        1 => (0..FRAMES).prop_map(|frame| Op::Remake { frame }),
        1 => (0..2u32, 0..PD_ENTRIES, 1..4u8)
            .prop_map(|(pt, entry, flags)| Op::MapTable { pt, entry, flags }),
        1 => (0..2u32).prop_map(|pt| Op::UnmapTable { pt }),
    ]
}

/// Slots: PTs 4 and 6 (their PD mappings 5 and 7), frames 10.., mappings 20...
struct Slots(retype_core::caps::CSpace);

impl Slots {
    fn at(&self, i: u32) -> CapRef {
        CapRef::l1(self.0, i)
    }
    fn pt(&self, pt: u32) -> CapRef {
        self.at(4 + 2 * pt)
    }
    fn pt_mapping(&self, pt: u32) -> CapRef {
        self.at(5 + 2 * pt)
    }
    fn frame(&self, f: u32) -> CapRef {
        self.at(10 + f)
    }
    fn mapping(&self, m: u32) -> CapRef {
        self.at(20 + m)
    }
}

fn frame_phys(f: u32) -> u64 {
    f as u64 * FRAME_PAGES * PAGE
}

fn setup() -> (Vm, Slots) {
    let vm = space();
    let s = Slots(vm.boot().cspace);
    let ram = vm.boot().ram;
    vm.lock()
        .retype(ram, CapType::X86Ptable, 8 * MIB + PAGE, PAGE, 1, s.pt(1))
        .unwrap();
    for f in 0..FRAMES {
        remake(&vm, &s, f).unwrap();
    }
    // Every physical page of the frames holds its own page number.
    for page in 0..FRAMES as u64 * FRAME_PAGES {
        let stamp = page.to_ne_bytes();
        vm.lock().memory().write(page * PAGE, &stamp).unwrap();
    }
    (vm, s)
}

fn remake(vm: &Vm, s: &Slots, f: u32) -> Result<(), VmError> {
    let ram = vm.boot().ram;
    let size = FRAME_PAGES * PAGE;
    vm.lock()
        .retype(ram, CapType::Frame, frame_phys(f), size, 1, s.frame(f))
}

fn flags(f: u8) -> Rights {
    [Rights::NONE, Rights::READ, Rights::WRITE, Rights::RW][f as usize]
}

fn apply(vm: &Vm, s: &Slots, op: &Op) -> Result<(), VmError> {
    let root = vm.lock().root();
    let mut v = vm.lock();
    match *op {
        Op::Map {
            pt,
            frame,
            entry,
            offset,
            count,
            flags: f,
            slot,
        } => v.map(
            s.pt(pt),
            s.frame(frame),
            entry,
            offset * PAGE,
            count,
            flags(f),
            s.mapping(slot),
        ),
        Op::Unmap { pt, slot } => v.unmap(s.pt(pt), s.mapping(slot)),
        Op::Protect {
            slot,
            first,
            pages,
            flags: f,
        } => v.modify_flags(s.mapping(slot), first, pages, flags(f)),
        Op::Revoke { frame } => v.revoke(s.frame(frame)),
        Op::Delete { frame } => v.delete(s.frame(frame)),
        Op::Remake { frame } => {
            drop(v);
            remake(vm, s, frame)
        }
        Op::MapTable {
            pt,
            entry,
            flags: f,
        } => v.map(root, s.pt(pt), entry, 0, 1, flags(f), s.pt_mapping(pt)),
        Op::UnmapTable { pt } => v.unmap(root, s.pt_mapping(pt)),
    }
}

/// (readable, writable, physical page) of each probed page, from the
/// simulated page tables.
fn expected(vm: &Vm) -> BTreeMap<u64, Option<(bool, bool, u64)>> {
    let v = vm.lock();
    let caps = v.caps();
    let root = caps.get(v.root()).unwrap().base;
    let ptes: BTreeMap<(u64, u64), _> = caps.ptes().map(|(t, e, p)| ((t, e), p)).collect();
    let mut out = BTreeMap::new();
    for pd in 0..PD_ENTRIES {
        for pt in 0..PT_ENTRIES {
            let page = pd * 512 + pt;
            let leaf = ptes.get(&(root, pd)).and_then(|top| {
                assert!(top.table);
                let l = ptes.get(&(top.phys, pt))?;
                Some((top.flags.intersect(l.flags), l.phys))
            });
            out.insert(
                page,
                leaf.map(|(f, phys)| {
                    let w = f.contains(Rights::WRITE);
                    (w || f.contains(Rights::READ), w, phys / PAGE)
                }),
            );
        }
    }
    out
}

fn check(vm: &Vm, p: &Probe, history: &[Op]) {
    for (page, want) in expected(vm) {
        let at = vm.base() + (page * PAGE) as usize;
        let read = p.read(at);
        let (readable, writable, phys) = want.unwrap_or((false, false, 0));
        let ctx = || format!("page {page}: expected {want:?} after {history:#?}");
        assert_eq!(read.is_some(), readable, "read; {}", ctx());
        if let Some(v) = read {
            assert_eq!(v, phys, "the page shows another frame; {}", ctx());
        }
        assert_eq!(p.write(at, phys), writable, "write; {}", ctx());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_access_faults_exactly_as_the_page_tables_say(ops in proptest::collection::vec(op(), 1..24)) {
        let (vm, s) = setup();
        let p = Probe::new().unwrap();
        check(&vm, &p, &[]);
        for (i, op) in ops.iter().enumerate() {
            match apply(&vm, &s, op) {
                Ok(()) | Err(VmError::Cap(_)) => {}
                Err(e) => panic!("{op:?} failed in the OS: {e}"),
            }
            check(&vm, &p, &ops[..=i]);
        }
    }
}
