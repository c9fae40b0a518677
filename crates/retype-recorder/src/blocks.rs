//! The live blocks an aggregate or sampled recording follows, by address:
//! what each was allocated from (its stack, size and thread), so that its
//! free can be counted against them.
//!
//! No allocation and no lock shared by all threads: the table is cut into
//! [`SHARDS`] by the block's 1 MiB region ([`shard`]), each an open-addressing
//! table (linear probing, deletion by backward shift, so no tombstones)
//! behind its own spin lock, in memory mapped here and doubled when half full.
//! A block's slot is placed by its address ([`home`]): the blocks of one
//! 256-byte stretch of memory take neighbouring slots, so that blocks allocated
//! or freed together (a program's neighbouring objects) share the table's
//! cache lines, as they share the heap's. A small
//! counting filter (a counter per hash bucket, beside the table) answers
//! "surely not here" without a lock: a sampled recording asks it on every
//! free, and nearly every block is not sampled. An aggregate recording,
//! which follows every block, keeps no filter (one shared atomic add less a call).

use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::sys;

/// What is kept of a live block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub size: u64,
    /// The stack id it was allocated from (0: none).
    pub stack: u32,
    /// Where the last allocation of the thread that allocated it is kept
    /// ([`crate::aggregate`]'s slot).
    pub count_at: u32,
}

/// 24 bytes: a cache line holds two and a bit.
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    /// The block's address; 0: empty.
    addr: u64,
    entry: Entry,
}

/// Shards (a power of two): threads contend only when their blocks' regions share one.
const SHARDS: usize = 64;
/// Slots of a shard's first table (a power of two).
const FIRST: usize = 1024;
/// Buckets of the filter (a power of two).
const FILTER: usize = 1 << 16;

/// A cache line each, so that threads using two shards do not pass a line
/// between their cores (and a shard is found by a shift).
#[repr(align(64))]
struct Shard {
    lock: AtomicBool,
    table: UnsafeCell<Table>,
    /// The table's slots and its mask (cap - 1), kept beside it for
    /// [`prefetch`], which reads them without the lock: a stale pair only
    /// prefetches a line that is not the slot's.
    slots_hint: AtomicPtr<Slot>,
    mask_hint: AtomicUsize,
}

struct Table {
    slots: *mut Slot,
    /// Slots (a power of two, or 0 before the first insert) and those in use.
    cap: usize,
    len: usize,
}

// SAFETY: a shard's table is touched only by the holder of its lock.
unsafe impl Sync for Shard {}

static SHARD: [Shard; SHARDS] = [const {
    Shard {
        lock: AtomicBool::new(false),
        table: UnsafeCell::new(Table::EMPTY),
        slots_hint: AtomicPtr::new(null_mut()),
        mask_hint: AtomicUsize::new(0),
    }
}; SHARDS];

/// Blocks live per filter bucket (kept by the callers that pass `KEEPS_FILTER`).
static FILTERED: [AtomicU32; FILTER] = [const { AtomicU32::new(0) }; FILTER];

/// Bytes of memory whose blocks take neighbouring slots (a power of two):
/// 256, the most measured that did not lengthen the probes of a table of
/// densely packed blocks (a longer stretch's slots fill runs that others'
/// homes fall into).
const STRETCH: u64 = 256;
/// Bytes of memory per slot of a stretch: 16, blocks' alignment, so that
/// blocks 16 bytes apart have a home each, and glibc's (32 bytes or more
/// apart) leave slots between them free.
const GRAIN: u64 = 16;

/// Where the slot of the block at `addr` is looked for first (before the
/// table's mask): a hash of its [`STRETCH`], plus its place in the
/// stretch. By the address alone (no hash), blocks at a common alignment
/// (a run of page-aligned blocks) would share few homes; by a hash of the
/// whole address, neighbouring blocks would lie a line apart.
fn home(addr: u64) -> u64 {
    // A product's low bits depend only on the factor's low bits (stretches
    // a power of two apart would share them): its upper bits are taken.
    let h = (addr / STRETCH).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24;
    h.wrapping_add(addr % STRETCH / GRAIN)
}

