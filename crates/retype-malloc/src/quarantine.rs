//! Quarantine (`RETYPE_MALLOC_QUARANTINE_BYTES`, `RETYPE_MALLOC_QUARANTINE_MS`, hardened
//! mode): a freed small or medium block is not handed out again at once. It is filled with a
//! keyed pattern and waits in its freeing thread's quarantine, oldest first, until the
//! quarantine holds more than its bytes or blocks, or the block is older than the time bound
//! (checked at that thread's next free). When it leaves, the pattern is checked: a write
//! after free stops the program there; a read after free, meanwhile, reads the pattern,
//! never a new owner's data.
//!
//! The ring lives in its own mapping, apart from user data, made on a heap's first
//! quarantined free, so heaps in the default mode do not grow.

use core::sync::atomic::Ordering;

use crate::config::{QUARANTINE_BYTES, QUARANTINE_MS};
use crate::{canary, os};

/// Most blocks one thread's quarantine holds.
const CAPACITY: usize = 1024;

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
}

/// Quarantines `block` of `size` bytes (a multiple of 16), freed, in `*ring` (mapped here on
/// first use). False if the ring could not be mapped or is full: the caller frees the block
/// at once.
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
        canary::fill_words(block, size);
        let entry = Entry {
            block,
            size: size as u32,
            at: os::now_ms() as u32,
        };
        r.entries[(r.head + r.len) % CAPACITY] = entry;
        r.len += 1;
        r.bytes += size;
        true
    }
}

/// Takes the oldest block out of `ring` if the quarantine is over its bounds, or holds a
/// block past the time bound; its pattern is checked first (aborting on a write after free).
pub(crate) unsafe fn leaving(ring: *mut Ring) -> Option<*mut u8> {
    if ring.is_null() {
        return None;
    }
    // SAFETY: the ring is the calling thread's own.
    let r = unsafe { &mut *ring };
    if r.len == 0 {
        return None;
    }
    let oldest = r.entries[r.head];
    let over = r.bytes > QUARANTINE_BYTES.load(Ordering::Relaxed) || r.len == CAPACITY;
    let age = (os::now_ms() as u32).wrapping_sub(oldest.at) as u64;
    if !over && age <= QUARANTINE_MS.load(Ordering::Relaxed) {
        return None;
    }
    r.head = (r.head + 1) % CAPACITY;
    r.len -= 1;
    r.bytes -= oldest.size as usize;
    // SAFETY: the block was filled when admitted and is still ours.
    if unsafe { !canary::words_intact(oldest.block, oldest.size as usize) } {
        os::die(
            "write after free (quarantine)",
            oldest.block,
            Some(oldest.size as usize),
        );
    }
    Some(oldest.block)
}
