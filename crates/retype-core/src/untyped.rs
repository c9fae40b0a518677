//! The seL4 untyped retype rule.
//!
//! An untyped region of `2^k` bytes hands out objects at its *watermark*
//! (seL4's `freeIndex`), each aligned to its own size. Deleting objects never
//! moves the watermark: freed space below it is lost until the region has no
//! children at all, when the next retype starts again at 0 (a *reset*).
//! This module is a faithful restatement of `Untyped_Retype` in seL4's
//! `object/untyped.c` (docs/references.md), checks in kernel order; the rule
//! as the project states it: docs/design.md#watermark-rule.

use crate::objects::{Config, ObjectType, SizeError};

/// `CONFIG_RETYPE_FAN_OUT_LIMIT`: the most objects one retype may create.
pub const FAN_OUT_LIMIT: u64 = 256;

/// The watermark is kept in 16-byte units (`2^seL4_MinUntypedBits`).
pub const WATERMARK_UNIT: u64 = 16;

/// The errors of `Untyped_Retype`, with the seL4 error each stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetypeError {
    /// `seL4_InvalidArgument` for argument `arg` (0 = type, 1 = size_bits).
    InvalidArgument { arg: u32 },
    /// `seL4_RangeError`: a value outside `[min, max]`.
    RangeError { min: u64, max: u64 },
    /// `seL4_DeleteFirst`: a destination slot is occupied.
    DeleteFirst,
    /// `seL4_NotEnoughMemory`: `memory_left` bytes remain after the start point.
    NotEnoughMemory { memory_left: u64 },
}

impl core::fmt::Display for RetypeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RetypeError::InvalidArgument { arg: 0 } => write!(f, "invalid object type"),
            RetypeError::InvalidArgument { arg } => write!(f, "invalid argument {arg} (size_bits)"),
            RetypeError::RangeError { min, max } => write!(f, "value out of range [{min}, {max}]"),
            RetypeError::DeleteFirst => write!(f, "destination slot is not empty"),
            RetypeError::NotEnoughMemory { memory_left } => {
                write!(f, "not enough memory ({memory_left} bytes left)")
            }
        }
    }
}

impl core::error::Error for RetypeError {}

impl From<SizeError> for RetypeError {
    fn from(e: SizeError) -> Self {
        match e {
            SizeError::Range { max } => RetypeError::RangeError {
                min: 0,
                max: max as u64,
            },
            SizeError::InvalidArgument { arg } => RetypeError::InvalidArgument { arg },
        }
    }
}

/// The destination window of a retype: a CNode of `slots.len()` slots
/// (`true` = occupied) and the offset of the first new capability.
#[derive(Clone, Copy, Debug)]
pub struct Dest<'a> {
    pub slots: &'a [bool],
    pub offset: usize,
}

/// Where a successful (or planned) retype puts its objects, as offsets from
/// the untyped's base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Offset of the first object; object `i` is at `first + i * 2^bits`.
    pub first: u64,
    pub bits: u32,
    pub count: u64,
    /// Bytes skipped to align the first object (`first - start`).
    pub waste: u64,
    /// The untyped had no children, so this retype restarts at offset 0.
    pub reset: bool,
}

impl Placement {
    /// The watermark after the retype.
    pub fn end(&self) -> u64 {
        self.first + (self.count << self.bits)
    }

    pub fn bytes(&self) -> u64 {
        self.count << self.bits
    }
}

/// `alignUp(x, 2^bits)`.
pub fn align_up(x: u64, bits: u32) -> u64 {
    let mask = (1u64 << bits) - 1;
    (x + mask) & !mask
}

/// `alignDown(x, 2^bits)`.
#[inline]
pub fn align_down(x: u64, bits: u32) -> u64 {
    x & !((1u64 << bits) - 1)
}

/// The state seL4 keeps for an untyped capability, plus the count of its live
/// children (the capabilities derived from it, copies included), which the
/// kernel learns from its derivation tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Untyped {
    size_bits: u32,
    watermark: u64,
    children: u64,
    is_device: bool,
}

impl Untyped {
    /// A fresh untyped of `2^size_bits` bytes, as `Retype` creates it.
    pub fn new(size_bits: u32) -> Untyped {
        Untyped {
            size_bits,
            watermark: 0,
            children: 0,
            is_device: false,
        }
    }

    /// A device untyped: only frames and untypeds may be carved from it.
    pub fn device(size_bits: u32) -> Untyped {
        Untyped {
            is_device: true,
            ..Untyped::new(size_bits)
        }
    }

    pub fn size_bits(&self) -> u32 {
        self.size_bits
    }

