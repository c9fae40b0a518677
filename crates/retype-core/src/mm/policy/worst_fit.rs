//! Worst fit: the slab with the most space left after the placement, so that
//! what remains is as usable as possible; ties to the lowest index.

use super::{Choice, Policy};
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug, Default, Hash)]
pub struct WorstFit;

impl Policy for WorstFit {
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        Choice::at(slabs.most_leftover(bits, n))
    }
}
