//! Figure 3.1: the memory shadow page tables hold, a linked list or an
//! array per table ([`retype_vm::shadow`]), as the working set grows. The
//! working set is mapped as Barrelfish's library maps a frame: one mapping
//! per leaf table, 2 MiB of 4 KiB pages each. Counted, not timed: the
//! tables only record the mappings (no memory is mapped).

use retype_core::caps::CapRef;
use retype_core::caps::Rights;
use retype_vm::shadow::{Entry, Kind, Shadow};

/// One working-set size: bytes each kind of shadow table holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadowRow {
    pub working_set: u64,
    pub mappings: u64,
    pub list_bytes: usize,
    pub array_bytes: usize,
}

impl ShadowRow {
    /// One JSON object (the keys are the interface).
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"shadow\",\"working_set_bytes\":{},\"mappings\":{},\"list_bytes\":{},\"array_bytes\":{}}}",
            self.working_set, self.mappings, self.list_bytes, self.array_bytes
        )
    }
}

/// Bytes of address space one mapping covers: a whole leaf table.
pub const MAPPING: u64 = 2 << 20;

/// The shadow tables of a `working_set` (a multiple of [`MAPPING`]) mapped
/// from address 0, both kinds, four levels as x86-64's; `cap` names the
/// capabilities every entry records.
pub fn shadow_memory(working_set: u64, cap: CapRef) -> ShadowRow {
    let mappings = working_set.div_ceil(MAPPING);
    let mut bytes = [0; 2];
    for (k, kind) in [Kind::List, Kind::Array].into_iter().enumerate() {
        let mut s = Shadow::new(kind, 4);
        for m in 0..mappings {
            let e = Entry {
                mapping: cap,
                frame: cap,
                offset: m * MAPPING,
                pages: 512,
                rights: Rights::RW,
            };
            s.insert(m * MAPPING, e).expect("fresh tables, in reach");
        }
        bytes[k] = s.bytes();
    }
    ShadowRow {
        working_set,
        mappings,
        list_bytes: bytes[0],
        array_bytes: bytes[1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use retype_vm::{Options, Vm};

    /// The list grows with the mappings and stays small; the array is over
    /// ten times larger (the thesis: about a hundred, 100 kB against 10 MB
    /// at 4 GB) and under 1 % of the working set, both growing with it.
    #[test]
    fn the_array_holds_about_a_hundred_times_the_list() {
        let o = Options {
            ram: 4 << 20,
            dirty_bits: false,
            ..Options::default()
        };
        let vm = Vm::new(o).unwrap();
        let cap = CapRef::l1(vm.boot().cspace, 4);
        let small = shadow_memory(64 << 20, cap);
        let big = shadow_memory(4 << 30, cap);
        assert_eq!(big.mappings, 2048);
        assert!(big.list_bytes > small.list_bytes && big.array_bytes > small.array_bytes);
        let ratio = big.array_bytes as f64 / big.list_bytes as f64;
        assert!((10.0..1000.0).contains(&ratio), "{big:?}");
        assert!(
            big.array_bytes < (4 << 30) / 100,
            "{big:?}: over 1 % of the working set"
        );
    }
}
