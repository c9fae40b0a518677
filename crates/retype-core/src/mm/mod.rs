//! The CantripOS memory manager (seed 000) over untyped slabs.
//!
//! A request is a bundle of object descriptors (type, size, count), served all
//! or nothing. A [`Policy`] picks the slab for each descriptor;
//! the simulated [`Kernel`] retypes the objects and hands out capabilities.
//! A free deletes the capabilities; for each object whose final capability
//! went the kernel returns its physical address, and the manager charges the
//! free to the slab holding that address (a binary search over the slabs'
//! bases: O(log n)), exactly as the improved CantripOS design of seed 000
//! §3.3 does. [`Stats`] are current after every operation, counted as the
//! thesis defines them or, for comparing with CantripOS's logs, with its own
//! counters' quirks ([`Accounting`]).

pub mod accounting;
mod allocation;
pub mod layout;
pub mod policy;
pub mod slab;
pub mod slabs;

use alloc::vec::Vec;
use core::fmt;

use allocation::{Allocation, Allocations, Placed};

use crate::kernel::{Kernel, UtId};
use crate::objects::{Config, ObjectType, SizeError};
use crate::untyped::FAN_OUT_LIMIT;
pub use accounting::{Accounting, Quirk};

/// 4 KiB: the frames CantripOS combines into one descriptor when freeing.
const PAGE_BITS: u32 = 12;
pub use layout::Layout;
pub use policy::PolicyKind;
use policy::{AnyPolicy, Policy};
use slab::{Slab, WatermarkRule};
use slabs::Slabs;

/// One object descriptor of a request: `count` objects of type `ty`.
/// `size_bits` matters only for the variable-size types (untyped, CNode
/// slots, scheduling context), as in seL4's `Untyped_Retype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjDesc {
    pub ty: ObjectType,
    pub size_bits: u32,
    pub count: u32,
}

impl ObjDesc {
    pub fn new(ty: ObjectType, size_bits: u32, count: u32) -> ObjDesc {
        ObjDesc {
            ty,
            size_bits,
            count,
        }
    }
}

/// Why a request was refused. Every refusal leaves the manager unchanged
/// except [`AllocError::OutOfMemory`], which is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// A request with no descriptors.
    Empty,
    /// A descriptor with count 0, or above the kernel's fan-out limit.
    BadCount { desc: usize, count: u32 },
    /// The type and size_bits give no valid object.
    BadSize { desc: usize, error: SizeError },
    /// The objects are larger than the largest slab: no state could serve them.
    TooLarge {
        desc: usize,
        bytes: u64,
        largest: u64,
    },
    /// No slab could serve a descriptor now.
    OutOfMemory { desc: usize },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::Empty => write!(f, "empty request"),
            AllocError::BadCount { desc, count } => write!(
                f,
                "descriptor {desc}: count {count} is outside 1..={FAN_OUT_LIMIT}"
            ),
            AllocError::BadSize { desc, error } => match error {
                SizeError::Range { max } => {
                    write!(
                        f,
                        "descriptor {desc}: object size out of range (at most 2^{max} bytes)"
                    )
                }
                SizeError::InvalidArgument { arg: 0 } => {
                    write!(
                        f,
                        "descriptor {desc}: object type not available in this kernel"
                    )
                }
                SizeError::InvalidArgument { .. } => write!(f, "descriptor {desc}: bad size bits"),
            },
            AllocError::TooLarge {
                desc,
                bytes,
                largest,
            } => write!(
                f,
                "descriptor {desc}: {bytes} bytes do not fit the largest slab ({largest} bytes)"
            ),
            AllocError::OutOfMemory { desc } => write!(f, "descriptor {desc}: out of memory"),
        }
    }
}

impl core::error::Error for AllocError {}

/// Why a free was refused; the manager is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeError {
    /// No live allocation has this handle.
    Unknown(AllocId),
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreeError::Unknown(id) => write!(f, "allocation {} is not live", id.0),
        }
    }
}

impl core::error::Error for FreeError {}

