//! The capability system of one core: slots, the mapping database, kernel
//! objects with state (CNodes, page tables, seL4 untyped watermarks), and the
//! invocations. Each invocation checks everything before it changes anything,
//! so a refused invocation leaves the system as it was.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::cap::{Cap, Key, MapInfo, Rights};
use super::cspace::{CSpace, CapRef, Slots};
use super::error::CapError;
use super::mdb::{CapId, Mdb, Relation};
use super::types::{CapType, CapType::*, L2_SLOTS, PAGE, PT_ENTRIES, SLOT_BYTES};
use super::vnode::{accepts, Pte, Slot, VNode};
use crate::objects::{Config, ObjectType};
use crate::untyped::{Dest, Untyped};

/// The capabilities `boot` hands to the first domain.
#[derive(Clone, Copy, Debug)]
pub struct Boot {
    pub cspace: CSpace,
    /// Root slot 0: the root L1 CNode itself, made by the kernel from the
    /// last bytes of RAM; no RAM capability covers it.
    pub root: CapRef,
    /// Root slot 1: PhysAddr over RAM and the device region after it.
    pub phys: CapRef,
    /// Root slot 2: the RAM below the root CNode, from address 0.
    pub ram: CapRef,
}

/// A retype that passed every check but the search for descendants in the
/// way: what [`Caps::retype_into`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetypePlan {
    /// The source capability.
    pub src: Cap,
    pub ty: CapType,
    /// The first object's base address.
    pub base: u64,
    pub objsize: u64,
    pub count: u64,
}

impl RetypePlan {
    /// The bytes the objects cover.
    pub fn bytes(&self) -> u64 {
        self.objsize * self.count
    }
}

/// What deleting one capability does beyond emptying its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fate {
    /// No copy is left anywhere: the object is destroyed.
    pub last: bool,
    /// Nothing else covers its memory either: the memory is reclaimed.
    pub orphan: bool,
}

impl Fate {
    /// Other copies remain: just the slot goes.
    pub const COPY: Fate = Fate {
        last: false,
        orphan: false,
    };
}

/// A capability system over the mapping database `M`.
#[derive(Clone, Debug, PartialEq)]
pub struct Caps<M: Mdb> {
    config: Config,
    s: Slots,
    mdb: M,
    vnodes: BTreeMap<u64, VNode>,
    /// seL4 watermark state of RAM capabilities used in watermark mode.
    untypeds: BTreeMap<CapId, Untyped>,
    reclaimed: Vec<(u64, u64)>,
}

/// The state, not how it is indexed: the mapping database follows from the
/// slots, and two systems with the same slots answer alike whatever shape
/// their trees took (the model checker counts states by this hash).
impl<M: Mdb> core::hash::Hash for Caps<M> {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.s.hash(h);
        self.vnodes.hash(h);
        self.untypeds.hash(h);
        self.reclaimed.hash(h);
    }
}

impl<M: Mdb> Caps<M> {
    /// A machine with `ram` bytes of RAM at address 0 followed by as many
    /// bytes of device memory, and a first domain whose root CNode has
    /// `root_slots` slots (a multiple of 256), at the end of RAM.
    pub fn boot(config: Config, ram: u64, root_slots: u32) -> Result<(Caps<M>, Boot), CapError> {
        let cnode_bytes = root_slots as u64 * SLOT_BYTES;
        if root_slots == 0 || !(root_slots as u64).is_multiple_of(L2_SLOTS) {
            return Err(CapError::InvalidSize { size: cnode_bytes });
        }
        if !ram.is_multiple_of(PAGE) || ram <= cnode_bytes || ram > u64::MAX / 4 {
            return Err(CapError::InvalidSize { size: ram });
        }
        let mut caps = Caps::empty(config);
        let user = ram - cnode_bytes;
        let root = Cap::new(L1CNode, user, cnode_bytes);
        caps.create_object(&root, root_slots);
        let cspace = caps.s.cspace_of(user).expect("root CNode was just made");
        let first = caps.s.cnodes[cspace.cnode as usize].first;
        caps.install(first, root);
        caps.install(first + 1, Cap::new(PhysAddr, 0, 2 * ram));
        caps.install(first + 2, Cap::new(Ram, 0, user));
        let boot = Boot {
            cspace,
            root: CapRef::l1(cspace, 0),
            phys: CapRef::l1(cspace, 1),
            ram: CapRef::l1(cspace, 2),
        };
        Ok((caps, boot))
    }

