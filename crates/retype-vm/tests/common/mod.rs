//! A space with one page table under the root, and frames to map.

#![allow(dead_code)]

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};
use retype_vm::{Options, Vm};

pub const MIB: u64 = 1 << 20;

/// Root CNode slot `i`.
pub fn slot(vm: &Vm, i: u32) -> CapRef {
    CapRef::l1(vm.boot().cspace, i)
}

/// A 16 MiB space whose root PD maps a PT (slot 4, from RAM at 8 MiB) at
/// entry 0, so window offsets 0..2 MiB are the PT's 512 pages.
pub fn space() -> Vm {
    space_with(Options {
        ram: 16 * MIB,
        ..Options::default()
    })
}

pub fn space_with(o: Options) -> Vm {
    let vm = Vm::new(o).expect("a space");
    {
        let mut s = vm.lock();
        let b = s.boot();
        let (pt, m) = (CapRef::l1(b.cspace, 4), CapRef::l1(b.cspace, 5));
        s.retype(b.ram, CapType::X86Ptable, 8 * MIB, PAGE, 1, pt)
            .unwrap();
        let root = s.root();
        s.map(root, pt, 0, 0, 1, Rights::RW, m).unwrap();
    }
    vm
}

/// A frame of `pages` pages at physical `phys` in slot `i`.
pub fn frame(vm: &Vm, i: u32, phys: u64, pages: u64) -> CapRef {
    let f = slot(vm, i);
    vm.lock()
        .retype(vm.boot().ram, CapType::Frame, phys, pages * PAGE, 1, f)
        .unwrap();
    f
}

/// The `KernelPageSize` in KiB of the mapping that holds `addr`, from
/// /proc/self/smaps.
pub fn kernel_page_kib(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
        }
        if inside {
            if let Some(v) = line.strip_prefix("KernelPageSize:") {
                return v.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}
