//! The rule that leads from a frame to its caller's, for one code address,
//! from the object's DWARF call-frame information (`.eh_frame`, which
//! compilers emit for C, C++ and Rust with or without frame pointers),
//! looked up through `.eh_frame_hdr`'s sorted table and evaluated by gimli
//! in fixed storage (no allocation) that the caller owns and uses for one
//! lookup at a time (the object table keeps it under its lock). Compiled x86-64 code needs three
//! numbers a frame: the caller's stack pointer (the CFA) is the stack or
//! frame pointer plus an offset, the return address is just below it, and
//! the caller's frame pointer is saved at an offset from it (or untouched).
//! Code without call-frame information (hand-written assembly, JIT code)
//! gets the frame-pointer rule.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, Pointer, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

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

/// gimli's evaluation state, made on first use: one for all lookups, which
/// its owner makes one at a time.
pub struct Evaluator(Option<UnwindContext<usize, Fixed>>);

impl Evaluator {
    pub const fn new() -> Evaluator {
        Evaluator(None)
    }
}

/// An object's unwind tables, `.eh_frame_hdr` and `.eh_frame`, read in place
/// where the loader mapped them (empty when it has none).
#[derive(Clone, Copy)]
pub struct Tables {
    pub eh_frame_hdr: &'static [u8],
    pub eh_frame: &'static [u8],
}

impl Tables {
    /// The tables of an object without call-frame information.
    pub const NONE: Tables = Tables {
        eh_frame_hdr: &[],
        eh_frame: &[],
    };
}

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
/// call: one byte before it) in the object whose tables are `tables`.
pub fn rule(tables: &Tables, evaluator: &mut Evaluator, at: u64) -> Rule {
    if tables.eh_frame.is_empty() {
        return FRAME_POINTER;
    }
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(tables.eh_frame_hdr.as_ptr() as u64)
        .set_eh_frame(tables.eh_frame.as_ptr() as u64);
    let Some(hdr) = EhFrameHdr::new(tables.eh_frame_hdr, LittleEndian)
        .parse(&bases, 8)
        .ok()
    else {
        return FRAME_POINTER;
    };
    let Some(table) = hdr.table() else {
        return FRAME_POINTER;
    };
    let eh_frame = EhFrame::new(tables.eh_frame, LittleEndian);
    let ctx = evaluator.0.get_or_insert_with(UnwindContext::new_in);
    match table.unwind_info_for_address(&eh_frame, &bases, ctx, at, EhFrame::cie_from_offset) {
        Ok(row) => translate(row),
        // Code the object gives no call-frame information for.
        Err(gimli::Error::NoUnwindInfoForAddress) => FRAME_POINTER,
        Err(_) => Rule::of(Kind::Unknown),
    }
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
