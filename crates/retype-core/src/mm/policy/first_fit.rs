//! First fit: the lowest-numbered slab where the objects fit.

use super::{Choice, Policy};
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug, Default, Hash)]
pub struct FirstFit;

impl Policy for FirstFit {
    #[inline]
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        Choice::at(slabs.first_fitting(0, slabs.len(), bits, n))
    }
}