    fn empty(config: Config) -> Caps<M> {
        Caps {
            config,
            s: Slots::default(),
            mdb: M::new(),
            vnodes: BTreeMap::new(),
            untypeds: BTreeMap::new(),
            reclaimed: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn mdb(&self) -> &M {
        &self.mdb
    }

    /// The capability `r` names (Barrelfish's `identify`).
    pub fn get(&self, r: CapRef) -> Result<Cap, CapError> {
        self.s.lookup(r).map(|(_, c)| c)
    }

    /// The slot id `r` names, the capability's identity in the mapping database.
    pub fn slot_id(&self, r: CapRef) -> Result<CapId, CapError> {
        self.s.resolve(r)
    }

    /// The CSpace rooted at the L1 CNode `r` names.
    pub fn cspace_of(&self, r: CapRef) -> Result<CSpace, CapError> {
        let c = self.get(r)?;
        if c.ty != L1CNode {
            return Err(CapError::WrongType {
                op: "cspace",
                found: c.ty,
            });
        }
        Ok(self
            .s
            .cspace_of(c.base)
            .expect("a live CNode cap has its object"))
    }

    /// Every live capability with its slot id.
    pub fn live(&self) -> impl Iterator<Item = (CapId, &Cap)> + '_ {
        (self.s.slots.occupied()).filter_map(|(i, c)| c.as_ref().map(|c| (i as CapId, c)))
    }

    /// Every page-table entry in use: (table base, entry index, entry).
    pub fn ptes(&self) -> impl Iterator<Item = (u64, u64, Pte)> + '_ {
        self.vnodes.iter().flat_map(|(&base, v)| {
            v.entries
                .iter()
                .enumerate()
                .filter_map(move |(i, e)| e.map(|p| (base, i as u64, p)))
        })
    }

    /// The page-table object at `base`, if one exists: what a walk of the
    /// tables reads (an MMU, or an OS that gives the tables real effect).
    pub fn vnode(&self, base: u64) -> Option<&VNode> {
        self.vnodes.get(&base)
    }

    /// Regions handed back by deleting the last capability to RAM-backed
    /// memory with nothing above or below it (the memory server's input).
    pub fn take_reclaimed(&mut self) -> Vec<(u64, u64)> {
        core::mem::take(&mut self.reclaimed)
    }

    fn install(&mut self, id: CapId, cap: Cap) {
        debug_assert!(self.s.slots[id as usize].is_none());
        self.s.slots[id as usize] = Some(cap);
        self.mdb
            .insert(id, cap.key())
            .expect("a free slot is not in the mdb");
    }

    /// Makes the state of a newly retyped object: slots or table entries.
    fn create_object(&mut self, cap: &Cap, cnode_slots: u32) {
        if cap.ty.is_cnode() {
            self.s.create_cnode(cap.base, cnode_slots);
        } else if cap.ty.is_vnode() {
            self.vnodes.insert(cap.base, VNode::new(cap.ty));
        }
    }

    // ----- copy and mint -----

    /// Copies `src` into the empty slot `dest`.
    pub fn copy(&mut self, src: CapRef, dest: CapRef) -> Result<(), CapError> {
        self.mint(src, dest, Rights::ALL, 0)
    }

    /// Copies `src` into `dest` with its rights masked by `rights` and, for an
    /// unbadged Endpoint or Notification, the badge `badge` (0: none).
    pub fn mint(
        &mut self,
        src: CapRef,
        dest: CapRef,
        rights: Rights,
        badge: u64,
    ) -> Result<(), CapError> {
        let (_, cap) = self.s.lookup(src)?;
        if cap.ty.is_mapping() {
            return Err(CapError::WrongType {
                op: "copy",
                found: cap.ty,
            });
        }
        if badge != 0 {
            if !matches!(cap.ty, Endpoint | Notification) {
                return Err(CapError::NotBadgeable(cap.ty));
            }
            if cap.badge != 0 {
                return Err(CapError::AlreadyBadged);
            }
        }
        let d = self.s.empty_window(dest, 1)?;
        let mut new = cap;
        new.rights = cap.rights.intersect(rights);
        if badge != 0 {
            new.badge = badge;
        }
        self.install(d, new);
        Ok(())
    }

