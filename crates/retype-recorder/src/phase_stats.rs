//! The figures of the phase running now, which the program reads about
//! itself while it runs (`retype_phase_stats`, declared in `include/retype.h`):
//! what the pytest plugin's `limit_memory` and `limit_leaks` compare with
//! their limits at the end of each test.
//!
//! A phase counts the blocks the program allocated since it was marked
//! (every thread's, through the malloc family, while recording is on): the
//! bytes and calls, the bytes of those blocks still live and their highest
//! sum (the phase's peak, as pytest-memray's high-water mark of the
//! allocations a test made), and the same per call stack. A block
//! allocated before the phase and freed in it counts nowhere.
//!
//! The hooks keep them only while a phase is active: one relaxed load of
//! [`ACTIVE`] is all a call pays otherwise. While active, each allocation is
//! put in a table of live blocks (pointer, size, stack), mapped by the
//! recorder itself, and each free takes its block out before the allocator
//! may hand the address out again; both behind one spin lock, which no code
//! that allocates holds. A table that is full leaves further blocks
//! untracked (counted as such).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use retype_trace::Event;

use crate::thread::local::Busy;
use crate::{recording, stack_table, sys};

/// Slots of the live-block table (a power of two; filled to 3/4 at most).
const BLOCKS: usize = 1 << 21;
/// Slots of the per-stack table (a power of two; filled to 3/4 at most).
const SITES: usize = 1 << 14;
/// Sites a query returns, and frames per site.
pub const TOP: usize = 8;
pub const FRAMES: usize = 8;

/// A phase is active: the hooks keep its figures.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// A live block allocated in the phase; `ptr` 0: an empty slot.
#[repr(C)]
#[derive(Clone, Copy)]
struct Block {
    ptr: u64,
    size: u64,
    /// Its stack's slot in the site table, or `NO_SITE`.
    site: u32,
}

const NO_SITE: u32 = u32::MAX;

/// A call stack's figures in the phase; `stack` is its id + 1 (0: an empty slot).
#[repr(C)]
#[derive(Clone, Copy)]
struct Site {
    stack: u64,
    allocated: u64,
    calls: u64,
    live: u64,
}

/// The figures the C API hands out: `struct retype_site` of `retype.h`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SiteFigures {
    pub allocated: u64,
    pub calls: u64,
    pub live: u64,
    pub frames: [u64; FRAMES],
    pub frames_len: u32,
}

/// `struct retype_phase_stats` of `retype.h`.
#[repr(C)]
pub struct PhaseFigures {
    pub phase: u64,
    pub allocated: u64,
    pub calls: u64,
    pub live: u64,
    pub peak: u64,
    pub untracked: u64,
    pub active: u32,
    pub sites_len: u32,
    pub sites: [SiteFigures; TOP],
}

/// The tables and totals, touched only by the holder of the lock.
struct State {
    blocks: *mut Block,
    sites: *mut Site,
    used_blocks: usize,
    used_sites: usize,
    /// Marks so far (the phase's number).
    phase: u64,
    allocated: u64,
    calls: u64,
    live: u64,
    peak: u64,
    untracked: u64,
}

impl State {
    const EMPTY: State = State {
        blocks: std::ptr::null_mut(),
        sites: std::ptr::null_mut(),
        used_blocks: 0,
        used_sites: 0,
        phase: 0,
        allocated: 0,
        calls: 0,
        live: 0,
        peak: 0,
        untracked: 0,
    };
}

struct Locked {
    lock: AtomicBool,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is touched only by the holder of `lock`.
unsafe impl Sync for Locked {}

static STATE: Locked = Locked {
    lock: AtomicBool::new(false),
    state: UnsafeCell::new(State::EMPTY),
};

/// The state while its lock is held. Whoever takes it is inside the
/// recorder ([`Busy`]): a signal handler that allocates or frees on the
/// holder's thread is forwarded unseen instead of waiting for it forever.
struct Guard;

impl Guard {
    fn lock() -> Guard {
        while STATE
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        Guard
    }