/// The filter's bucket of the block at `addr`: its slot's home, whose low
/// bits keep a stretch's blocks apart, with bits a slot does not use first
/// folded in (the shard uses none: [`shard`]).
fn bucket(addr: u64) -> usize {
    let h = home(addr);
    (h ^ (h >> 16)) as usize & (FILTER - 1)
}

/// Whether a block may be live at `addr`: false means surely not (no lock taken).
#[inline(always)]
pub fn may_hold(addr: u64) -> bool {
    FILTERED[bucket(addr)].load(Ordering::Relaxed) != 0
}

/// Bytes of a shard's slots from which [`prefetch`] fetches (half a 1 MiB
/// second-level cache).
const PREFETCH_FROM: usize = 512 << 10;

/// Whether some shard's slots are [`PREFETCH_FROM`] bytes or more.
static LARGE: AtomicBool = AtomicBool::new(false);

/// Starts loading the slot where the block at `addr` would be kept, so that
/// the work done before [`insert`] hides the miss on a table larger than
/// the caches (a program with many live blocks).
/// Only once a shard's slots outgrow [`PREFETCH_FROM`] bytes: below, they
/// stay in the cache and the prefetch would only add instructions.
#[inline(always)]
pub fn prefetch(addr: u64) {
    if !LARGE.load(Ordering::Relaxed) {
        return;
    }
    let s = shard(addr);
    let slots = s.slots_hint.load(Ordering::Relaxed);
    let i = home(addr) as usize & s.mask_hint.load(Ordering::Relaxed);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address
    // (`wrapping_add`: it need not lie in the slots).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            slots.wrapping_add(i).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slots, i);
}

