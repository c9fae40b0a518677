//! Quarantine (`RETYPE_MALLOC_QUARANTINE_BYTES`, `RETYPE_MALLOC_QUARANTINE_MS`, hardened
//! mode): a freed small or medium block is not handed out again at once. Filled (see `freed`),
//! it waits in its freeing thread's quarantine, oldest first, until the
//! quarantine holds more than its bytes or blocks, or the block is older than the time bound
//! (checked at that thread's next free, against its clock as read every
//! [`ADMITS_PER_READING`] frees). When it leaves, the fill is checked (with canaries,
//! for a block of one of the thread's own pages, its first word, the rest once, later: see
//! `freed`): a write after free stops the program there; a read after free, meanwhile, reads
//! the fill, never a new owner's data. With `RETYPE_MALLOC_EXIT_CHECK` every block still held
//! is checked at exit too, and the free blocks of the exiting thread's pages, so a write after
//! free that no later free or malloc meets is caught as well.
//!
//! The ring lives in its own mapping, apart from user data, made on a heap's first
//! quarantined free, so heaps in the default mode do not grow.
//!
//! A freed large block is made inaccessible instead, so a use after free faults at the
//! access, and waits in one process-wide ring (large frees are rare) under the same bounds.

use core::sync::atomic::Ordering;

use crate::config::{QUARANTINE_BYTES, QUARANTINE_MS};
use crate::lock::SpinLock;
use crate::{canary, freed, os};

/// Most blocks one thread's quarantine holds.
const CAPACITY: usize = 1024;

/// Admissions between two readings of the clock: a block is stamped with the clock as last
/// read, and the time bound is checked against it, so a block may leave up to this many of
/// its thread's frees early or late (a reading costs about as much as the rest of an
/// admission).
const ADMITS_PER_READING: u32 = 16;

#[derive(Clone, Copy)]
struct Entry {
    block: *mut u8,
    size: u32,
    /// `os::now_ms` when freed, truncated (compared with wrapping arithmetic).
    at: u32,
}

/// One thread's quarantine: a ring of blocks, oldest at `head`.
pub(crate) struct Ring {
    entries: [Entry; CAPACITY],
    head: usize,
    len: usize,
    bytes: usize,
    /// `os::now_ms` as last read, truncated.
    clock: u32,
    /// Admissions left before the clock is read again.
    until_reading: u32,
}

/// Quarantines `block` of `size` bytes (a multiple of 16), freed and filled, in `*ring`
/// (mapped here on first use). False if the ring could not be mapped or is full: the caller
/// frees the block at once.
#[inline]
pub(crate) unsafe fn admit(ring: &mut *mut Ring, block: *mut u8, size: usize) -> bool {
    // SAFETY: the ring is the calling thread's own; the block is freed and `size` long.
    unsafe {
        if ring.is_null() {
            *ring = os::map(core::mem::size_of::<Ring>()).cast();
            if ring.is_null() {
                return false;
            }
        }
        let r = &mut **ring;
        if r.len == CAPACITY {
            return false; // not reached: `leaving` takes one out whenever the ring fills
        }
        if r.until_reading == 0 {
            r.clock = os::now_ms() as u32;
            r.until_reading = ADMITS_PER_READING;
        }
        r.until_reading -= 1;
        let entry = Entry {
            block,
            size: size as u32,
            at: r.clock,
        };
        *r.entries.get_unchecked_mut((r.head + r.len) % CAPACITY) = entry;
        r.len += 1;
        r.bytes += size;
        true
    }
}

/// Takes the oldest block out of `ring` if the quarantine is over its bounds, or holds a
/// block past the time bound (by its clock); its first word is checked first (aborting on a
/// write after free), the rest as the caller's [`settle`] says.
#[inline]
pub(crate) unsafe fn leaving(ring: *mut Ring) -> Option<*mut u8> {
    // SAFETY: the caller's contract.
    let oldest = unsafe {
        take_oldest(ring, |r, oldest| {
            let over = r.bytes > QUARANTINE_BYTES.load(Ordering::Relaxed) || r.len == CAPACITY;
            over || r.clock.wrapping_sub(oldest.at) as u64 > QUARANTINE_MS.load(Ordering::Relaxed)
        })
    }?;
    // SAFETY: the block was filled when admitted and is still ours.
    if unsafe { !freed::link_untouched(oldest.block) } {
        die(oldest.block, oldest.size as usize);
    }
    Some(oldest.block)
}

/// Takes the oldest block out of `ring`, checked whole, whatever the bounds: for a thread
/// that exits, whose quarantine no later free of its own would empty, and whose blocks would
/// pin their pages in the pool meanwhile.
pub(crate) unsafe fn emptying(ring: *mut Ring) -> Option<*mut u8> {
    // SAFETY: the caller's contract; the block was filled when admitted and is still ours.
    unsafe {
        let oldest = take_oldest(ring, |_, _| true)?;
        check(oldest, "write after free (quarantine)");
        Some(oldest.block)
    }
}

