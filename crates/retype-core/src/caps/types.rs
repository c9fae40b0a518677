//! Capability types and the retype rules table (seed 001 §2.6.2, §3.1–3.2;
//! Barrelfish's `caps.hl`, see docs/references.md).
//!
//! Every type here names a region of the physical address space, so all share
//! one *type root*, PhysAddr. The enum order is the mapping database's type
//! order: a type always comes after every type it can be retyped from, and a
//! Mapping type after the type it maps, so at equal (base, size) a parent sorts
//! before its child.

use crate::objects::{Config, ObjectType};

/// The capability types of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, strum::VariantArray)]
#[repr(u8)]
pub enum CapType {
    /// The root of the physical address space; not RAM-backed.
    PhysAddr = 1,
    /// General-purpose memory, the source of every kernel object.
    Ram,
    /// Memory-mapped device registers.
    DevFrame,
    /// Mappable RAM.
    Frame,
    /// The root level of a CSpace: a multiple of 256 slots.
    L1CNode,
    /// The second level of a CSpace: exactly 256 slots.
    L2CNode,
    // seL4 kernel objects (seed 000), carved from RAM.
    Tcb,
    Endpoint,
    Notification,
    SchedContext,
    Reply,
    // x86_64 page tables, root first.
    X86Pml4,
    X86Pdpt,
    X86Pdir,
    X86Ptable,
    // AArch64 page tables, root first.
    Aarch64L0,
    Aarch64L1,
    Aarch64L2,
    Aarch64L3,
    // One Mapping type per mappable type: made by `map`, never by retype.
    FrameMapping,
    DevFrameMapping,
    X86PdptMapping,
    X86PdirMapping,
    X86PtableMapping,
    Aarch64L1Mapping,
    Aarch64L2Mapping,
    Aarch64L3Mapping,
}

use CapType::*;

/// Bytes in one capability slot (a Barrelfish `cte`).
pub const SLOT_BYTES: u64 = 64;
/// Slots in an L2 CNode: 16 KiB of 64-byte slots.
pub const L2_SLOTS: u64 = 256;
/// Bytes of every page table of both architectures, and the base page.
pub const PAGE: u64 = 4096;
/// Entries in one page table.
pub const PT_ENTRIES: u64 = 512;

impl CapType {
    pub const ALL: &'static [CapType] = <CapType as strum::VariantArray>::VARIANTS;

    /// The index of this type's tree in the forest of retype relations.
    pub fn root(self) -> u8 {
        1
    }