/// Holds a shard's lock.
struct Held(&'static Shard);

impl Held {
    fn table(&mut self) -> &mut Table {
        // SAFETY: we hold the shard's lock.
        unsafe { &mut *self.0.table.get() }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.lock.store(false, Ordering::Release);
    }
}

/// The shard of the block at `addr`: by the hash of its 1 MiB region, not of
/// its address. Allocators hand each thread blocks from regions of its own
/// (glibc's thread arenas, the runs of a thread cache), so threads that
/// allocate at once use shards of their own, and a shard's lock and slots
/// stay in the cache of the core that uses them (by the address, every
/// thread used every shard, and their lines went from core to core).
fn shard(addr: u64) -> &'static Shard {
    let region = addr >> 20;
    &SHARD[(region.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize & (SHARDS - 1)]
}

/// Takes the lock of the shard of the block at `addr`.
fn lock(addr: u64) -> Held {
    take(shard(addr))
}

fn take(s: &'static Shard) -> Held {
    while s
        .lock
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    Held(s)
}

/// Keeps `e` as the block at `addr`; returns the block that was kept there
/// (its free was not seen). False in the second place if there was no room
/// (the block is not followed). `KEEPS_FILTER`: the filter is kept (a
/// recording's every call passes the same; a constant, not checked a call).
#[inline(always)]
pub fn insert<const KEEPS_FILTER: bool>(addr: u64, e: Entry) -> (Option<Entry>, bool) {
    let h = home(addr);
    let mut held = lock(addr);
    let t = held.table();
    if (t.len + 1) * 2 > t.cap {
        if !t.grow() {
            return (None, false);
        }
        let (slots, mask) = (t.slots, t.cap - 1);
        if t.cap * std::mem::size_of::<Slot>() >= PREFETCH_FROM {
            LARGE.store(true, Ordering::Relaxed);
        }
        held.0.slots_hint.store(slots, Ordering::Relaxed);
        held.0.mask_hint.store(mask, Ordering::Relaxed);
    }
    let t = held.table();
    let mask = t.cap - 1;
    let mut i = h as usize & mask;
    loop {
        // SAFETY: `i` < cap; the slots are mapped and ours under the lock.
        let slot = unsafe { &mut *t.slots.add(i) };
        if slot.addr == addr {
            return (Some(std::mem::replace(&mut slot.entry, e)), true);
        }
        if slot.addr == 0 {
            *slot = Slot { addr, entry: e };
            t.len += 1;
            if KEEPS_FILTER {
                FILTERED[bucket(addr)].fetch_add(1, Ordering::Relaxed);
            }
            return (None, true);
        }
        i = (i + 1) & mask;
    }
}

/// Forgets the block at `addr` and returns it, if one is kept; `KEEPS_FILTER`
/// as in [`insert`].
#[inline(always)]
pub fn remove<const KEEPS_FILTER: bool>(addr: u64) -> Option<Entry> {
    let h = home(addr);
    let mut held = lock(addr);
    let t = held.table();
    if t.cap == 0 {
        return None;
    }
    let mask = t.cap - 1;
    let mut i = h as usize & mask;
    // SAFETY (every slot access below): indexes are masked to cap; ours under the lock.
    let at = |i: usize| unsafe { &mut *t.slots.add(i) };
    loop {
        let slot = at(i);
        if slot.addr == 0 {
            return None;
        }
        if slot.addr == addr {
            break;
        }
        i = (i + 1) & mask;
    }
    let found = at(i).entry;
    // Backward shift: pull each later slot of the run into the hole if its
    // home is not between the hole and it.
    let mut hole = i;
    let mut j = (i + 1) & mask;
    loop {
        let next = at(j).addr;
        if next == 0 {
            break;
        }
        let first = home(next) as usize & mask;
        if (j.wrapping_sub(first) & mask) >= (j.wrapping_sub(hole) & mask) {
            *at(hole) = *at(j);
            hole = j;
        }
        j = (j + 1) & mask;
    }
    at(hole).addr = 0;
    t.len -= 1;
    if KEEPS_FILTER {
        FILTERED[bucket(addr)].fetch_sub(1, Ordering::Relaxed);
    }
    Some(found)
}

impl Table {
    const EMPTY: Table = Table {
        slots: null_mut(),
        cap: 0,
        len: 0,
    };

    /// Doubles the table (maps the first one); false if it cannot be mapped.
    /// Apart from [`insert`], whose frame it would enlarge on every call.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> bool {
        let cap = if self.cap == 0 { FIRST } else { self.cap * 2 };
        let slots = sys::map(cap * std::mem::size_of::<Slot>()).cast::<Slot>();
        if slots.is_null() {
            return false;
        }
        let mask = cap - 1;
        for k in 0..self.cap {
            // SAFETY: `k` < the old cap; the old slots are ours under the lock.
            let s = unsafe { *self.slots.add(k) };
            if s.addr == 0 {
                continue;
            }
            let mut i = home(s.addr) as usize & mask;
            // SAFETY: masked to the new cap; the new slots are ours.
            while unsafe { (*slots.add(i)).addr } != 0 {
                i = (i + 1) & mask;
            }
            // SAFETY: as above.
            unsafe { *slots.add(i) = s };
        }
        self.release();
        self.slots = slots;
        self.cap = cap;
        true
    }

    /// Gives the slots back.
    fn release(&mut self) {
        if !self.slots.is_null() {
            // SAFETY: the slots were mapped by `map` with this many bytes.
            unsafe { libc::munmap(self.slots.cast(), self.cap * std::mem::size_of::<Slot>()) };
        }
    }
}