/// Checks `block` of `size` bytes, just out of the quarantine with its first word checked,
/// for a page of the calling thread's or not (`own`): with canaries, of its own, its tag, then
/// tags it as partly checked (see `freed`); else the rest of its fill.
#[inline]
pub(crate) unsafe fn settle(block: *mut u8, size: usize, own: bool) {
    // SAFETY: the caller's contract: the block left the quarantine and is still ours.
    let sound = unsafe {
        if own && freed::deferred() {
            canary::tag_left(block, size)
        } else {
            freed::untouched(block, size)
        }
    };
    if !sound {
        die(block, size);
    }
}

/// Aborts on a write after free into the quarantined `block` of `size` bytes.
fn die(block: *mut u8, size: usize) -> ! {
    os::die("write after free (quarantine)", block, Some(size))
}

/// Takes the oldest entry out of `ring` (the calling thread's) if `due` says so.
#[inline]
unsafe fn take_oldest(ring: *mut Ring, due: impl FnOnce(&Ring, Entry) -> bool) -> Option<Entry> {
    if ring.is_null() {
        return None;
    }
    // SAFETY: the ring is the calling thread's own.
    let r = unsafe { &mut *ring };
    if r.len == 0 {
        return None;
    }
    // SAFETY: `head` < CAPACITY.
    let oldest = unsafe { *r.entries.get_unchecked(r.head) };
    if !due(r, oldest) {
        return None;
    }
    r.head = (r.head + 1) % CAPACITY;
    r.len -= 1;
    r.bytes -= oldest.size as usize;
    Some(oldest)
}

/// Aborts with `what` unless the quarantined block of `entry` still holds its fill.
unsafe fn check(entry: Entry, what: &str) {
    let (block, size) = (entry.block, entry.size as usize);
    // SAFETY: the caller's contract: the block is in the quarantine, filled and ours.
    if unsafe { !freed::untouched(block, size) } {
        os::die(what, block, Some(size));
    }
}

/// Checks every block in `ring` (the calling thread's), at exit: aborts on a write after free.
pub(crate) unsafe fn check_all(ring: *mut Ring) {
    if ring.is_null() {
        return;
    }
    // SAFETY: the ring is the calling thread's own; its blocks are filled and ours.
    unsafe {
        let r = &*ring;
        for i in 0..r.len {
            let entry = r.entries[(r.head + i) % CAPACITY];
            check(entry, "write after free (quarantine, at exit)");
        }
    }
}

/// Most large blocks held at once.
const LARGE_CAPACITY: usize = 64;

#[derive(Clone, Copy)]
struct Held {
    base: *mut u8,
    len: usize,
    at: u32,
}

/// The freed large mappings held back, oldest at `head`.
pub(crate) struct LargeRing {
    held: [Held; LARGE_CAPACITY],
    head: usize,
    len: usize,
    bytes: usize,
}

// SAFETY: the ring only records mappings; it is touched under its lock.
unsafe impl Send for LargeRing {}

pub(crate) static LARGE: SpinLock<LargeRing> = SpinLock::new(LargeRing {
    held: [Held {
        base: core::ptr::null_mut(),
        len: 0,
        at: 0,
    }; LARGE_CAPACITY],
    head: 0,
    len: 0,
    bytes: 0,
});

/// Holds the freed large mapping `[base, base+len)`, whose block the caller made
/// inaccessible; false if the ring is full (the caller gives the mapping back at once).
pub(crate) fn hold_large(base: *mut u8, len: usize) -> bool {
    let mut r = LARGE.lock();
    if r.len == LARGE_CAPACITY {
        return false; // not reached: `large_leaving` takes one out whenever the ring fills
    }
    let at = (r.head + r.len) % LARGE_CAPACITY;
    r.held[at] = Held {
        base,
        len,
        at: os::now_ms() as u32,
    };
    r.len += 1;
    r.bytes += len;
    true
}

/// Takes the oldest large mapping out if the ring is over its bounds (the newest one stays,
/// however big) or holds one past the time bound.
pub(crate) fn large_leaving() -> Option<(*mut u8, usize)> {
    let mut r = LARGE.lock();
    if r.len == 0 {
        return None;
    }
    let oldest = r.held[r.head];
    let over = (r.bytes > QUARANTINE_BYTES.load(Ordering::Relaxed) && r.len > 1)
        || r.len == LARGE_CAPACITY;
    let age = (os::now_ms() as u32).wrapping_sub(oldest.at) as u64;
    if !over && age <= QUARANTINE_MS.load(Ordering::Relaxed) {
        return None;
    }
    r.head = (r.head + 1) % LARGE_CAPACITY;
    r.len -= 1;
    r.bytes -= oldest.len;
    Some((oldest.base, oldest.len))
}
