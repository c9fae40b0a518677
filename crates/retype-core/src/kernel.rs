//! A small simulated seL4 kernel: untyped regions, the objects retyped from
//! them, and the capabilities that name those objects.
//!
//! It holds exactly what the CantripOS memory manager needs (seed 000 §3.3):
//! retype, copy of an object capability, and delete, which says whether the
//! final capability of an object went and, if so, the object's physical
//! address, so the manager can account the free to the right slab without
//! walking the derivation tree. An untyped's children are all capabilities to
//! objects inside it, copies included: a copy keeps the region from resetting.
//!
//! One of two capability models, on purpose. This one is flat (a [`CapId`] is
//! a bare slot index, an object counts its capabilities) so that a memory
//! manager request stays within about 500 instructions (docs/bench-mm.md);
//! it has no CSpaces, rights, mint, mapping database or page tables.
//! [`crate::caps`] is the full Barrelfish system; both place objects with
//! [`crate::untyped`]. Extend this one only for what the memory manager needs;
//! capabilities across cores extend `caps` (docs/design.md).

use alloc::vec::Vec;

use crate::objects::{Config, ObjectType};
use crate::untyped::{Dest, Placement, RetypeError, Untyped};

/// Names an untyped region of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UtId(pub u32);

/// Names a capability slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CapId(pub u32);

/// Why a capability operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The slot is empty or was never handed out (a stale reference).
    InvalidCap(CapId),
    /// The untyped does not exist.
    InvalidUntyped(UtId),
}

impl core::fmt::Display for CapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CapError::InvalidCap(c) => write!(f, "capability {} is empty or stale", c.0),
            CapError::InvalidUntyped(u) => write!(f, "untyped {} does not exist", u.0),
        }
    }
}

impl core::error::Error for CapError {}

/// An untyped region and where it lies in physical memory.
#[derive(Clone, Debug)]
struct Region {
    base: u64,
    ut: Untyped,
}

/// One object created by retype.
#[derive(Clone, Copy, Debug)]
struct Object {
    paddr: u64,
    untyped: UtId,
    /// Live capabilities naming the object; it is destroyed when this hits 0.
    caps: u32,
}

/// What [`Kernel::delete`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deleted {
    /// `Some(paddr)` when the deleted capability was the object's last.
    pub final_paddr: Option<u64>,
}

/// The simulated kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    config: Config,
    regions: Vec<Region>,
    objects: Vec<Object>,
    free_objects: Vec<u32>,
    /// Slot → object index; `None` is an empty slot.
    caps: Vec<Option<u32>>,
    free_caps: Vec<u32>,
}

