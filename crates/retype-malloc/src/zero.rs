//! Zero-size blocks (`RETYPE_MALLOC_ZERO_FAULT`, hardened mode): `malloc(0)` returns a pointer
//! into a reserved inaccessible range, so any read or write through it faults at the access.
//! Every zero-size block is the same pointer; freeing it does nothing and reallocating it
//! allocates afresh, as for a block of no bytes.

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::os;

/// Bytes reserved, inaccessible; the pointer handed out lies in their middle, so small
/// offsets either side of it fault too.
const RESERVED: usize = 64 * 1024;

/// Start of the reserved range (0 until reserved).
static BASE: AtomicUsize = AtomicUsize::new(0);

/// Reserves the range (once, at start-up); without it, zero-size blocks stay ordinary.
pub(crate) fn reserve() {
    // SAFETY: a fresh mapping of ours, made inaccessible before it is handed out.
    unsafe {
        let base = os::map(RESERVED);
        if base.is_null() {
            return;
        }
        os::protect(base, RESERVED, false);
        BASE.store(base as usize, Ordering::Release);
    }
}

/// The zero-size block, or null if the range could not be reserved.
pub(crate) fn block() -> *mut u8 {
    match BASE.load(Ordering::Acquire) {
        0 => core::ptr::null_mut(),
        base => (base + RESERVED / 2) as *mut u8,
    }
}

/// Whether `p` is the zero-size block (or points into its range).
#[inline]
pub(crate) fn contains(p: *const u8) -> bool {
    let base = BASE.load(Ordering::Relaxed);
    base != 0 && (p as usize).wrapping_sub(base) < RESERVED
}
