//! Page tables that applications build (seed 001 §3.2): which page-table
//! level takes which capability type, and the table objects themselves.

use alloc::vec;
use alloc::vec::Vec;

use super::cap::Rights;
use super::mdb::CapId;
use super::types::{CapType, CapType::*, PT_ENTRIES};

/// What one entry of a page table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The next-level table of type `CapType` (pte_count 1, offset 0).
    Table(CapType),
    /// Pages of this many bytes of a Frame or DevFrame.
    Pages(u64),
}

const K4: u64 = 1 << 12;
const M2: u64 = 1 << 21;
const G1: u64 = 1 << 30;

/// What `table` accepts for `child`: the x86_64 and AArch64 4 KiB-granule
/// hierarchies. A PD takes a PT or a 2 MiB page, never a PDPT.
pub fn accepts(table: CapType, child: CapType) -> Option<Slot> {
    let frame = matches!(child, Frame | DevFrame);
    match (table, child) {
        (X86Pml4, X86Pdpt) | (X86Pdpt, X86Pdir) | (X86Pdir, X86Ptable) => Some(Slot::Table(child)),
        (Aarch64L0, Aarch64L1) | (Aarch64L1, Aarch64L2) | (Aarch64L2, Aarch64L3) => {
            Some(Slot::Table(child))
        }
        (X86Pdpt | Aarch64L1, _) if frame => Some(Slot::Pages(G1)),
        (X86Pdir | Aarch64L2, _) if frame => Some(Slot::Pages(M2)),
        (X86Ptable | Aarch64L3, _) if frame => Some(Slot::Pages(K4)),
        _ => None,
    }
}

/// A page-table entry: the physical address it points at, its flags, and the
/// Mapping capability that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pte {
    pub phys: u64,
    pub table: bool,
    pub flags: Rights,
    pub mapping: CapId,
}

/// A page-table object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VNode {
    pub ty: CapType,
    pub entries: Vec<Option<Pte>>,
}

impl VNode {
    pub fn new(ty: CapType) -> VNode {
        VNode {
            ty,
            entries: vec![None; PT_ENTRIES as usize],
        }
    }
}