impl Kernel {
    pub fn new(config: Config) -> Kernel {
        Kernel {
            config,
            regions: Vec::new(),
            objects: Vec::new(),
            free_objects: Vec::new(),
            caps: Vec::new(),
            free_caps: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Hands the kernel an untyped region of `2^bits` bytes at `base`, which
    /// must be aligned to its size, as boot does.
    pub fn add_untyped(&mut self, base: u64, bits: u32) -> UtId {
        assert_eq!(
            base & ((1u64 << bits) - 1),
            0,
            "untyped base must be size-aligned"
        );
        self.regions.push(Region {
            base,
            ut: Untyped::new(bits),
        });
        UtId(self.regions.len() as u32 - 1)
    }

    pub fn untyped(&self, id: UtId) -> Result<&Untyped, CapError> {
        self.regions
            .get(id.0 as usize)
            .map(|r| &r.ut)
            .ok_or(CapError::InvalidUntyped(id))
    }

    pub fn untyped_base(&self, id: UtId) -> Result<u64, CapError> {
        self.regions
            .get(id.0 as usize)
            .map(|r| r.base)
            .ok_or(CapError::InvalidUntyped(id))
    }

    /// `Untyped_Retype` into fresh slots: the new capabilities are appended to
    /// `out` in object order. Returns where the objects went.
    pub fn retype(
        &mut self,
        id: UtId,
        ty: ObjectType,
        size_bits: u32,
        n: u64,
        out: &mut Vec<CapId>,
    ) -> Result<Placement, RetypeError> {
        let config = self.config;
        let region = self
            .regions
            .get_mut(id.0 as usize)
            .ok_or(RetypeError::InvalidArgument { arg: 0 })?;
        // The caller retypes into fresh slots: a window of empty ones.
        static EMPTY: [bool; crate::untyped::FAN_OUT_LIMIT as usize] =
            [false; crate::untyped::FAN_OUT_LIMIT as usize];
        let window = &EMPTY[..(n as usize).clamp(1, EMPTY.len())];
        let placement = region.ut.retype(
            &config,
            ty,
            size_bits,
            n,
            Dest {
                slots: window,
                offset: 0,
            },
        )?;
        self.make_objects(id, &placement, out);
        Ok(placement)
    }

    /// Retype for a caller that has already checked the arguments and sized
    /// the objects (`2^bits` bytes each): only the memory check remains.
    #[inline]
    pub fn retype_sized(
        &mut self,
        id: UtId,
        bits: u32,
        n: u64,
        out: &mut Vec<CapId>,
    ) -> Result<Placement, RetypeError> {
        let region = self
            .regions
            .get_mut(id.0 as usize)
            .ok_or(RetypeError::InvalidArgument { arg: 0 })?;
        let placement = region.ut.plan(bits, n)?;
        region.ut.commit(&placement);
        self.make_objects(id, &placement, out);
        Ok(placement)
    }

    #[inline]
    fn make_objects(&mut self, id: UtId, placement: &Placement, out: &mut Vec<CapId>) {
        let base = self.regions[id.0 as usize].base;
        for i in 0..placement.count {
            let paddr = base + placement.first + (i << placement.bits);
            let obj = self.new_object(Object {
                paddr,
                untyped: id,
                caps: 1,
            });
            out.push(self.new_cap(obj));
        }
    }

    /// `CNode_Copy` of an object capability: a second name for the same object,
    /// and one more child of its untyped.
    pub fn copy(&mut self, cap: CapId) -> Result<CapId, CapError> {
        let obj = self.object_of(cap)?;
        self.objects[obj as usize].caps += 1;
        let ut = self.objects[obj as usize].untyped;
        self.regions[ut.0 as usize].ut.add_child();
        Ok(self.new_cap(obj))
    }

    /// `CNode_Delete`: empties the slot. When it held the object's final
    /// capability the object is destroyed and its physical address returned.
    #[inline]
    pub fn delete(&mut self, cap: CapId) -> Result<Deleted, CapError> {
        let obj = self.object_of(cap)?;
        self.caps[cap.0 as usize] = None;
        self.free_caps.push(cap.0);
        let o = &mut self.objects[obj as usize];
        o.caps -= 1;
        let (paddr, untyped, last) = (o.paddr, o.untyped, o.caps == 0);
        self.regions[untyped.0 as usize].ut.remove_child();
        if last {
            self.free_objects.push(obj);
        }
        Ok(Deleted {
            final_paddr: last.then_some(paddr),
        })
    }

    /// `CNode_Revoke` on an untyped: deletes every capability to an object
    /// inside it, so its next retype resets. Returns how many went.
    pub fn revoke(&mut self, id: UtId) -> Result<usize, CapError> {
        self.untyped(id)?;
        let doomed: Vec<CapId> = (0..self.caps.len() as u32)
            .map(CapId)
            .filter(|&c| {
                self.object_of(c)
                    .is_ok_and(|o| self.objects[o as usize].untyped == id)
            })
            .collect();
        for &c in &doomed {
            self.delete(c)?;
        }
        debug_assert!(!self.regions[id.0 as usize].ut.has_children());
        Ok(doomed.len())
    }

    /// The physical address of the object a capability names.
    pub fn paddr(&self, cap: CapId) -> Result<u64, CapError> {
        Ok(self.objects[self.object_of(cap)? as usize].paddr)
    }

    #[inline]
    fn object_of(&self, cap: CapId) -> Result<u32, CapError> {
        self.caps
            .get(cap.0 as usize)
            .copied()
            .flatten()
            .ok_or(CapError::InvalidCap(cap))
    }

    #[inline]
    fn new_object(&mut self, o: Object) -> u32 {
        match self.free_objects.pop() {
            Some(i) => {
                self.objects[i as usize] = o;
                i
            }
            None => {
                self.objects.push(o);
                self.objects.len() as u32 - 1
            }
        }
    }

    #[inline]
    fn new_cap(&mut self, obj: u32) -> CapId {
        match self.free_caps.pop() {
            Some(i) => {
                self.caps[i as usize] = Some(obj);
                CapId(i)
            }
            None => {
                self.caps.push(Some(obj));
                CapId(self.caps.len() as u32 - 1)
            }
        }
    }
}

/// Test vectors V4 and V5 (docs/design.md#v4, #v5).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Arch, ObjectType::*};

    fn kernel() -> (Kernel, UtId) {
        let mut k = Kernel::new(Config::new(Arch::X86_64));
        let ut = k.add_untyped(0x10000, 12);
        (k, ut)
    }

    #[test]
    fn v4_a_copy_blocks_reset() {
        let (mut k, ut) = kernel();
        let mut caps = Vec::new();
        k.retype(ut, Tcb, 0, 1, &mut caps).unwrap();
        let tcb = caps[0];
        let copy = k.copy(tcb).unwrap();
        assert_eq!(
            k.delete(tcb).unwrap().final_paddr,
            None,
            "not final: the copy lives"
        );
        let p = k.retype(ut, Endpoint, 0, 1, &mut caps).unwrap();
        assert_eq!((p.first, p.reset), (0x800, false));
        assert_eq!(k.delete(copy).unwrap().final_paddr, Some(0x10000));
        assert_eq!(k.delete(caps[1]).unwrap().final_paddr, Some(0x10800));
        let p = k.retype(ut, Endpoint, 0, 1, &mut caps).unwrap();
        assert_eq!((p.first, p.reset), (0, true));
        assert_eq!(k.untyped(ut).unwrap().watermark(), 0x10);
    }

    #[test]
    fn v5_revoke_equals_deleting_every_descendant() {
        let (mut k, ut) = kernel();
        let mut caps = Vec::new();
        for (ty, sb, n) in [
            (Endpoint, 0, 1),
            (Notification, 0, 1),
            (CapTable, 4, 1),
            (Endpoint, 0, 3),
            (Tcb, 0, 1),
        ] {
            k.retype(ut, ty, sb, n, &mut caps).unwrap();
        }
        assert_eq!(k.untyped(ut).unwrap().watermark(), 0x1000);
        let mut without = k.clone();
        assert_eq!(
            without.retype(ut, SmallPage, 0, 1, &mut Vec::new()),
            Err(RetypeError::NotEnoughMemory { memory_left: 0 })
        );
        let mut by_delete = k.clone();
        for c in caps.drain(..) {
            assert!(by_delete.delete(c).unwrap().final_paddr.is_some());
        }
        assert_eq!(k.revoke(ut), Ok(7));
        let p = k.retype(ut, SmallPage, 0, 1, &mut caps).unwrap();
        let q = by_delete
            .retype(ut, SmallPage, 0, 1, &mut Vec::new())
            .unwrap();
        assert_eq!(p, q);
        assert_eq!((p.first, k.untyped(ut).unwrap().watermark()), (0, 0x1000));
    }

    #[test]
    fn stale_capabilities_are_refused() {
        let (mut k, ut) = kernel();
        let mut caps = Vec::new();
        k.retype(ut, Endpoint, 0, 1, &mut caps).unwrap();
        k.delete(caps[0]).unwrap();
        assert_eq!(k.delete(caps[0]), Err(CapError::InvalidCap(caps[0])));
        assert_eq!(k.copy(CapId(99)), Err(CapError::InvalidCap(CapId(99))));
        assert_eq!(
            k.untyped(UtId(5)).unwrap_err(),
            CapError::InvalidUntyped(UtId(5))
        );
    }
}