    // ----- retype -----

    /// Barrelfish's offset-based retype: `count` objects of `objsize` bytes of
    /// type `ty` from `offset` in `src`, into consecutive slots from `dest`.
    /// Any disjoint part of the source may be retyped; overlap with an
    /// existing descendant is found by a range query (seed 001 §4.2).
    pub fn retype(
        &mut self,
        src: CapRef,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
        dest: CapRef,
    ) -> Result<(), CapError> {
        let plan = self.retype_plan(src, ty, offset, objsize, count)?;
        if self.descendant_overlaps(&plan.src.key(), plan.base, plan.bytes()) {
            return Err(CapError::RevokeFirst);
        }
        self.retype_into(&plan, dest).map(|_| ())
    }

    /// The checks of [`Caps::retype`] that come before the search for
    /// descendants in the way, in the same order.
    pub fn retype_plan(
        &self,
        src: CapRef,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
    ) -> Result<RetypePlan, CapError> {
        let (_, s) = self.s.lookup(src)?;
        self.plan_from(s, ty, offset, objsize, count)
    }

    /// [`Caps::retype_plan`] of a source already looked up.
    pub(crate) fn plan_from(
        &self,
        s: Cap,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
    ) -> Result<RetypePlan, CapError> {
        if ty.is_mapping() {
            return Err(CapError::RetypeMappingExplicit);
        }
        if !s.ty.can_retype_to(ty) {
            return Err(CapError::InvalidRetype { from: s.ty, to: ty });
        }
        self.check_objsize(ty, objsize)?;
        let align = if ty.fixed_size(&self.config).is_some() && !ty.is_vnode() {
            objsize.min(PAGE)
        } else {
            PAGE
        };
        if !offset.is_multiple_of(align) || !(s.base + offset).is_multiple_of(align) {
            return Err(CapError::InvalidOffset { offset });
        }
        let max = s.size / objsize;
        if count == 0 || count > max {
            return Err(CapError::InvalidCount { count, max });
        }
        if offset > s.size - count * objsize {
            return Err(CapError::InvalidOffset { offset });
        }
        Ok(RetypePlan {
            src: s,
            ty,
            base: s.base + offset,
            objsize,
            count,
        })
    }

    /// Makes the objects of a checked plan in `count` empty slots from
    /// `dest`; returns the first slot id.
    pub fn retype_into(&mut self, plan: &RetypePlan, dest: CapRef) -> Result<CapId, CapError> {
        let first = self.s.empty_window(dest, plan.count)?;
        let slots = (plan.objsize / SLOT_BYTES) as u32;
        for i in 0..plan.count {
            let cap = Cap::new(plan.ty, plan.base + i * plan.objsize, plan.objsize);
            self.create_object(&cap, slots);
            self.install(first + i as u32, cap);
        }
        Ok(first)
    }

    fn check_objsize(&self, ty: CapType, size: u64) -> Result<(), CapError> {
        let ok = match ty {
            L1CNode => {
                size >= ty.granule()
                    && size.is_multiple_of(ty.granule())
                    && size / SLOT_BYTES <= u32::MAX as u64
            }
            PhysAddr | Ram | DevFrame | Frame => size > 0 && size.is_multiple_of(PAGE),
            _ => ty.fixed_size(&self.config) == Some(size),
        };
        if ok {
            Ok(())
        } else {
            Err(CapError::InvalidSize { size })
        }
    }

    /// Whether a descendant of the capabilities with key `k` overlaps
    /// `[base, base + len)`: the region is free for a retype of `k` when
    /// nothing lies inside or across it and the tightest entry around it is
    /// `k` or one of its ancestors. Asked of a node that holds no copy of `k`,
    /// it answers for that node's part of the system.
    pub fn descendant_overlaps(&self, k: &Key, base: u64, len: u64) -> bool {
        let found = self.mdb.query(k.root, base, len, Relation::Surrounding);
        match found.relation {
            Relation::NotFound => false,
            Relation::Surrounding => {
                let tightest = found.id.and_then(|id| self.mdb.key(id));
                tightest.is_some_and(|t| t > *k)
            }
            Relation::Inner | Relation::Partial => true,
        }
    }