/// Names a live allocation (one served request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocId(pub u32);

/// The counters of seed 000, current after every operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stats {
    pub bytes_in_use: u64,
    pub objects_in_use: u64,
    /// Bytes of all requests served so far (the time axis of the profiles).
    pub bytes_requested: u64,
    pub failed_retypes: u64,
    pub ooms: u64,
    pub slab_resets: u64,
    /// Watermarking fragmentation summed over slabs.
    pub frag_watermark: u64,
    /// Alignment fragmentation summed over slabs.
    pub frag_alignment: u64,
}

impl Stats {
    pub fn frag_total(&self) -> u64 {
        self.frag_watermark + self.frag_alignment
    }
}

/// The memory manager.
#[derive(Clone)]
pub struct MemoryManager {
    books: Books,
    live: Allocations,
    /// The object sizes (log2) of the request being served, kept between
    /// requests for its capacity.
    bits: Vec<u32>,
}

/// Everything a request changes but the allocation table, kept apart from it
/// so that a table entry can be filled and released in place.
#[derive(Clone)]
struct Books {
    kernel: Kernel,
    slabs: Slabs,
    /// The kernel's untyped behind each slab (kept rule only).
    untypeds: Vec<UtId>,
    /// Slab bases in increasing order and the slab at each, to find a slab
    /// from an address by binary search.
    bases: Vec<u64>,
    by_base: Vec<u32>,
    policy: AnyPolicy,
    rule: WatermarkRule,
    accounting: Accounting,
    stats: Stats,
    largest: u64,
}

