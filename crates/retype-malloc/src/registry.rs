//! Which 2 MiB chunks of the address space belong to us: one byte per chunk in a sparse
//! 64 MiB reservation. Kept only in hardened mode, where `free` must recognise pointers that
//! retype-malloc never handed out before it reads any header.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::consts::{SEGMENT_SHIFT, SEGMENT_SIZE};
use crate::os;

/// The chunk starts a mapping of ours (a segment or a large block) and holds its header.
pub(crate) const HEAD: u8 = 1;
/// The chunk lies inside a large block that started in an earlier chunk.
pub(crate) const INTERIOR: u8 = 2;

const ADDRESS_BITS: usize = 47;
const CHUNKS: usize = 1 << (ADDRESS_BITS - SEGMENT_SHIFT);

static MAP: AtomicPtr<AtomicU8> = AtomicPtr::new(ptr::null_mut());

/// Reserves the map; without it every other function here does nothing.
pub(crate) fn enable() {
    // SAFETY: a fresh anonymous reservation, zeroed by the kernel; pages are touched on demand.
    let p = unsafe { os::map(CHUNKS) };
    MAP.store(p.cast(), Ordering::Release);
}

#[inline(always)]
fn slot(addr: usize) -> Option<&'static AtomicU8> {
    let i = addr >> SEGMENT_SHIFT;
    if i >= CHUNKS {
        return None;
    }
    let map = MAP.load(Ordering::Acquire);
    if map.is_null() {
        return None;
    }
    // SAFETY: `i` is within the CHUNKS-byte map, which is never unmapped.
    Some(unsafe { &*map.add(i) })
}

/// Records the mapping `[p, p+len)` (`p` 2 MiB aligned).
pub(crate) fn mark(p: *mut u8, len: usize) {
    let base = p as usize;
    for (k, chunk) in (base..base + len).step_by(SEGMENT_SIZE).enumerate() {
        if let Some(s) = slot(chunk) {
            s.store(if k == 0 { HEAD } else { INTERIOR }, Ordering::Release);
        }
    }
}

/// Forgets the mapping `[p, p+len)`.
pub(crate) fn clear(p: *mut u8, len: usize) {
    let base = p as usize;
    for chunk in (base..base + len).step_by(SEGMENT_SIZE) {
        if let Some(s) = slot(chunk) {
            s.store(0, Ordering::Release);
        }
    }
}

/// What the chunk holding `p` is: 0 (not ours), [`HEAD`] or [`INTERIOR`].
pub(crate) fn lookup(p: usize) -> u8 {
    slot(p).map_or(0, |s| s.load(Ordering::Acquire))
}
