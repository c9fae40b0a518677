//! The original CantripOS allocator: next fit without bookkeeping.
//!
//! It retypes slab after slab from a roving cursor and lets the kernel say no;
//! each refusal is a failed retype. The wrap-around stop point is the cursor
//! as it was when the *request* began, not per descriptor (the quirk of V11,
//! docs/design.md#v11): a later descriptor can fail without trying slabs that an
//! earlier one skipped. The cursor moves to the slab that served the last
//! descriptor, and only when the whole request succeeded.

use super::{Choice, Policy};
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug, Default, Hash)]
pub struct BlindNextFit {
    /// Where the next request starts (`cur_untyped`).
    cursor: usize,
    /// The slab being tried within the current request (`ut_index`).
    scan: usize,
}

impl Policy for BlindNextFit {
    fn begin_request(&mut self) {
        self.scan = self.cursor;
    }

    #[inline]
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        // The slabs it would retype from, in turn, until it wraps back to
        // where the request began; the bookkeeping answers exactly what each
        // retype would, and every slab tried before the one that fits failed.
        let len = slabs.len();
        let untried = match (self.cursor + len - self.scan) % len {
            0 => len,
            d => d,
        };
        let found = slabs.first_fitting(self.scan, untried, bits, n);
        let failed = match found {
            Some(i) => (i + len - self.scan) % len,
            None => untried,
        };
        self.scan = found.unwrap_or(self.cursor);
        Choice {
            failed_retypes: failed as u64,
            ..Choice::at(found)
        }
    }

    fn end_request(&mut self, served: bool) {
        if served {
            self.cursor = self.scan;
        }
    }
}