impl MemoryManager {
    /// A manager over `layout` placing with `policy` under `rule`.
    pub fn new(
        config: Config,
        layout: &Layout,
        rule: WatermarkRule,
        policy: PolicyKind,
    ) -> MemoryManager {
        let mut kernel = Kernel::new(config);
        let mut slabs = Vec::new();
        let mut untypeds = Vec::new();
        for (base, bits) in layout.regions() {
            slabs.push(Slab::new(base, bits, rule));
            untypeds.push(kernel.add_untyped(base, bits));
        }
        let mut by_base: Vec<u32> = (0..slabs.len() as u32).collect();
        by_base.sort_by_key(|&i| slabs[i as usize].base());
        let bases = by_base.iter().map(|&i| slabs[i as usize].base()).collect();
        let largest = slabs.iter().map(Slab::size).max().unwrap_or(0);
        let books = Books {
            policy: AnyPolicy::new(policy, &slabs),
            kernel,
            slabs: Slabs::new(slabs),
            untypeds,
            bases,
            by_base,
            rule,
            accounting: Accounting::THESIS,
            stats: Stats::default(),
            largest,
        };
        MemoryManager {
            books,
            live: Allocations::default(),
            bits: Vec::new(),
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.books.stats
    }

    pub fn slabs(&self) -> &[Slab] {
        &self.books.slabs
    }

    pub fn policy(&self) -> PolicyKind {
        self.books.policy.kind()
    }

    pub fn rule(&self) -> WatermarkRule {
        self.books.rule
    }

    /// The same manager counting under `accounting` (the thesis's by default).
    /// Set before the first request: it changes counters, not placement.
    pub fn with_accounting(mut self, accounting: Accounting) -> MemoryManager {
        self.books.accounting = accounting;
        self
    }

    pub fn accounting(&self) -> Accounting {
        self.books.accounting
    }

    /// Serves a request, all or nothing. When a later descriptor cannot be
    /// placed the objects already made for the request are deleted again
    /// (CantripOS leaks them; we do not) and the request counts as one OOM.
    pub fn alloc(&mut self, request: &[ObjDesc]) -> Result<AllocId, AllocError> {
        self.books.validate(request, &mut self.bits)?;
        let (id, entry) = self.live.vacant();
        let served = self.books.place(request, &self.bits, entry);
        if served.is_err() {
            self.live.vacate(id);
        }
        served.map(|()| id)
    }

    /// Frees every object of a served request.
    pub fn free(&mut self, id: AllocId) -> Result<(), FreeError> {
        if self.books.accounting.has(Quirk::SplitFreeKeepsBytes) {
            return self.free_request(&[id]);
        }
        let a = self.live.get(id).ok_or(FreeError::Unknown(id))?;
        self.books.release(a, &[]);
        self.live.vacate(id);
        Ok(())
    }

    /// Frees several served requests as one request (an application exiting),
    /// all or nothing: the manager is unchanged if any id is not live.
    pub fn free_request(&mut self, ids: &[AllocId]) -> Result<(), FreeError> {
        for (k, &id) in ids.iter().enumerate() {
            if self.live.get(id).is_none() || ids[..k].contains(&id) {
                return Err(FreeError::Unknown(id));
            }
        }
        if !self.books.accounting.has(Quirk::SplitFreeKeepsBytes) {
            return ids.iter().try_for_each(|&id| self.free(id));
        }
        let keep = self.keeps_bytes(ids);
        let mut from = 0;
        for &id in ids {
            let a = self.live.get(id).expect("checked live");
            let to = from + a.placed.len();
            self.books.release(a, &keep[from..to]);
            self.live.vacate(id);
            from = to;
        }
        Ok(())
    }

    /// For each descriptor of `ids` (live, freed as one request), in order,
    /// whether its bytes stay counted in the slabs that keep objects
    /// ([`Quirk::SplitFreeKeepsBytes`]): the request's descriptors as CantripOS
    /// frees them (adjacent page descriptors combined while they do not
    /// shrink), and those whose objects lie in several slabs keep their bytes.
    fn keeps_bytes(&self, ids: &[AllocId]) -> Vec<bool> {
        let placed: Vec<&Placed> = ids
            .iter()
            .flat_map(|&id| &self.live.get(id).expect("live").placed)
            .collect();
        // Pages, no fewer than the descriptor before.
        let joins = |a: &Placed, b: &Placed| {
            a.bits == PAGE_BITS && b.bits == PAGE_BITS && b.count >= a.count
        };
        let mut keep = alloc::vec![false; placed.len()];
        let mut start = 0;
        while start < placed.len() {
            let mut end = start + 1;
            while end < placed.len() && joins(placed[end - 1], placed[end]) {
                end += 1;
            }
            let split = placed[start..end]
                .iter()
                .any(|p| p.slab != placed[start].slab);
            keep[start..end].fill(split);
            start = end;
        }
        keep
    }

    /// Where the objects of a live allocation are: `(slab, object bits, count)`
    /// per descriptor.
    pub fn placement(&self, id: AllocId) -> Option<impl Iterator<Item = (u32, u32, u32)> + '_> {
        let a = self.live.get(id)?;
        Some(a.placed.iter().map(|p| (p.slab, p.bits, p.count)))
    }

    /// Feeds `h` everything that decides how later requests are placed and
    /// counted: the counters, every slab and the policy's own state (the
    /// kernel's view follows the slabs). The recovery of logged requests
    /// merges branches whose managers fingerprint alike; off the hot path.
    pub fn fingerprint(&self, h: &mut impl core::hash::Hasher) {
        use core::hash::Hash;
        self.books.stats.hash(h);
        self.slabs().hash(h);
        self.books.policy.hash(h);
    }

    /// The counters as they would be after freeing `ids`, without freeing.
    /// Assumes every object has one capability (no copies), as the manager
    /// hands them out.
    pub fn preview_free(&self, ids: &[AllocId]) -> Option<Stats> {
        self.preview_free_slabs(ids).map(|(stats, _)| stats)
    }

