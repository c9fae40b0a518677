//! Reading the application's page tables as the MMU would: from the root,
//! entry by entry, to the leaves that map frames. Virtual address 0 is the
//! first byte of the window, and the root covers the whole window.

use std::collections::BTreeMap;
use std::ops::Range;

use retype_core::caps::system::Caps;
use retype_core::caps::types::{CapType, CapType::*};
use retype_core::caps::{AaTree, Rights};

/// One leaf entry: `size` bytes at window offset `va` map physical `phys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub va: u64,
    pub phys: u64,
    pub size: u64,
    pub flags: Rights,
}

impl Leaf {
    pub fn end(&self) -> u64 {
        self.va + self.size
    }
}

/// The bytes one entry of a `table` covers.
pub fn span(table: CapType) -> u64 {
    match table {
        X86Ptable | Aarch64L3 => 4 << 10,
        X86Pdir | Aarch64L2 => 2 << 20,
        X86Pdpt | Aarch64L1 => 1 << 30,
        X86Pml4 | Aarch64L0 => 512 << 30,
        t => unreachable!("{t} is not a page table"),
    }
}

/// Where each reachable table is: table base to the window offsets it
/// covers from (more than one when a table is mapped twice).
pub type Tables = BTreeMap<u64, Vec<u64>>;

/// Every table reachable from the root at `root`.
pub fn tables(caps: &Caps<AaTree>, root: u64) -> Tables {
    let mut out = Tables::new();
    let mut todo = vec![(root, 0u64)];
    while let Some((base, va)) = todo.pop() {
        out.entry(base).or_default().push(va);
        let v = caps.vnode(base).expect("reachable tables exist");
        let s = span(v.ty);
        for (i, e) in v.entries.iter().enumerate() {
            if let Some(p) = e.filter(|p| p.table) {
                todo.push((p.phys, va + i as u64 * s));
            }
        }
    }
    out
}

/// The leaves under the table at `base` (at window offset `va`) that lie
/// in `range`, in address order. As on x86, a leaf allows only what every
/// entry on the way allows (`mask`: the flags of the entries above).
pub fn leaves(
    caps: &Caps<AaTree>,
    base: u64,
    va: u64,
    mask: Rights,
    range: &Range<u64>,
    out: &mut Vec<Leaf>,
) {
    let v = caps.vnode(base).expect("reachable tables exist");
    let s = span(v.ty);
    let first = range.start.saturating_sub(va) / s;
    let last = (range.end - va).div_ceil(s).min(v.entries.len() as u64);
    for i in first..last {
        let at = va + i * s;
        match v.entries[i as usize] {
            Some(p) if p.table => leaves(caps, p.phys, at, mask.intersect(p.flags), range, out),
            Some(p) => out.push(Leaf {
                va: at,
                phys: p.phys,
                size: s,
                flags: mask.intersect(p.flags),
            }),
            None => {}
        }
    }
}
