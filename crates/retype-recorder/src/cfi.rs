//! The rule that leads from a frame to its caller's, for one code address,
//! from the object's DWARF call-frame information (`.eh_frame`, which
//! compilers emit for C, C++ and Rust with or without frame pointers),
//! looked up through `.eh_frame_hdr`'s sorted table and evaluated by gimli
//! in fixed storage (no allocation). Compiled x86-64 code needs three
//! numbers a frame: the caller's stack pointer (the CFA) is the stack or
//! frame pointer plus an offset, the return address is just below it, and
//! the caller's frame pointer is saved at an offset from it (or untouched).
//! Code without call-frame information (hand-written assembly, JIT code)
//! gets the frame-pointer rule.

use std::cell::UnsafeCell;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, Pointer, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

use crate::modules::Locked;

/// How to find the caller of a frame that is at a given address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The caller's stack pointer (the CFA) is `cfa` bytes above the stack
    /// pointer, or above the frame pointer with `from_bp`; the return
    /// address is the word below the CFA; the caller's frame pointer is
    /// saved `bp` bytes from the CFA, or (0) was not changed.
    Cfa { from_bp: bool, cfa: i32, bp: i32 },
    /// The outermost frame: its return address is undefined.
    End,
    /// A rule this unwinder does not follow (an expression): the walk stops.
    Unknown,
}

/// The classic frame-pointer frame: `push rbp; mov rbp, rsp`.
pub const FRAME_POINTER: Rule = Rule::Cfa {
    from_bp: true,
    cfa: 16,
    bp: -16,
};

impl Rule {
    /// The rule in one word, for the threads' caches (never 0).
    pub fn pack(self) -> u64 {
        match self {
            Rule::Unknown => 1,
            Rule::End => 2,
            Rule::Cfa { from_bp, cfa, bp } => {
                4 | u64::from(from_bp) << 1
                    | u64::from(cfa as u32) << 3
                    | u64::from(bp as u32) << 35
            }
        }
    }

    pub fn unpack(w: u64) -> Rule {
        match w {
            1 => Rule::Unknown,
            2 => Rule::End,
            _ => Rule::Cfa {
                from_bp: w & 2 != 0,
                cfa: (w >> 3) as u32 as i32,
                // The high 29 bits hold the offset, sign included.
                bp: ((w as i64) >> 35) as i32,
            },
        }
    }
}

/// gimli's unwinding state in fixed-size arrays: 32 register rules and 4
/// remembered rows are plenty for compiled code.
struct Fixed;

impl<T: gimli::ReaderOffset> UnwindContextStorage<T> for Fixed {
    type Rules = [(Register, RegisterRule<T>); 32];
    type Stack = [UnwindTableRow<T, Self>; 4];
}

type Context = UnwindContext<usize, Fixed>;

/// The one evaluation context, used under the object table's lock.
struct Shared(UnsafeCell<Option<Context>>);
// SAFETY: used only by the holder of the object table's lock (see `rule`).
unsafe impl Sync for Shared {}
static CONTEXT: Shared = Shared(UnsafeCell::new(None));

/// The address of `.eh_frame`, from `.eh_frame_hdr` (`hdr`, mapped at `hdr_at`).
pub fn eh_frame_address(hdr: &[u8], hdr_at: u64) -> Option<u64> {
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at);
    match EhFrameHdr::new(hdr, LittleEndian)
        .parse(&bases, 8)
        .ok()?
        .eh_frame_ptr()
    {
        Pointer::Direct(at) => Some(at),
        Pointer::Indirect(_) => None,
    }
}

/// The rule for code address `at` (for a return address, the address of the
/// call: one byte before it), and whether `at` lies outside every known object.
pub fn rule(objects: &Locked, at: u64) -> (Rule, bool) {
    let Some(o) = objects.find(at) else {
        return (FRAME_POINTER, true);
    };
    if o.eh_frame.is_empty() {
        return (FRAME_POINTER, false);
    }
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(o.eh_frame_hdr.as_ptr() as u64)
        .set_eh_frame(o.eh_frame.as_ptr() as u64);
    let Some(hdr) = EhFrameHdr::new(o.eh_frame_hdr, LittleEndian)
        .parse(&bases, 8)
        .ok()
    else {
        return (FRAME_POINTER, false);
    };
    let Some(table) = hdr.table() else {
        return (FRAME_POINTER, false);
    };
    let eh_frame = EhFrame::new(o.eh_frame, LittleEndian);
    // SAFETY: `objects` proves we hold the table's lock, which guards CONTEXT.
    let ctx = unsafe { &mut *CONTEXT.0.get() }.get_or_insert_with(Context::new_in);
    let r =
        match table.unwind_info_for_address(&eh_frame, &bases, ctx, at, EhFrame::cie_from_offset) {
            Ok(row) => translate(row),
            // Code the object gives no call-frame information for.
            Err(gimli::Error::NoUnwindInfoForAddress) => FRAME_POINTER,
            Err(_) => Rule::Unknown,
        };
    (r, false)
}

/// The rule a row of the unwind table amounts to.
fn translate(row: &UnwindTableRow<usize, Fixed>) -> Rule {
    match row.register(X86_64::RA) {
        None | Some(RegisterRule::Undefined) => return Rule::End,
        Some(RegisterRule::Offset(-8)) => {}
        Some(_) => return Rule::Unknown,
    }
    let bp = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => 0,
        Some(RegisterRule::Offset(off)) => off,
        Some(_) => return Rule::Unknown,
    };
    let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else {
        return Rule::Unknown;
    };
    let from_bp = match register {
        X86_64::RSP => false,
        X86_64::RBP => true,
        _ => return Rule::Unknown,
    };
    match (i32::try_from(offset), i32::try_from(bp)) {
        (Ok(cfa), Ok(bp)) if (-(1 << 28)..1 << 28).contains(&bp) => Rule::Cfa { from_bp, cfa, bp },
        _ => Rule::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_pack_into_one_word_and_back() {
        for r in [
            Rule::End,
            Rule::Unknown,
            FRAME_POINTER,
            Rule::Cfa {
                from_bp: false,
                cfa: 8,
                bp: 0,
            },
            Rule::Cfa {
                from_bp: false,
                cfa: 4096,
                bp: -56,
            },
            Rule::Cfa {
                from_bp: true,
                cfa: -24,
                bp: (1 << 28) - 8,
            },
            Rule::Cfa {
                from_bp: false,
                cfa: i32::MAX,
                bp: -(1 << 28),
            },
        ] {
            assert_ne!(r.pack(), 0);
            assert_eq!(Rule::unpack(r.pack()), r, "{r:?}");
        }
    }
}