    #[allow(clippy::mut_from_ref)]
    fn state(&self) -> &mut State {
        // SAFETY: we hold the lock, and one Guard hands out one borrow at a time.
        unsafe { &mut *STATE.state.get() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        STATE.lock.store(false, Ordering::Release);
    }
}

/// A new phase begins (`begin`: else the current one ends without another):
/// its figures start from nothing. False if the tables cannot be mapped.
pub fn mark(begin: bool) -> bool {
    let Some(_busy) = Busy::enter() else {
        return false;
    };
    let g = Guard::lock();
    let s = g.state();
    if s.blocks.is_null() {
        s.blocks = sys::map(BLOCKS * std::mem::size_of::<Block>()).cast();
        s.sites = sys::map(SITES * std::mem::size_of::<Site>()).cast();
        if s.blocks.is_null() || s.sites.is_null() {
            return false;
        }
    }
    if begin {
        // Zero pages again: the tables start empty, and what the last phase
        // touched goes back to the system.
        clear(s.blocks.cast(), BLOCKS * std::mem::size_of::<Block>());
        clear(s.sites.cast(), SITES * std::mem::size_of::<Site>());
        *s = State {
            blocks: s.blocks,
            sites: s.sites,
            phase: s.phase + 1,
            ..State::EMPTY
        };
    }
    ACTIVE.store(begin, Ordering::Release);
    recording::set_phases(begin);
    true
}

/// In a fork child: the lock a parent's thread held is free here, and the
/// parent's phase is not the child's (it has none until it marks one).
pub fn after_fork_child() {
    STATE.lock.store(false, Ordering::Release);
    ACTIVE.store(false, Ordering::Release);
    recording::set_phases(false);
}

/// The hooks, after a call that returned a block (`ev`): counts it.
#[inline(always)]
pub fn allocated(ev: &Event) {
    if ACTIVE.load(Ordering::Relaxed) && ev.op.allocates() && ev.ret != 0 {
        add(ev.ret, ev.size, ev.stack);
    }
}

/// (Called inside the recorder: the hook holds [`Busy`].)
#[cold]
fn add(ptr: u64, size: u64, stack: u32) {
    let g = Guard::lock();
    let s = g.state();
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    s.allocated = s.allocated.saturating_add(size);
    s.calls += 1;
    let site = site_of(s, stack);
    if let Some(site) = site_at(s, site) {
        site.allocated = site.allocated.saturating_add(size);
        site.calls += 1;
    }
    if s.used_blocks >= BLOCKS / 4 * 3 {
        s.untracked += 1;
        return;
    }
    insert(s, Block { ptr, size, site });
}

/// The hooks, before `p` is freed or reallocated: takes its block out (the
/// allocator may give the address to another thread once it has it back);
/// returns the block, if the phase allocated it, for [`restore`].
#[inline(always)]
pub fn freeing(p: *mut libc::c_void) -> Option<(u64, u32)> {
    if !ACTIVE.load(Ordering::Relaxed) || p.is_null() {
        return None;
    }
    remove(p as u64)
}

#[cold]
fn remove(ptr: u64) -> Option<(u64, u32)> {
    let _busy = Busy::enter()?;
    let g = Guard::lock();
    let s = g.state();
    if s.blocks.is_null() {
        return None;
    }
    let b = take(s, ptr)?;
    s.live -= b.size;
    if let Some(site) = site_at(s, b.site) {
        site.live -= b.size;
    }
    Some((b.size, b.site))
}

/// A realloc that failed left block `p` as it was: it is live again.
pub fn restore(p: *mut libc::c_void, block: Option<(u64, u32)>) {
    let Some((size, site)) = block else { return };
    let Some(_busy) = Busy::enter() else { return };
    let g = Guard::lock();
    let s = g.state();
    if ACTIVE.load(Ordering::Relaxed) {
        insert(
            s,
            Block {
                ptr: p as u64,
                size,
                site,
            },
        );
    }
}

/// Puts `b` in the table: its bytes are live.
fn insert(s: &mut State, b: Block) {
    let mask = BLOCKS - 1;
    let mut i = hash(b.ptr) & mask;
    // SAFETY: `i` < BLOCKS, in the mapping.
    while unsafe { (*s.blocks.add(i)).ptr } != 0 {
        i = (i + 1) & mask;
    }
    // SAFETY: as above; the slot is empty.
    unsafe { *s.blocks.add(i) = b };
    s.used_blocks += 1;
    s.live += b.size;
    s.peak = s.peak.max(s.live);
    if let Some(site) = site_at(s, b.site) {
        site.live += b.size;
    }
}

/// Takes the block at `ptr` out of the table (linear probing, the run
/// after it shifted back so that no lookup stops short).
fn take(s: &mut State, ptr: u64) -> Option<Block> {
    let mask = BLOCKS - 1;
    let slot = |i: usize| {
        // SAFETY: `i` is masked to the table, which is mapped.
        unsafe { &mut *s.blocks.add(i & mask) }
    };
    let mut i = hash(ptr) & mask;
    loop {
        match slot(i).ptr {
            0 => return None,
            p if p == ptr => break,
            _ => i = (i + 1) & mask,
        }
    }
    let found = *slot(i);
    let mut hole = i;
    let mut j = i;
    loop {
        j = (j + 1) & mask;
        let b = *slot(j);
        if b.ptr == 0 {
            break;
        }
        // `b` may fill the hole if its home is not between the hole and it.
        let home = hash(b.ptr) & mask;
        if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
            *slot(hole) = b;
            hole = j;
        }
    }
    slot(hole).ptr = 0;
    s.used_blocks -= 1;
    Some(found)
}

/// The site-table slot of `stack`, taken if new; `NO_SITE` when full.
fn site_of(s: &mut State, stack: u32) -> u32 {
    let key = u64::from(stack) + 1;
    let mask = SITES - 1;
    let mut i = hash(key) & mask;
    loop {
        // SAFETY: `i` < SITES, in the mapping.
        let site = unsafe { &mut *s.sites.add(i) };
        if site.stack == key {
            return i as u32;
        }
        if site.stack == 0 {
            if s.used_sites >= SITES / 4 * 3 {
                return NO_SITE;
            }
            s.used_sites += 1;
            site.stack = key;
            return i as u32;
        }
        i = (i + 1) & mask;
    }
}

fn site_at(s: &mut State, site: u32) -> Option<&mut Site> {
    // SAFETY: a site index other than NO_SITE is < SITES, in the mapping.
    (site != NO_SITE).then(|| unsafe { &mut *s.sites.add(site as usize) })
}

fn hash(x: u64) -> usize {
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize
}

/// The figures of the phase now, its top sites by live bytes (`by_live`)
/// or by bytes allocated. The sites' frames come from a scan of the stack
/// table, in the caller's time.
pub fn read(out: &mut PhaseFigures, by_live: bool) {
    let mut top = [Site {
        stack: 0,
        allocated: 0,
        calls: 0,
        live: 0,
    }; TOP];
    let mut n = 0;
    {
        let Some(_busy) = Busy::enter() else { return };
        let g = Guard::lock();
        let s = g.state();
        out.phase = s.phase;
        out.allocated = s.allocated;
        out.calls = s.calls;
        out.live = s.live;
        out.peak = s.peak;
        out.untracked = s.untracked;
        out.active = u32::from(ACTIVE.load(Ordering::Relaxed));
        let weight = |x: &Site| if by_live { x.live } else { x.allocated };
        for i in 0..if s.sites.is_null() { 0 } else { SITES } {
            // SAFETY: `i` < SITES, in the mapping.
            let site = unsafe { *s.sites.add(i) };
            if site.stack == 0 || weight(&site) == 0 {
                continue;
            }
            // Kept in order, heaviest first: insert where it belongs.
            let at = top[..n].partition_point(|t| weight(t) >= weight(&site));
            if at < TOP {
                n = (n + 1).min(TOP);
                top.copy_within(at..n - 1, at + 1);
                top[at] = site;
            }
        }
    }
    out.sites_len = n as u32;
    for (o, t) in out.sites.iter_mut().zip(&top[..n]) {
        let mut frames = [0u64; FRAMES];
        let len = stack_table::frames((t.stack - 1) as u32, &mut frames);
        *o = SiteFigures {
            allocated: t.allocated,
            calls: t.calls,
            live: t.live,
            frames,
            frames_len: len as u32,
        };
    }
}

/// Gives the pages of a mapping back: they read as zeros again.
fn clear(p: *mut u8, bytes: usize) {
    // SAFETY: `p` is one of our own anonymous mappings, `bytes` long.
    unsafe { libc::madvise(p.cast(), bytes, libc::MADV_DONTNEED) };
}