    pub fn name(self) -> &'static str {
        match self {
            PhysAddr => "PhysAddr",
            Ram => "RAM",
            DevFrame => "DevFrame",
            Frame => "Frame",
            L1CNode => "L1CNode",
            L2CNode => "L2CNode",
            Tcb => "TCB",
            Endpoint => "Endpoint",
            Notification => "Notification",
            SchedContext => "SchedContext",
            Reply => "Reply",
            X86Pml4 => "VNode_x86_64_pml4",
            X86Pdpt => "VNode_x86_64_pdpt",
            X86Pdir => "VNode_x86_64_pdir",
            X86Ptable => "VNode_x86_64_ptable",
            Aarch64L0 => "VNode_AARCH64_l0",
            Aarch64L1 => "VNode_AARCH64_l1",
            Aarch64L2 => "VNode_AARCH64_l2",
            Aarch64L3 => "VNode_AARCH64_l3",
            FrameMapping => "Frame_Mapping",
            DevFrameMapping => "DevFrame_Mapping",
            X86PdptMapping => "VNode_x86_64_pdpt_Mapping",
            X86PdirMapping => "VNode_x86_64_pdir_Mapping",
            X86PtableMapping => "VNode_x86_64_ptable_Mapping",
            Aarch64L1Mapping => "VNode_AARCH64_l1_Mapping",
            Aarch64L2Mapping => "VNode_AARCH64_l2_Mapping",
            Aarch64L3Mapping => "VNode_AARCH64_l3_Mapping",
        }
    }

    /// The types this one may be retyped from, itself included where a
    /// split is allowed (caps.hl's `from` and `from_self`).
    pub fn retyped_from(self) -> &'static [CapType] {
        match self {
            PhysAddr => &[PhysAddr],
            Ram => &[PhysAddr, Ram],
            DevFrame => &[PhysAddr, DevFrame],
            Frame => &[Ram, Frame],
            L1CNode | L2CNode | Tcb | Endpoint | Notification | SchedContext | Reply => &[Ram],
            X86Pml4 | X86Pdpt | X86Pdir | X86Ptable => &[Ram],
            Aarch64L0 | Aarch64L1 | Aarch64L2 | Aarch64L3 => &[Ram],
            _ => &[],
        }
    }

    /// `is_well_founded(src, dst)`: may `self` be retyped into `dst`?
    pub fn can_retype_to(self, dst: CapType) -> bool {
        dst.retyped_from().contains(&self)
    }

    pub fn is_mapping(self) -> bool {
        self >= FrameMapping
    }

    pub fn is_cnode(self) -> bool {
        matches!(self, L1CNode | L2CNode)
    }

    /// The page-table levels, root first, of both architectures.
    pub fn is_vnode(self) -> bool {
        (X86Pml4..=Aarch64L3).contains(&self)
    }

    /// The Mapping type that tracks a mapping of this type, if it is mappable.
    pub fn mapping_type(self) -> Option<CapType> {
        Some(match self {
            Frame => FrameMapping,
            DevFrame => DevFrameMapping,
            X86Pdpt => X86PdptMapping,
            X86Pdir => X86PdirMapping,
            X86Ptable => X86PtableMapping,
            Aarch64L1 => Aarch64L1Mapping,
            Aarch64L2 => Aarch64L2Mapping,
            Aarch64L3 => Aarch64L3Mapping,
            _ => return None,
        })
    }

    /// Backed by RAM: its memory goes back to a memory server when the last
    /// capability to it goes and nothing else covers it.
    pub fn is_ram_backed(self) -> bool {
        !matches!(self, PhysAddr | DevFrame) && !self.is_mapping()
    }

    /// Offsets and sizes of a retype into this type must be multiples of this.
    pub fn granule(self) -> u64 {
        match self {
            PhysAddr | Ram | DevFrame | Frame => PAGE,
            L1CNode | L2CNode => L2_SLOTS * SLOT_BYTES,
            _ => 1,
        }
    }

    /// The fixed object size, for types that have one on `config`'s machine.
    pub fn fixed_size(self, config: &Config) -> Option<u64> {
        let sel4 = |t: ObjectType, sb: u32| config.object_bits(t, sb).ok().map(|b| 1u64 << b);
        match self {
            L2CNode => Some(L2_SLOTS * SLOT_BYTES),
            Tcb => sel4(ObjectType::Tcb, 0),
            Endpoint => sel4(ObjectType::Endpoint, 0),
            Notification => sel4(ObjectType::Notification, 0),
            SchedContext => sel4(ObjectType::SchedContext, 8),
            Reply => sel4(ObjectType::Reply, 0),
            t if t.is_vnode() => Some(PAGE),
            _ => None,
        }
    }

    /// What a seL4 `Untyped_Retype` of `ty` makes, on `config`'s machine, from
    /// RAM (`device` false) or device memory.
    pub fn from_sel4(ty: ObjectType, config: &Config, device: bool) -> CapType {
        let aarch = config.arch == crate::objects::Arch::Aarch64;
        match ty {
            ObjectType::Untyped if device => DevFrame,
            ObjectType::Untyped => Ram,
            ObjectType::Tcb => Tcb,
            ObjectType::Endpoint => Endpoint,
            ObjectType::Notification => Notification,
            ObjectType::CapTable => L1CNode,
            ObjectType::SchedContext => SchedContext,
            ObjectType::Reply => Reply,
            ObjectType::SmallPage | ObjectType::LargePage | ObjectType::HugePage if device => {
                DevFrame
            }
            ObjectType::SmallPage | ObjectType::LargePage | ObjectType::HugePage => Frame,
            ObjectType::PageTable if aarch => Aarch64L3,
            ObjectType::PageTable => X86Ptable,
            ObjectType::VSpace if aarch => Aarch64L0,
            ObjectType::VSpace => X86Pml4,
        }
    }
}

impl core::fmt::Display for CapType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
