//! Next fit with exact bookkeeping: CantripOS's roving cursor, but a slab that
//! cannot take the objects is skipped without a failed retype.

use super::{Choice, Policy};
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug, Default, Hash)]
pub struct NextFit {
    cursor: usize,
}

impl Policy for NextFit {
    #[inline]
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        let found = slabs.first_fitting(self.cursor, slabs.len(), bits, n);
        if let Some(i) = found {
            self.cursor = i;
        }
        Choice::at(found)
    }
}
