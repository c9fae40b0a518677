//! Where the virtual regions' frames and page tables come from (what
//! Barrelfish's `frame_alloc` and slot allocator give its `vspace`
//! library): pages of one RAM capability, handed out first fit and merged
//! back when freed, and root CNode slots for the capabilities made of them.

use std::collections::BTreeMap;
use std::ops::Range;

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CSpace, CapError, CapRef};

use crate::error::VmError;
use crate::space::Space;

/// Free pages of a RAM capability and free root CNode slots.
#[derive(Debug)]
pub struct Frames {
    ram: CapRef,
    /// Free runs: offset in `ram` to length, in bytes; never adjacent.
    free: BTreeMap<u64, u64>,
    slots: Vec<u32>,
    cspace: CSpace,
}

impl Frames {
    /// Pages `bytes` of `ram` (offsets in it, page aligned) and root CNode
    /// `slots` of the space, which nothing else may use.
    pub fn new(
        s: &Space,
        ram: CapRef,
        bytes: Range<u64>,
        slots: Range<u32>,
    ) -> Result<Frames, VmError> {
        for at in [bytes.start, bytes.end] {
            if !at.is_multiple_of(PAGE) {
                return Err(VmError::Cap(CapError::InvalidOffset { offset: at }));
            }
        }
        let mut free = BTreeMap::new();
        if bytes.end > bytes.start {
            free.insert(bytes.start, bytes.end - bytes.start);
        }
        Ok(Frames {
            ram,
            free,
            slots: slots.rev().collect(),
            cspace: s.boot().cspace,
        })
    }

    /// A free root CNode slot.
    pub fn slot(&mut self) -> Result<CapRef, VmError> {
        let i = self.slots.pop().ok_or(VmError::Exhausted("CNode slots"))?;
        Ok(CapRef::l1(self.cspace, i))
    }

    /// Gives `slot` back (its capability deleted).
    pub fn free_slot(&mut self, slot: CapRef) {
        self.slots.push(slot.addr >> 8);
    }

    /// A new object of type `ty` over `pages` fresh pages, in a slot of its
    /// own.
    pub fn make(&mut self, s: &mut Space, ty: CapType, pages: u64) -> Result<CapRef, VmError> {
        let bytes = pages * PAGE;
        let (&at, &len) = self
            .free
            .iter()
            .find(|(_, &len)| len >= bytes)
            .ok_or(VmError::Exhausted("RAM pages"))?;
        let slot = self.slot()?;
        if let Err(e) = s.retype(self.ram, ty, at, bytes, 1, slot) {
            self.free_slot(slot);
            return Err(e);
        }
        self.free.remove(&at);
        if len > bytes {
            self.free.insert(at + bytes, len - bytes);
        }
        Ok(slot)
    }

    /// Deletes `cap`, an object [`make`](Frames::make) made, and takes its
    /// pages and slot back.
    pub fn destroy(&mut self, s: &mut Space, cap: CapRef) -> Result<(), VmError> {
        let c = s.caps().get(cap)?;
        let at = c.base - s.caps().get(self.ram)?.base;
        s.delete(cap)?;
        self.free_slot(cap);
        self.give_back(at, c.size);
        Ok(())
    }

    /// Puts `[at, at + len)` back among the free runs, merged with its
    /// neighbours.
    fn give_back(&mut self, mut at: u64, mut len: u64) {
        if let Some((&prev, &plen)) = self.free.range(..at).next_back() {
            if prev + plen == at {
                self.free.remove(&prev);
                at = prev;
                len += plen;
            }
        }
        if let Some(&next_len) = self.free.get(&(at + len)) {
            self.free.remove(&(at + len));
            len += next_len;
        }
        self.free.insert(at, len);
    }

    /// Free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}