    /// As [`MemoryManager::preview_free`], with the slabs the free would
    /// change as they would be after it (by slab index).
    pub fn preview_free_slabs(
        &self,
        ids: &[AllocId],
    ) -> Option<(Stats, alloc::collections::BTreeMap<u32, Slab>)> {
        let books = &self.books;
        let mut stats = books.stats;
        let mut touched: alloc::collections::BTreeMap<u32, Slab> =
            alloc::collections::BTreeMap::new();
        if ids.iter().any(|&id| self.live.get(id).is_none()) {
            return None;
        }
        let keep = if books.accounting.has(Quirk::SplitFreeKeepsBytes) {
            self.keeps_bytes(ids)
        } else {
            Vec::new()
        };
        let mut keep = keep.into_iter();
        for &id in ids {
            for p in &self.live.get(id)?.placed {
                let keep = keep.next().unwrap_or(false);
                let slab = touched
                    .entry(p.slab)
                    .or_insert_with(|| books.slabs[p.slab as usize].clone());
                let (count, size) = (u64::from(p.count), 1u64 << p.bits);
                stats.slab_resets += slab.release_counted(p.first, count, size, keep) as u64;
                stats.bytes_in_use -= count * size;
                stats.objects_in_use -= count;
            }
        }
        for (s, after) in &touched {
            let before = &books.slabs[*s as usize];
            stats.frag_watermark =
                stats.frag_watermark + after.frag_watermark() - before.frag_watermark();
            stats.frag_alignment =
                stats.frag_alignment + after.frag_alignment() - before.frag_alignment();
        }
        Some((stats, touched))
    }

    /// The live objects of every slab as `(offset, size)`, recomputed from the
    /// allocations: what tests compare the incremental bookkeeping against.
    pub fn live_objects(&self) -> Vec<Vec<(u64, u64)>> {
        let mut per_slab = alloc::vec![Vec::new(); self.books.slabs.len()];
        for a in self.live.iter() {
            for p in &a.placed {
                for i in 0..u64::from(p.count) {
                    per_slab[p.slab as usize].push((p.first + (i << p.bits), 1u64 << p.bits));
                }
            }
        }
        per_slab
    }

    /// The kernel's view of slab `s`: its watermark and live children.
    pub fn kernel_untyped(&self, s: usize) -> Option<&crate::untyped::Untyped> {
        let books = &self.books;
        (books.rule == WatermarkRule::Kept).then(|| {
            books
                .kernel
                .untyped(books.untypeds[s])
                .expect("slab untyped")
        })
    }
}

impl Books {
    /// Puts the object size (log2) of every descriptor in `bits`, or names
    /// the first bad descriptor.
    fn validate(&self, request: &[ObjDesc], bits: &mut Vec<u32>) -> Result<(), AllocError> {
        if request.is_empty() {
            return Err(AllocError::Empty);
        }
        let config = self.kernel.config();
        let largest = self.largest;
        bits.clear();
        for (desc, d) in request.iter().enumerate() {
            if d.count == 0 || u64::from(d.count) > FAN_OUT_LIMIT {
                return Err(AllocError::BadCount {
                    desc,
                    count: d.count,
                });
            }
            let b = config
                .object_bits(d.ty, d.size_bits)
                .map_err(|error| AllocError::BadSize { desc, error })?;
            let bytes = u64::from(d.count) << b;
            if bytes > largest || b >= 64 {
                return Err(AllocError::TooLarge {
                    desc,
                    bytes,
                    largest,
                });
            }
            bits.push(b);
        }
        Ok(())
    }

