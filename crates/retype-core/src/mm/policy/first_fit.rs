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
        let slab = slabs
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.fit(bits, n).map(|f| (i, f)));
        Choice {
            slab,
            failed_retypes: 0,
        }
    }
}
