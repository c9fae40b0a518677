//! The errors of capability invocations. Every failed invocation changes
//! nothing.

use core::fmt;

use super::cap::Rights;
use super::types::CapType;
use crate::untyped::RetypeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapError {
    // Lookup.
    /// The CSpace's root CNode no longer exists.
    StaleCSpace,
    AddressOutOfRange {
        addr: u32,
    },
    /// An L2 reference whose root slot is empty.
    EmptyL1Slot {
        addr: u32,
    },
    /// An L2 reference whose root slot holds something other than an L2 CNode.
    NotAnL2CNode {
        addr: u32,
        found: CapType,
    },
    /// The slot holds no capability (a stale reference).
    EmptySlot {
        addr: u32,
    },
    /// A destination slot is occupied.
    SlotInUse {
        addr: u32,
    },
    /// The destination window leaves its CNode.
    SlotsInvalid {
        addr: u32,
        count: u64,
    },
    /// The invocation does not apply to this type.
    WrongType {
        op: &'static str,
        found: CapType,
    },
    MissingRights {
        needed: Rights,
        held: Rights,
    },
    // Retype.
    InvalidRetype {
        from: CapType,
        to: CapType,
    },
    /// Mapping capabilities are made by `map` only.
    RetypeMappingExplicit,
    InvalidSize {
        size: u64,
    },
    InvalidOffset {
        offset: u64,
    },
    InvalidCount {
        count: u64,
        max: u64,
    },
    /// The region has descendants in the way (or is not the source's to give).
    RevokeFirst,
    /// seL4's `Untyped_Retype` refused (watermark mode).
    Sel4(RetypeError),
    // Mint.
    NotBadgeable(CapType),
    AlreadyBadged,
    // Page tables.
    NotAPageTable(CapType),
    /// This page table does not take this type at any entry.
    InvalidMapping {
        table: CapType,
        child: CapType,
    },
    /// Entries outside the table or a zero count.
    InvalidEntry {
        entry: u64,
        count: u64,
    },
    EntryInUse {
        entry: u64,
    },
    /// The mapping is in another page table.
    MappingNotInTable,
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CapError::*;
        match *self {
            StaleCSpace => write!(f, "the CSpace's root CNode no longer exists"),
            AddressOutOfRange { addr } => write!(f, "capability address {addr:#x} is out of range"),
            EmptyL1Slot { addr } => write!(f, "no L2 CNode at root slot {}", addr >> 8),
            NotAnL2CNode { addr, found } => {
                write!(
                    f,
                    "root slot {} holds a {found}, not an L2 CNode",
                    addr >> 8
                )
            }
            EmptySlot { addr } => write!(f, "slot {addr:#x} is empty"),
            SlotInUse { addr } => write!(f, "destination slot {addr:#x} is in use"),
            SlotsInvalid { addr, count } => {
                write!(f, "{count} slots from {addr:#x} do not fit the CNode")
            }
            WrongType { op, found } => write!(f, "{op} does not apply to a {found} capability"),
            MissingRights { needed, held } => write!(
                f,
                "missing rights: need {:#x}, hold {:#x}",
                needed.bits(),
                held.bits()
            ),
            InvalidRetype { from, to } => write!(f, "a {from} cannot be retyped to {to}"),
            RetypeMappingExplicit => write!(f, "Mapping capabilities are made by map, not retype"),
            InvalidSize { size } => write!(f, "invalid object size {size:#x}"),
            InvalidOffset { offset } => write!(f, "invalid offset {offset:#x}"),
            InvalidCount { count, max } => write!(f, "invalid count {count} (at most {max})"),
            RevokeFirst => write!(f, "the region has descendants: revoke first"),
            Sel4(e) => write!(f, "seL4 retype: {e}"),
            NotBadgeable(t) => write!(f, "a {t} cannot carry a badge"),
            AlreadyBadged => write!(f, "the capability is already badged"),
            NotAPageTable(t) => write!(f, "a {t} is not a page table"),
            InvalidMapping { table, child } => write!(f, "a {table} does not map a {child}"),
            InvalidEntry { entry, count } => {
                write!(f, "entries {entry}..{} are not in the table", entry + count)
            }
            EntryInUse { entry } => write!(f, "page table entry {entry} is in use"),
            MappingNotInTable => write!(f, "the mapping is not in this page table"),
        }
    }
}