    pub fn size(&self) -> u64 {
        1u64 << self.size_bits
    }

    /// The watermark in bytes, as the kernel reports it: it is stale (not 0)
    /// after the last child went, until the next retype resets it.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// seL4's `freeIndex`: the watermark in 16-byte units.
    pub fn free_index(&self) -> u64 {
        self.watermark / WATERMARK_UNIT
    }

    pub fn children(&self) -> u64 {
        self.children
    }

    pub fn has_children(&self) -> bool {
        self.children > 0
    }

    pub fn is_device(&self) -> bool {
        self.is_device
    }

    /// Where the next retype starts: 0 without children, else the watermark.
    pub fn start(&self) -> u64 {
        if self.has_children() {
            self.watermark
        } else {
            0
        }
    }

    /// Bytes a retype may still use (`memoryLeft` of NotEnoughMemory).
    pub fn available(&self) -> u64 {
        self.size() - self.start()
    }

    /// Where `n` objects of `2^bits` bytes would go, without changing anything:
    /// the fit test `((2^k - start) >> bits) >= n` then the aligned placement.
    /// Alignment needs no term in the fit test: the region's end is aligned to
    /// every object size that can fit.
    #[inline]
    pub fn plan(&self, bits: u32, n: u64) -> Result<Placement, RetypeError> {
        let start = self.start();
        let left = self.size() - start;
        if bits >= 64 || (left >> bits) < n {
            return Err(RetypeError::NotEnoughMemory { memory_left: left });
        }
        let first = align_up(start, bits);
        Ok(Placement {
            first,
            bits,
            count: n,
            waste: first - start,
            reset: !self.has_children(),
        })
    }

    /// `Untyped_Retype`: checks 3–15 of the kernel in order, then places `n`
    /// objects, moves the watermark and records them as children.
    pub fn retype(
        &mut self,
        config: &Config,
        ty: ObjectType,
        size_bits: u32,
        n: u64,
        dest: Dest<'_>,
    ) -> Result<Placement, RetypeError> {
        let bits = config.object_bits(ty, size_bits)?;
        let radix_slots = dest.slots.len();
        if dest.offset >= radix_slots {
            return Err(RetypeError::RangeError {
                min: 0,
                max: radix_slots.saturating_sub(1) as u64,
            });
        }
        if !(1..=FAN_OUT_LIMIT).contains(&n) {
            return Err(RetypeError::RangeError {
                min: 1,
                max: FAN_OUT_LIMIT,
            });
        }
        let room = (radix_slots - dest.offset) as u64;
        if n > room {
            return Err(RetypeError::RangeError { min: 1, max: room });
        }
        let window = &dest.slots[dest.offset..dest.offset + n as usize];
        if window.iter().any(|&occupied| occupied) {
            return Err(RetypeError::DeleteFirst);
        }
        let placement = self.plan(bits, n)?;
        if self.is_device && !(ty.is_frame() || ty == ObjectType::Untyped) {
            return Err(RetypeError::InvalidArgument { arg: 1 });
        }
        self.commit(&placement);
        Ok(placement)
    }

    /// Applies a placement from [`Untyped::plan`]: the watermark moves to its
    /// end and its objects become children. Used by callers that already did
    /// the argument checks (the memory manager, which sizes objects itself).
    #[inline]
    pub fn commit(&mut self, placement: &Placement) {
        debug_assert_eq!(Ok(*placement), self.plan(placement.bits, placement.count));
        self.watermark = placement.end();
        self.children += placement.count;
    }

    /// A capability derived from this untyped appeared (a copy of an object cap).
    #[inline]
    pub fn add_child(&mut self) {
        self.children += 1;
    }

    /// A capability derived from this untyped was deleted. The watermark stays:
    /// only the next retype after the last child resets it.
    #[inline]
    pub fn remove_child(&mut self) {
        assert!(self.children > 0, "untyped has no children to remove");
        self.children -= 1;
    }

    /// `Revoke` on the untyped: every descendant goes at once.
    pub fn revoke(&mut self) {
        self.children = 0;
    }

    /// What copying this untyped cap does (`deriveCap` + `setUntypedCapAsFull`):
    /// refused with RevokeFirst while it has children; otherwise the source
    /// becomes full and the copy counts as its child.
    pub fn copy(&mut self) -> Result<(), CopyError> {
        if self.has_children() {
            return Err(CopyError::RevokeFirst);
        }
        self.watermark = self.size();
        self.children += 1;
        Ok(())
    }
}

/// Why an untyped capability cannot be copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// `seL4_RevokeFirst`: the untyped has children.
    RevokeFirst,
}

