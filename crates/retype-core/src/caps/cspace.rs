//! CSpaces: two-level tables of capability slots (seed 001 §2.6.3).
//!
//! A capability address is 32 bits: the high 24 index the L1 (root) CNode,
//! the low 8 an L2 CNode of 256 slots. A [`CapRef`] names a slot by CSpace,
//! address and level, like Barrelfish's `capref`: at level L1 it stops at the
//! root's slot `addr >> 8`. The slots of every CNode live in one arena, so a
//! slot's index is its identity in the mapping database (a cte address).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::cap::Cap;
use super::cow_vec::CowVec;
use super::error::CapError;
use super::mdb::CapId;
use super::types::CapType;

/// A CSpace, named by its root CNode object; `generation` makes a handle to
/// a destroyed root stale rather than pointing at a later CNode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CSpace {
    pub(crate) cnode: u32,
    pub(crate) generation: u32,
}

/// Where an address stops resolving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// A slot of the root CNode: index `addr >> 8`.
    L1,
    /// Slot `addr & 0xff` of the L2 CNode in root slot `addr >> 8`.
    L2,
}

/// A capability reference: a slot in some CSpace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CapRef {
    pub cspace: CSpace,
    pub addr: u32,
    pub level: Level,
}

impl CapRef {
    /// Slot `slot` of the root CNode.
    pub fn l1(cspace: CSpace, slot: u32) -> CapRef {
        CapRef {
            cspace,
            addr: slot << 8,
            level: Level::L1,
        }
    }

    /// Slot `slot` of the L2 CNode held in root slot `l1`.
    pub fn l2(cspace: CSpace, l1: u32, slot: u8) -> CapRef {
        CapRef {
            cspace,
            addr: (l1 << 8) | slot as u32,
            level: Level::L2,
        }
    }

    /// The reference `i` slots further in the same CNode.
    pub fn offset(self, i: u32) -> CapRef {
        let step = match self.level {
            Level::L1 => i << 8,
            Level::L2 => i,
        };
        CapRef {
            addr: self.addr.wrapping_add(step),
            ..self
        }
    }
}

/// A CNode object: a block of slots in the arena.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CNode {
    pub first: u32,
    pub slots: u32,
    pub generation: u32,
    pub live: bool,
    /// Marked for deletion by a cascade (seed 001 §4.3).
    pub in_delete: bool,
}

/// All slots and CNode objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Slots {
    /// Copies share the chunks of slots they do not change.
    pub slots: CowVec<Option<Cap>>,
    pub cnodes: Vec<CNode>,
    /// CNode objects by their base address, so that every copy of a CNode
    /// capability finds the same slots.
    pub by_base: BTreeMap<u64, u32>,
    /// Freed slot blocks by length, reused before the arena grows.
    free_blocks: BTreeMap<u32, Vec<u32>>,
    free_cnodes: Vec<u32>,
}

impl Slots {
    pub fn cap(&self, id: CapId) -> Option<&Cap> {
        self.slots.get(id as usize)?.as_ref()
    }

    /// Makes the CNode object for a CNode capability at `base` with `n` slots.
    pub fn create_cnode(&mut self, base: u64, n: u32) -> u32 {
        let first = match self.free_blocks.get_mut(&n).and_then(|v| v.pop()) {
            Some(first) => first,
            None => {
                let first = self.slots.len() as u32;
                self.slots.grow(first as usize + n as usize);
                first
            }
        };
        let fresh = CNode {
            first,
            slots: n,
            generation: 0,
            live: true,
            in_delete: false,
        };
        let idx = match self.free_cnodes.pop() {
            Some(i) => {
                let g = self.cnodes[i as usize].generation + 1;
                self.cnodes[i as usize] = CNode {
                    generation: g,
                    ..fresh
                };
                i
            }
            None => {
                self.cnodes.push(fresh);
                self.cnodes.len() as u32 - 1
            }
        };
        self.by_base.insert(base, idx);
        idx
    }

    /// Frees a CNode object whose slots are all empty.
    pub fn destroy_cnode(&mut self, base: u64) {
        let idx = self.by_base.remove(&base).expect("CNode object exists");
        let c = &mut self.cnodes[idx as usize];
        debug_assert!((c.first..c.first + c.slots).all(|s| self.slots[s as usize].is_none()));
        c.live = false;
        c.in_delete = false;
        self.free_blocks.entry(c.slots).or_default().push(c.first);
        self.free_cnodes.push(idx);
    }

    pub fn cspace_of(&self, base: u64) -> Option<CSpace> {
        let idx = *self.by_base.get(&base)?;
        Some(CSpace {
            cnode: idx,
            generation: self.cnodes[idx as usize].generation,
        })
    }

    fn live_cnode(&self, cs: CSpace) -> Result<&CNode, CapError> {
        match self.cnodes.get(cs.cnode as usize) {
            Some(c) if c.live && c.generation == cs.generation => Ok(c),
            _ => Err(CapError::StaleCSpace),
        }
    }

    /// The CNode object holding the slot `r` names, and the slot's index in it.
    pub fn resolve_cnode(&self, r: CapRef) -> Result<(&CNode, u32), CapError> {
        let root = self.live_cnode(r.cspace)?;
        let l1 = r.addr >> 8;
        if l1 >= root.slots {
            return Err(CapError::AddressOutOfRange { addr: r.addr });
        }
        match r.level {
            Level::L1 => Ok((root, l1)),
            Level::L2 => {
                let holder = self.slots[(root.first + l1) as usize].as_ref();
                match holder {
                    Some(c) if c.ty == CapType::L2CNode => {
                        let idx = self.by_base[&c.base];
                        Ok((&self.cnodes[idx as usize], r.addr & 0xff))
                    }
                    Some(c) => Err(CapError::NotAnL2CNode {
                        addr: r.addr,
                        found: c.ty,
                    }),
                    None => Err(CapError::EmptyL1Slot { addr: r.addr }),
                }
            }
        }
    }

    /// The slot id `r` names.
    pub fn resolve(&self, r: CapRef) -> Result<CapId, CapError> {
        let (cn, i) = self.resolve_cnode(r)?;
        Ok(cn.first + i)
    }

    /// The slot id and capability `r` names; an empty slot is an error.
    pub fn lookup(&self, r: CapRef) -> Result<(CapId, Cap), CapError> {
        let id = self.resolve(r)?;
        match self.slots[id as usize] {
            Some(c) => Ok((id, c)),
            None => Err(CapError::EmptySlot { addr: r.addr }),
        }
    }

    /// `n` consecutive empty slots from `r`, all in one CNode.
    pub fn empty_window(&self, r: CapRef, n: u64) -> Result<CapId, CapError> {
        let (cn, i) = self.resolve_cnode(r)?;
        if n == 0 || i as u64 + n > cn.slots as u64 {
            return Err(CapError::SlotsInvalid {
                addr: r.addr,
                count: n,
            });
        }
        let first = cn.first + i;
        if (first..first + n as u32).any(|s| self.slots[s as usize].is_some()) {
            return Err(CapError::SlotInUse { addr: r.addr });
        }
        Ok(first)
    }
}