    /// Places the descriptors of `request` (objects of `2^bits[i]` bytes),
    /// recording them in the empty entry `a`; on failure deletes what it
    /// placed, leaving `a` to be vacated.
    fn place(
        &mut self,
        request: &[ObjDesc],
        bits: &[u32],
        a: &mut Allocation,
    ) -> Result<(), AllocError> {
        self.policy.begin_request();
        let mut requested = 0;
        for (desc, (d, &b)) in request.iter().zip(bits).enumerate() {
            let n = u64::from(d.count);
            let choice = self.policy.choose(&self.slabs, b, n);
            self.stats.failed_retypes += choice.failed_retypes;
            let Some(s) = choice.slab else {
                self.policy.end_request(false);
                self.release(a, &[]);
                self.stats.ooms += 1;
                return Err(AllocError::OutOfMemory { desc });
            };
            // The kernel says where the objects went; the bookkeeping must
            // have known (the property tests check it in debug builds).
            let (first, waste) = match self.rule {
                WatermarkRule::Kept => {
                    let p = self
                        .kernel
                        .retype_sized(self.untypeds[s], b, n, &mut a.caps)
                        .expect("bookkeeping said the kernel's retype fits");
                    debug_assert_eq!(
                        self.slabs.fit(s, b, n).map(|f| (f.first, f.waste)),
                        Some((p.first, p.waste)),
                        "bookkeeping and kernel disagree"
                    );
                    (p.first, p.waste)
                }
                WatermarkRule::Lifted => {
                    let f = self
                        .slabs
                        .fit(s, b, n)
                        .expect("the policy chose a slab that fits");
                    (f.first, f.waste)
                }
            };
            self.update_slab(s, |slab| slab.place(first, waste, b, n));
            let placed = Placed {
                slab: s as u32,
                first,
                bits: b,
                count: d.count,
            };
            a.placed.push(placed);
            requested += placed.bytes();
            self.stats.bytes_in_use += placed.bytes();
            self.stats.objects_in_use += n;
        }
        self.policy.end_request(true);
        self.stats.bytes_requested += requested;
        Ok(())
    }

    /// Deletes the objects of `a` and charges each to its slab; the bytes of
    /// the descriptors `keep` marks (none if empty) stay counted in slabs
    /// that keep objects.
    fn release(&mut self, a: &Allocation, keep: &[bool]) {
        let mut caps = a.caps.iter();
        for (k, p) in a.placed.iter().enumerate() {
            let keep = keep.get(k).copied().unwrap_or(false);
            let size = 1u64 << p.bits;
            match self.rule {
                WatermarkRule::Kept => {
                    // Objects whose final capability went, charged to the slab
                    // found from the first one's address (the others lie next to it).
                    let (mut gone, mut first) = (0, u64::MAX);
                    for _ in 0..p.count {
                        let cap = *caps.next().expect("one capability per object");
                        let deleted = self.kernel.delete(cap).expect("live capability");
                        if let Some(paddr) = deleted.final_paddr {
                            gone += 1;
                            first = first.min(paddr);
                        }
                    }
                    if gone > 0 {
                        let s = self.slab_of(first);
                        debug_assert_eq!(s, p.slab as usize);
                        let offset = first - self.slabs[s].base();
                        self.release_objects(s, offset, gone, size, keep);
                    }
                }
                WatermarkRule::Lifted => {
                    self.release_objects(p.slab as usize, p.first, u64::from(p.count), size, keep)
                }
            }
        }
    }

    fn release_objects(&mut self, s: usize, offset: u64, count: u64, size: u64, keep: bool) {
        let reset = self.update_slab(s, |slab| slab.release_counted(offset, count, size, keep));
        self.stats.slab_resets += reset as u64;
        self.stats.bytes_in_use -= count * size;
        self.stats.objects_in_use -= count;
    }

    /// The slab holding physical address `paddr`.
    fn slab_of(&self, paddr: u64) -> usize {
        let k = self.bases.partition_point(|&b| b <= paddr);
        let s = self.by_base[k.checked_sub(1).expect("address below every slab")] as usize;
        debug_assert!(paddr < self.slabs[s].base() + self.slabs[s].size());
        s
    }

    /// Applies `change` to slab `s`, keeping the fragmentation totals and the
    /// policy's view current.
    fn update_slab<R>(&mut self, s: usize, change: impl FnOnce(&mut Slab) -> R) -> R {
        let stats = &mut self.stats;
        let r = self.slabs.update(s, |slab| {
            stats.frag_watermark -= slab.frag_watermark();
            stats.frag_alignment -= slab.frag_alignment();
            let r = change(slab);
            stats.frag_watermark += slab.frag_watermark();
            stats.frag_alignment += slab.frag_alignment();
            r
        });
        self.policy.slab_changed(s, &self.slabs[s]);
        r
    }
}
