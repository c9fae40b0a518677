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

/// What kind of rule a [`Rule`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The caller's stack pointer (the CFA) is the stack pointer plus `cfa`.
    Sp,
    /// The CFA is the frame pointer plus `cfa`.
    Bp,
    /// The outermost frame: its return address is undefined.
    End,
    /// A rule this unwinder does not follow (an expression): the walk stops.
    Unknown,
}

/// How to find the caller of a frame that is at a given address: its CFA
/// (by `kind`), the return address in the word below the CFA, and the
/// caller's frame pointer saved `bp` bytes from the CFA (0: not changed).
/// Eight bytes, so that a thread's cache holds many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Rule {
    pub cfa: i32,
    pub bp: i16,
    pub kind: Kind,
}

impl Rule {
    const fn of(kind: Kind) -> Rule {
        Rule {
            cfa: 0,
            bp: 0,
            kind,
        }
    }
}

/// The classic frame-pointer frame: `push rbp; mov rbp, rsp`.
pub const FRAME_POINTER: Rule = Rule {
    cfa: 16,
    bp: -16,
    kind: Kind::Bp,
};

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
            Err(_) => Rule::of(Kind::Unknown),
        };
    (r, false)
}

/// The rule a row of the unwind table amounts to.
fn translate(row: &UnwindTableRow<usize, Fixed>) -> Rule {
    const UNKNOWN: Rule = Rule::of(Kind::Unknown);
    match row.register(X86_64::RA) {
        None | Some(RegisterRule::Undefined) => return Rule::of(Kind::End),
        Some(RegisterRule::Offset(-8)) => {}
        Some(_) => return UNKNOWN,
    }
    let bp = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => 0,
        Some(RegisterRule::Offset(off)) => off,
        Some(_) => return UNKNOWN,
    };
    let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else {
        return UNKNOWN;
    };
    let kind = match register {
        X86_64::RSP => Kind::Sp,
        X86_64::RBP => Kind::Bp,
        _ => return UNKNOWN,
    };
    match (i32::try_from(offset), i16::try_from(bp)) {
        (Ok(cfa), Ok(bp)) => Rule { cfa, bp, kind },
        _ => UNKNOWN,
    }
}