/// Forgets every block: a new segment starts with none followed (after a
/// failed exec; in a fork child the parent's blocks are the parent's to
/// count). `forked`: the locks of threads the child does not have are let go
/// first.
pub fn clear(forked: bool) {
    for s in &SHARD {
        if forked {
            s.lock.store(false, Ordering::Release);
        }
        let mut held = take(s);
        let t = held.table();
        t.release();
        *t = Table::EMPTY;
        s.slots_hint.store(null_mut(), Ordering::Relaxed);
        s.mask_hint.store(0, Ordering::Relaxed);
    }
    for f in &FILTERED {
        f.store(0, Ordering::Relaxed);
    }
    LARGE.store(false, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    fn entry(size: u64) -> Entry {
        Entry {
            size,
            ..Entry::default()
        }
    }

    /// A region's blocks share a shard; regions spread over the shards
    /// (those of one arena, and arenas 64 MiB apart).
    #[test]
    fn blocks_of_a_region_share_a_shard_and_regions_spread() {
        for base in [0x5555_5000_0000u64, 0x7f12_3400_0000] {
            for r in 0..64 {
                let region = base + (r << 20);
                let first = shard(region);
                for at in (16..1 << 20).step_by(4096 + 16) {
                    assert!(std::ptr::eq(shard(region + at), first));
                }
            }
            for stride in [1u64 << 20, 64 << 20] {
                let used: std::collections::HashSet<*const Shard> = (0..64)
                    .map(|r| shard(base + r * stride) as *const Shard)
                    .collect();
                assert!(used.len() >= 32, "{} shards for 64 regions", used.len());
            }
        }
    }

    /// A shard's slots past [`PREFETCH_FROM`] bytes turn the prefetch on,
    /// and it is told where they are: the slot it fetches is the one a block
    /// is kept in (at its home, the table being at most half full).
    #[test]
    fn the_prefetch_follows_the_table() {
        // A region of its own, far from the other tests'.
        let base = 0x7d00_0000_0000u64;
        let blocks = PREFETCH_FROM / std::mem::size_of::<Slot>() / 2 + 1;
        for k in 0..blocks as u64 {
            assert!(insert::<false>(base + k * 32, entry(k)).1);
        }
        assert!(LARGE.load(Ordering::Relaxed));
        let s = shard(base);
        let mut held = take(s);
        let t = held.table();
        assert!(t.cap * std::mem::size_of::<Slot>() >= PREFETCH_FROM);
        assert_eq!(s.slots_hint.load(Ordering::Relaxed), t.slots);
        assert_eq!(s.mask_hint.load(Ordering::Relaxed), t.cap - 1);
        drop(held);
        for k in 0..blocks as u64 {
            assert_eq!(remove::<false>(base + k * 32), Some(entry(k)));
        }
    }

    /// The blocks of one stretch have neighbouring homes (a home each, 16
    /// bytes apart), and page-aligned blocks, which share their place in a
    /// stretch, still spread over the table.
    #[test]
    fn neighbours_share_lines_and_aligned_blocks_spread() {
        let stretch = 0x5555_5555_0000u64;
        let homes: Vec<u64> = (0..STRETCH / GRAIN)
            .map(|k| home(stretch + k * GRAIN))
            .collect();
        for (k, h) in homes.iter().enumerate() {
            assert_eq!(
                h.wrapping_sub(homes[0]),
                k as u64,
                "block {k} of the stretch"
            );
        }
        // 256 pages of one region, in a table of 4096 slots: by the address
        // alone, they would take 4096 / (4096 / 16) = 16 homes.
        let mask = 4095;
        let pages: std::collections::HashSet<u64> = (0..256)
            .map(|p| home(0x7f00_0010_0000 + p * 4096) & mask)
            .collect();
        assert!(pages.len() >= 200, "{} homes for 256 pages", pages.len());
    }

    /// Addresses for [`the_table_agrees_with_a_map`]: 16-byte aligned, far
    /// from other tests', dense (blocks of 16 and 32 bytes, which share or
    /// take neighbouring homes), page-aligned, or spread over 12 regions
    /// (so several shards).
    fn address(k: u64, pattern: u8) -> u64 {
        let base = 0x7e00_0000_0000u64;
        match pattern % 4 {
            0 => base + k * 16,
            1 => base + (1 << 24) + k * 32,
            2 => base + (2 << 24) + k * 4096,
            _ => base + (3 << 24) + k * 16 * 257,
        }
    }

    proptest! {
        /// Against a map: inserts, replacements and removals, through growth
        /// and backward shifts, keep exactly the map's blocks, whether their
        /// homes are crowded (dense blocks), shared (aligned ones) or spread.
        #[test]
        fn the_table_agrees_with_a_map(
            pattern in any::<u8>(),
            ops in prop::collection::vec((any::<bool>(), 1..3000u64), 1..3000),
        ) {
            let mut model = HashMap::new();
            for (add, k) in ops {
                let addr = address(k, pattern);
                if add {
                    let (old, kept) = insert::<true>(addr, entry(k));
                    prop_assert!(kept);
                    prop_assert_eq!(old, model.insert(addr, entry(k)));
                } else {
                    prop_assert_eq!(remove::<true>(addr), model.remove(&addr));
                }
                prop_assert!(!model.contains_key(&addr) || may_hold(addr));
            }
            for (addr, e) in model {
                prop_assert_eq!(remove::<true>(addr), Some(e));
                prop_assert_eq!(remove::<true>(addr), None);
            }
        }
    }
}
