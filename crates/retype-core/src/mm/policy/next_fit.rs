//! Next fit with exact bookkeeping: CantripOS's roving cursor, but a slab that
//! cannot take the objects is skipped without a failed retype.

use super::{Choice, Policy};
use crate::mm::slab::Slab;

#[derive(Clone, Debug, Default)]
pub struct NextFit {
    cursor: usize,
}

impl Policy for NextFit {
    fn name(&self) -> &'static str {
        "next-fit"
    }

    fn choose(&mut self, slabs: &[Slab], bits: u32, n: u64) -> Choice {
        let len = slabs.len();
        let slab = (0..len)
            .map(|k| (self.cursor + k) % len)
            .find_map(|i| slabs[i].fit(bits, n).map(|f| (i, f)));
        if let Some((i, _)) = slab {
            self.cursor = i;
        }
        Choice {
            slab,
            failed_retypes: 0,
        }
    }
}
