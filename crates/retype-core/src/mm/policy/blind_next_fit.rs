//! The original CantripOS allocator: next fit without bookkeeping.
//!
//! It retypes slab after slab from a roving cursor and lets the kernel say no;
//! each refusal is a failed retype. The wrap-around stop point is the cursor
//! as it was when the *request* began, not per descriptor (research note §5.3,
//! the quirk of V11): a later descriptor can fail without trying slabs that an
//! earlier one skipped. The cursor moves to the slab that served the last
//! descriptor, and only when the whole request succeeded.

use super::{Choice, Policy};
use crate::mm::slab::Slab;

#[derive(Clone, Debug, Default)]
pub struct BlindNextFit {
    /// Where the next request starts (`cur_untyped`).
    cursor: usize,
    /// The slab being tried within the current request (`ut_index`).
    scan: usize,
}

impl Policy for BlindNextFit {
    fn name(&self) -> &'static str {
        "blind-next-fit"
    }

    fn begin_request(&mut self) {
        self.scan = self.cursor;
    }

    fn choose(&mut self, slabs: &[Slab], bits: u32, n: u64) -> Choice {
        let mut failed = 0;
        loop {
            // `fit` answers exactly what the kernel's retype would.
            if let Some(fit) = slabs[self.scan].fit(bits, n) {
                return Choice {
                    slab: Some((self.scan, fit)),
                    failed_retypes: failed,
                };
            }
            failed += 1;
            self.scan = (self.scan + 1) % slabs.len();
            if self.scan == self.cursor {
                return Choice {
                    slab: None,
                    failed_retypes: failed,
                };
            }
        }
    }

    fn end_request(&mut self, served: bool) {
        if served {
            self.cursor = self.scan;
        }
    }
}