    /// seL4's watermark retype (`Untyped_Retype`) of a RAM or DevFrame
    /// capability of power-of-two size, with the kernel's checks in its order
    /// (see [`crate::untyped`]). A region with no descendants left starts again
    /// at offset 0. Objects that the watermark does not know about (made by
    /// the offset mode, or through a copy) are still found by the range query.
    pub fn retype_sel4(
        &mut self,
        src: CapRef,
        ty: ObjectType,
        size_bits: u32,
        count: u64,
        dest: CapRef,
    ) -> Result<(), CapError> {
        let (sid, s) = self.s.lookup(src)?;
        let device = match s.ty {
            Ram => false,
            DevFrame => true,
            found => {
                return Err(CapError::WrongType {
                    op: "seL4 retype",
                    found,
                })
            }
        };
        if !s.size.is_power_of_two() || s.base % s.size != 0 {
            return Err(CapError::InvalidSize { size: s.size });
        }
        let bits = s.size.trailing_zeros();
        let mut ut = match self.untypeds.get(&sid) {
            Some(ut) => ut.clone(),
            None if device => Untyped::device(bits),
            None => Untyped::new(bits),
        };
        if !self.mdb.has_descendants(sid) {
            ut.revoke();
        }
        let (cn, index) = self.s.resolve_cnode(dest)?;
        let first_slot = cn.first + index;
        let occupied: Vec<bool> = (cn.first..cn.first + cn.slots)
            .map(|i| self.s.slots[i as usize].is_some())
            .collect();
        let dest = Dest {
            slots: &occupied,
            offset: index as usize,
        };
        let p = ut
            .retype(&self.config, ty, size_bits, count, dest)
            .map_err(CapError::Sel4)?;
        let base = s.base + p.first;
        if self.descendant_overlaps(&s.key(), base, p.bytes()) {
            return Err(CapError::RevokeFirst);
        }
        self.untypeds.insert(sid, ut);
        let cty = CapType::from_sel4(ty, &self.config, device);
        for i in 0..count {
            let cap = Cap::new(cty, base + (i << p.bits), 1 << p.bits);
            self.create_object(&cap, 1 << size_bits.min(31));
            self.install(first_slot + i as u32, cap);
        }
        Ok(())
    }

    // ----- delete and revoke -----

    /// Deletes the capability in `r`. Deleting the last copy destroys the
    /// object: a CNode's slots are deleted (cascading through CNodes it
    /// holds), a page table's mappings go, and so do the mappings of a frame
    /// or table.
    pub fn delete(&mut self, r: CapRef) -> Result<(), CapError> {
        let (id, _) = self.s.lookup(r)?;
        self.delete_cascade(id);
        Ok(())
    }