/// Boot-time carving of a free physical region `[start, end)` into untypeds
/// (seL4 `boot.c`): each piece is as large as possible, aligned to its size,
/// at most `max_bits`; pieces under 16 bytes are dropped.
pub fn carve_region(mut start: u64, end: u64, max_bits: u32) -> alloc::vec::Vec<(u64, u32)> {
    let mut out = alloc::vec::Vec::new();
    while start < end {
        let mut bits = (63 - (end - start).leading_zeros()).min(max_bits);
        if start != 0 {
            bits = bits.min(start.trailing_zeros());
        }
        if bits >= 4 {
            out.push((start, bits));
        }
        start += 1u64 << bits;
    }
    out
}

/// Test vectors V1–V3 and V6–V10 (docs/design.md#test-vectors); V4, V5 (copies,
/// revoke) are in `kernel`, V11 in `mm`, V12 in `caps`.
#[cfg(test)]
mod tests {
    use super::Untyped as Ut;
    use super::*;
    use crate::objects::{Arch, Config, ObjectType::*};
    use alloc::vec;

    const X64: Config = Config::new(Arch::X86_64);
    const RV32: Config = Config::new(Arch::Riscv32);

    /// Retype into a fresh, large-enough CNode.
    fn retype(
        ut: &mut Ut,
        c: &Config,
        ty: ObjectType,
        sb: u32,
        n: u64,
    ) -> Result<Placement, RetypeError> {
        ut.retype(
            c,
            ty,
            sb,
            n,
            Dest {
                slots: &[false; 512],
                offset: 0,
            },
        )
    }

    /// Retypes `(type, size_bits, n)` and checks `(first, waste, watermark)`.
    fn ok(ut: &mut Ut, c: &Config, req: (ObjectType, u32, u64), want: (u64, u64, u64)) {
        let (ty, sb, n) = req;
        let p = retype(ut, c, ty, sb, n).unwrap();
        assert_eq!((p.first, p.waste, ut.watermark()), want, "{ty} x{n}");
    }

    fn nem(ut: &mut Ut, c: &Config, ty: ObjectType, sb: u32, n: u64, left: u64) {
        let before = ut.clone();
        assert_eq!(
            retype(ut, c, ty, sb, n),
            Err(RetypeError::NotEnoughMemory { memory_left: left })
        );
        assert_eq!(*ut, before, "a failed retype changes nothing");
    }

    #[test]
    fn v1_watermark_alignment_and_reset() {
        let mut ut = Ut::new(12);
        ok(&mut ut, &X64, (Endpoint, 0, 1), (0x000, 0, 0x010));
        ok(&mut ut, &X64, (Notification, 0, 1), (0x020, 16, 0x040));
        assert_eq!(ut.free_index(), 4);
        ok(&mut ut, &X64, (CapTable, 4, 1), (0x200, 448, 0x400));
        ok(&mut ut, &X64, (Endpoint, 0, 3), (0x400, 0, 0x430));
        ok(&mut ut, &X64, (Tcb, 0, 1), (0x800, 976, 0x1000));
        assert_eq!(ut.free_index(), 256);
        nem(&mut ut, &X64, Endpoint, 0, 1, 0);
        for _ in 0..7 {
            ut.remove_child();
        }
        assert_eq!(ut.watermark(), 0x1000, "delete never moves the watermark");
        let p = retype(&mut ut, &X64, Notification, 0, 1).unwrap();
        assert!(p.reset);
        assert_eq!((p.first, ut.watermark()), (0, 0x020));
    }

    #[test]
    fn v2_fit_ignores_alignment_waste() {
        let mut ut = Ut::new(12);
        ok(&mut ut, &X64, (Endpoint, 0, 1), (0, 0, 0x10));
        nem(&mut ut, &X64, Tcb, 0, 2, 4080);
        ok(&mut ut, &X64, (Tcb, 0, 1), (0x800, 2032, 0x1000));
    }

    #[test]
    fn v3_holes_are_not_reused() {
        let mut ut = Ut::new(12);
        ok(&mut ut, &X64, (Endpoint, 0, 2), (0, 0, 0x20));
        ut.remove_child();
        ok(&mut ut, &X64, (Endpoint, 0, 1), (0x20, 0, 0x30));
        ut.remove_child();
        ut.remove_child();
        assert_eq!(ut.watermark(), 0x30);
        ok(&mut ut, &X64, (Endpoint, 0, 1), (0, 0, 0x10));
    }

