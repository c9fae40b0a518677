//! First fit: the lowest-numbered slab where the objects fit.

use super::{Choice, Policy};
use crate::mm::slab::Slab;

#[derive(Clone, Debug, Default)]
pub struct FirstFit;

impl Policy for FirstFit {
    fn name(&self) -> &'static str {
        "first-fit"
    }

    fn choose(&mut self, slabs: &[Slab], bits: u32, n: u64) -> Choice {
        let need = n << bits;
        let slab = slabs
            .iter()
            .position(|s| s.leftover(bits, need).is_some())
            .map(|i| (i, slabs[i].fit(bits, n).expect("the scan found it fits")));
        Choice {
            slab,
            failed_retypes: 0,
        }
    }
}