    /// Deletes every copy and every descendant of the capability in `r`,
    /// which stays. Its memory is free for retype again.
    pub fn revoke(&mut self, r: CapRef) -> Result<(), CapError> {
        let (id, cap) = self.s.lookup(r)?;
        let k = cap.key();
        loop {
            let mut next = self.mdb.seek(&k, true);
            if next == Some(id) {
                next = self.mdb.successor(id);
            }
            let Some(n) = next else { break };
            let nk = self.mdb.key(n).expect("seek returns entries");
            if nk == k || (nk.root == k.root && nk.base < k.end()) {
                self.delete_cascade(n);
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Mark then sweep (seed 001 §4.3): CNodes whose last capability goes
    /// are marked and queued instead of emptied recursively; the queue is
    /// worked through, adding CNodes found inside; a CNode already marked is
    /// not queued again, which ends cycles. The emptied CNodes are then
    /// freed in reverse order, as a stack.
    fn delete_cascade(&mut self, id: CapId) {
        let mut marked: Vec<u64> = Vec::new();
        self.delete_one(id, &mut marked);
        let mut i = 0;
        while i < marked.len() {
            for slot in self.cnode_slots(marked[i]) {
                self.delete_one(slot, &mut marked);
            }
            i += 1;
        }
        while let Some(base) = marked.pop() {
            self.s.destroy_cnode(base);
        }
    }

    fn delete_one(&mut self, id: CapId, marked: &mut Vec<u64>) {
        if self.s.slots[id as usize].is_some() {
            let fate = self.local_fate(id);
            self.remove_as(id, fate, marked);
        }
    }

    /// What deleting `id` would do if this system were the whole system.
    pub(crate) fn local_fate(&self, id: CapId) -> Fate {
        if self.mdb.has_copies(id) {
            Fate::COPY
        } else {
            self.last_fate(id)
        }
    }

    /// What deleting `id`, the last copy anywhere, does if this system holds
    /// every capability over its memory.
    pub(crate) fn last_fate(&self, id: CapId) -> Fate {
        let ram = self.s.cap(id).is_some_and(|c| c.ty.is_ram_backed());
        Fate {
            last: true,
            orphan: ram && !self.mdb.has_ancestors(id) && !self.mdb.has_descendants(id),
        }
    }

    /// Deletes the capability in slot `id` as `fate` says: the last copy
    /// destroys its object (a CNode is marked and its base pushed on
    /// `marked`, its slots left to the caller), an orphan's memory goes to
    /// [`Caps::take_reclaimed`]. The cross-core protocol decides `fate`.
    pub(crate) fn remove_as(&mut self, id: CapId, fate: Fate, marked: &mut Vec<u64>) {
        let cap = self.s.slots[id as usize].take().expect("a live slot");
        self.mdb.remove(id).expect("a live cap is in the mdb");
        self.untypeds.remove(&id);
        if fate.last {
            self.destroy(&cap, marked);
        }
        if fate.orphan {
            self.reclaimed.push((cap.base, cap.size));
        }
    }

    /// The slot ids of the CNode object at `base`.
    pub(crate) fn cnode_slots(&self, base: u64) -> core::ops::Range<CapId> {
        let cn = &self.s.cnodes[self.s.by_base[&base] as usize];
        cn.first..cn.first + cn.slots
    }

    /// Frees the CNode object at `base`, whose slots are all empty.
    pub(crate) fn free_cnode(&mut self, base: u64) {
        self.s.destroy_cnode(base);
    }

    /// What deleting the last capability to an object does.
    fn destroy(&mut self, cap: &Cap, marked: &mut Vec<u64>) {
        if let Some(m) = cap.map {
            if let Some(v) = self.vnodes.get_mut(&m.ptable) {
                let e = m.entry as usize;
                v.entries[e..e + m.pte_count as usize].fill(None);
            }
        }
        if cap.ty.mapping_type().is_some() {
            for id in self.mappings_of(cap) {
                self.delete_one(id, marked);
            }
        }
        if cap.ty.is_vnode() {
            let v = self
                .vnodes
                .remove(&cap.base)
                .expect("a vnode cap has its table");
            let mut owners: Vec<CapId> = v.entries.iter().flatten().map(|p| p.mapping).collect();
            owners.dedup();
            for id in owners {
                self.delete_one(id, marked);
            }
        }
        if cap.ty.is_cnode() {
            let idx = self.s.by_base[&cap.base] as usize;
            let cn = &mut self.s.cnodes[idx];
            if !cn.in_delete {
                cn.in_delete = true;
                marked.push(cap.base);
            }
        }
    }

    /// The Mapping capabilities that map exactly the object `cap` names. A
    /// mapping sits at the first byte it maps, so they all lie in the run of
    /// entries after `cap` that start inside it.
    fn mappings_of(&self, cap: &Cap) -> Vec<CapId> {
        let k = cap.key();
        let mut out = Vec::new();
        let mut n = self.mdb.seek(&k, false);
        while let Some(id) = n {
            let c = self.s.cap(id).expect("mdb entries are live");
            if c.ty.root() != k.root || c.base >= cap.end() {
                break;
            }
            if let Some(m) = c.map {
                if (m.target, m.target_base, m.target_size) == (cap.ty, cap.base, cap.size) {
                    out.push(id);
                }
            }
            n = self.mdb.successor(id);
        }
        out
    }

    // ----- what a replica in the cross-core protocol asks -----

    /// A core's system that starts with just `root`, an L1 CNode capability
    /// made by another core: its object is made here and the capability put
    /// in its own slot 0, as `boot` does for the first domain.
    pub(crate) fn with_root(config: Config, root: Cap) -> (Caps<M>, CSpace) {
        let mut caps = Caps::empty(config);
        caps.create_object(&root, (root.size / SLOT_BYTES) as u32);
        let cspace = caps.s.cspace_of(root.base).expect("just made");
        let first = caps.s.cnodes[cspace.cnode as usize].first;
        caps.install(first, root);
        (caps, cspace)
    }

    /// Whether `r` resolves through a CNode that a delete is emptying.
    pub(crate) fn in_emptied_cnode(&self, r: CapRef) -> bool {
        let root = self.s.cnodes.get(r.cspace.cnode as usize);
        root.is_some_and(|c| c.live && c.in_delete)
            || self.s.resolve_cnode(r).is_ok_and(|(c, _)| c.in_delete)
    }

    /// The slot id and capability `r` names.
    pub(crate) fn lookup(&self, r: CapRef) -> Result<(CapId, Cap), CapError> {
        self.s.lookup(r)
    }

    /// The capability in slot `id`.
    pub(crate) fn cap(&self, id: CapId) -> Option<Cap> {
        self.s.cap(id).copied()
    }

    /// Puts `cap`, received from another core, in the empty slot `dest`.
    pub(crate) fn install_at(&mut self, dest: CapRef, cap: Cap) -> Result<CapId, CapError> {
        let id = self.s.empty_window(dest, 1)?;
        self.install(id, cap);
        Ok(id)
    }

    /// The slots holding a capability with key `k`.
    pub(crate) fn copies_of(&self, k: &Key) -> Vec<CapId> {
        let mut out = Vec::new();
        let mut n = self.mdb.seek(k, true);
        while let Some(id) = n.filter(|&id| self.mdb.key(id) == Some(*k)) {
            out.push(id);
            n = self.mdb.successor(id);
        }
        out
    }

    /// What a revoke of `k` deletes here: every copy and every descendant.
    pub(crate) fn revoke_scope(&self, k: &Key) -> Vec<CapId> {
        let mut out = Vec::new();
        let mut n = self.mdb.seek(k, true);
        while let Some(id) = n {
            let nk = self.mdb.key(id).expect("seek returns entries");
            if !revoked_by(&nk, k) {
                break;
            }
            out.push(id);
            n = self.mdb.successor(id);
        }
        out
    }

    /// Whether any capability here overlaps `[base, base + size)`.
    pub(crate) fn overlaps(&self, root: u8, base: u64, size: u64) -> bool {
        let found = self.mdb.query(root, base, size, Relation::NotFound);
        found.relation != Relation::NotFound
    }

    /// Every capability reachable in the CSpace `cs`: its root CNode's slots
    /// and the slots of the L2 CNodes they hold, by reference.
    pub fn cspace_caps(&self, cs: CSpace) -> Result<Vec<(CapRef, Cap)>, CapError> {
        let (root, _) = self.s.resolve_cnode(CapRef::l1(cs, 0))?;
        let mut out = Vec::new();
        for i in 0..root.slots {
            let Some(c) = self.s.slots[(root.first + i) as usize] else {
                continue;
            };
            out.push((CapRef::l1(cs, i), c));
            if c.ty == L2CNode {
                for j in 0..=u8::MAX {
                    let r = CapRef::l2(cs, i, j);
                    if let Ok((_, c2)) = self.s.lookup(r) {
                        out.push((r, c2));
                    }
                }
            }
        }
        Ok(out)
    }

    // ----- page tables -----

    /// Installs `count` entries from `entry` in the page table `table` that
    /// map `src` from byte `offset` (a frame's pages, or one next-level
    /// table) with `flags`, and puts the Mapping capability in `mapping`.
    #[allow(clippy::too_many_arguments)]
    pub fn map(
        &mut self,
        table: CapRef,
        src: CapRef,
        entry: u64,
        offset: u64,
        count: u64,
        flags: Rights,
        mapping: CapRef,
    ) -> Result<(), CapError> {
        let (_, t) = self.s.lookup(table)?;
        if !t.ty.is_vnode() {
            return Err(CapError::NotAPageTable(t.ty));
        }
        if !t.rights.contains(Rights::WRITE) {
            return Err(CapError::MissingRights {
                needed: Rights::WRITE,
                held: t.rights,
            });
        }
        let (_, c) = self.s.lookup(src)?;
        let slot = accepts(t.ty, c.ty).ok_or(CapError::InvalidMapping {
            table: t.ty,
            child: c.ty,
        })?;
        if !c.rights.contains(flags) {
            return Err(CapError::MissingRights {
                needed: flags,
                held: c.rights,
            });
        }
        if count == 0 || entry >= PT_ENTRIES || count > PT_ENTRIES - entry {
            return Err(CapError::InvalidEntry { entry, count });
        }
        let (step, is_table) = match slot {
            Slot::Table(_) if count != 1 => return Err(CapError::InvalidEntry { entry, count }),
            Slot::Table(_) if offset != 0 => return Err(CapError::InvalidOffset { offset }),
            Slot::Table(_) => (0, true),
            Slot::Pages(page) => {
                let fits = offset <= c.size && (c.size - offset) / page >= count;
                if !offset.is_multiple_of(page) || !(c.base + offset).is_multiple_of(page) || !fits
                {
                    return Err(CapError::InvalidOffset { offset });
                }
                (page, false)
            }
        };
        let v = &self.vnodes[&t.base];
        if let Some(e) = (entry..entry + count).find(|&e| v.entries[e as usize].is_some()) {
            return Err(CapError::EntryInUse { entry: e });
        }
        let mid = self.s.empty_window(mapping, 1)?;
        let m = Cap {
            ty: c.ty.mapping_type().expect("accepted types are mappable"),
            base: c.base + offset,
            size: 1,
            rights: c.rights,
            badge: 0,
            map: Some(MapInfo {
                ptable: t.base,
                entry: entry as u16,
                pte_count: count as u16,
                offset,
                target: c.ty,
                target_base: c.base,
                target_size: c.size,
                flags,
            }),
        };
        let v = self.vnodes.get_mut(&t.base).expect("checked above");
        for i in 0..count {
            v.entries[(entry + i) as usize] = Some(Pte {
                phys: c.base + offset + i * step,
                table: is_table,
                flags,
                mapping: mid,
            });
        }
        self.install(mid, m);
        Ok(())
    }

    /// Removes the mapping `mapping` from `table` and deletes its capability.
    pub fn unmap(&mut self, table: CapRef, mapping: CapRef) -> Result<(), CapError> {
        let (_, t) = self.s.lookup(table)?;
        if !t.ty.is_vnode() {
            return Err(CapError::NotAPageTable(t.ty));
        }
        let (mid, m) = self.mapping(mapping, "unmap")?;
        if m.ptable != t.base {
            return Err(CapError::MappingNotInTable);
        }
        self.delete_cascade(mid);
        Ok(())
    }

    /// Sets the flags of `pages` entries of a mapping from its `first`.
    pub fn modify_flags(
        &mut self,
        mapping: CapRef,
        first: u64,
        pages: u64,
        flags: Rights,
    ) -> Result<(), CapError> {
        let (mid, m) = self.mapping(mapping, "modify_flags")?;
        let count = m.pte_count as u64;
        if pages == 0 || first >= count || pages > count - first {
            return Err(CapError::InvalidEntry {
                entry: first,
                count: pages,
            });
        }
        let held = self.s.cap(mid).expect("looked up").rights;
        if !held.contains(flags) {
            return Err(CapError::MissingRights {
                needed: flags,
                held,
            });
        }
        let v = self
            .vnodes
            .get_mut(&m.ptable)
            .expect("a live mapping has its table");
        let e = m.entry as u64 + first;
        for pte in v.entries[e as usize..(e + pages) as usize]
            .iter_mut()
            .flatten()
        {
            pte.flags = flags;
        }
        Ok(())
    }

    fn mapping(&self, r: CapRef, op: &'static str) -> Result<(CapId, MapInfo), CapError> {
        let (id, c) = self.s.lookup(r)?;
        match c.map {
            Some(m) => Ok((id, m)),
            None => Err(CapError::WrongType { op, found: c.ty }),
        }
    }
}

/// Whether a capability with key `c` is in the way of a retype of `k` over
/// `[base, base + len)`: [`Caps::descendant_overlaps`] asked of one
/// capability (it is true exactly when some capability of the database is
/// in the way). For a capability seen outside a database: one in flight.
pub(crate) fn in_the_way(c: &Key, k: &Key, base: u64, len: u64) -> bool {
    match Relation::of(c, k.root, base, len) {
        Relation::NotFound => false,
        Relation::Surrounding => c > k,
        Relation::Inner | Relation::Partial => true,
    }
}

/// Whether a revoke of `k` deletes a capability with key `c`: a copy, or
/// what follows `k` in the mapping database's order inside its memory
/// (what [`Caps::revoke_scope`] lists).
pub(crate) fn revoked_by(c: &Key, k: &Key) -> bool {
    c >= k && c.root == k.root && c.base < k.end()
}