    #[test]
    fn v6_riscv32_sizes() {
        let mut ut = Ut::new(12);
        ok(&mut ut, &RV32, (Tcb, 0, 1), (0x000, 0, 0x200));
        ok(&mut ut, &RV32, (CapTable, 2, 1), (0x200, 0, 0x240));
        ok(&mut ut, &RV32, (Endpoint, 0, 2), (0x240, 0, 0x260));
        ok(&mut ut, &RV32, (Notification, 0, 1), (0x260, 0, 0x270));
        assert_eq!(ut.free_index(), 39);
        nem(&mut ut, &RV32, SmallPage, 0, 1, 3472);
        ok(&mut ut, &RV32, (CapTable, 2, 1), (0x280, 16, 0x2C0));
        assert_eq!(ut.free_index(), 44);
    }

    #[test]
    fn v7_untyped_splitting() {
        let mut parent = Ut::new(12);
        let p = retype(&mut parent, &X64, Untyped, 10, 4).unwrap();
        assert_eq!((p.first, p.bits, parent.watermark()), (0, 10, 0x1000));
        nem(&mut parent, &X64, Untyped, 10, 1, 0);
        let mut child = Ut::new(10);
        nem(&mut child, &X64, Tcb, 0, 1, 1024);
        ok(&mut child, &X64, (Endpoint, 0, 1), (0, 0, 0x10));
        assert_eq!(
            p.first + 2 * (1 << p.bits),
            0x800,
            "the third child is at 0x800"
        );
        assert_eq!(
            retype(&mut parent, &X64, Untyped, 3, 1),
            Err(RetypeError::InvalidArgument { arg: 1 })
        );
        nem(&mut Ut::new(12), &X64, Untyped, 13, 1, 4096);
    }

    #[test]
    fn v8_mixed_sizes() {
        let mut ut = Ut::new(12);
        ok(&mut ut, &X64, (Endpoint, 0, 1), (0, 0, 0x10));
        nem(&mut ut, &X64, SmallPage, 0, 1, 4080);
        ok(&mut ut, &X64, (Untyped, 10, 1), (0x400, 1008, 0x800));
        nem(&mut ut, &X64, Untyped, 10, 3, 2048);
        ok(&mut ut, &X64, (Untyped, 10, 2), (0x800, 0, 0x1000));
    }

    #[test]
    fn v9_error_precedence() {
        let occupied = [true; 8];
        let full_dest = Dest {
            slots: &occupied,
            offset: 0,
        };
        let mut fresh = Ut::new(12);
        assert_eq!(
            fresh.retype(&X64, CapTable, 0, 1, full_dest),
            Err(RetypeError::InvalidArgument { arg: 1 })
        );
        let mut full = Ut::new(12);
        ok(&mut full, &X64, (SmallPage, 0, 1), (0, 0, 0x1000));
        assert_eq!(
            full.retype(&X64, Endpoint, 0, 1, full_dest),
            Err(RetypeError::DeleteFirst)
        );
        assert_eq!(
            Ut::device(12).retype(
                &X64,
                Endpoint,
                0,
                1,
                Dest {
                    slots: &[false; 4],
                    offset: 0
                }
            ),
            Err(RetypeError::InvalidArgument { arg: 1 })
        );
        let mut dev = Ut::device(12);
        ok(&mut dev, &X64, (SmallPage, 0, 1), (0, 0, 0x1000));
        nem(&mut dev, &X64, Endpoint, 0, 1, 0);
        for n in [0, 257] {
            assert_eq!(
                retype(&mut fresh, &X64, Endpoint, 0, n),
                Err(RetypeError::RangeError { min: 1, max: 256 })
            );
        }
        let small = [false; 4];
        for (n, offset, min, max) in [(1, 4, 0, 3), (3, 2, 1, 2)] {
            let dest = Dest {
                slots: &small,
                offset,
            };
            assert_eq!(
                fresh.retype(&X64, Endpoint, 0, n, dest),
                Err(RetypeError::RangeError { min, max })
            );
        }
        let mut with_child = Ut::new(12);
        ok(&mut with_child, &X64, (Endpoint, 0, 1), (0, 0, 0x10));
        assert_eq!(with_child.copy(), Err(CopyError::RevokeFirst));
        let mut clean = Ut::new(12);
        assert_eq!(clean.copy(), Ok(()));
        assert_eq!(clean.free_index(), 256, "the source becomes full");
    }

    #[test]
    fn v10_boot_carving() {
        assert_eq!(
            carve_region(0x1000, 0x9000, 47),
            vec![(0x1000, 12), (0x2000, 13), (0x4000, 14), (0x8000, 12)]
        );
        assert_eq!(carve_region(0, 0x6000, 47), vec![(0, 14), (0x4000, 13)]);
        assert_eq!(carve_region(0x10008, 0x10020, 47), vec![(0x10010, 4)]);
    }
}
