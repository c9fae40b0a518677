//! Worst fit: the slab with the most space left after the placement, so that
//! what remains is as usable as possible.

use core::cmp::Reverse;

use super::{min_by_key, Choice, Policy};
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug, Default)]
pub struct WorstFit;

impl Policy for WorstFit {
    fn name(&self) -> &'static str {
        "worst-fit"
    }

    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        min_by_key(slabs, bits, n, |_, left| Reverse(left))
    }
}
