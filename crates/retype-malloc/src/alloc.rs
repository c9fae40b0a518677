//! malloc's fast path: pop a block from the free list of the page that serves its size
//! class (as mimalloc's `alloc.c`); everything else is a call to a slow path that cannot
//! unwind. The malloc family in `lib.rs` inlines it.

use crate::{config, global, heap, large, os, page, secure};

/// Allocates a block for `size` bytes, of fast-path slot `slot` (see [`size_class`]), from
/// the calling thread's heap: the fast path pops from the slot's direct page; anything else
/// (including a thread's first malloc, and every malloc in hardened and secure mode) takes
/// the slow path, which is given the size alone so that the fast path need not keep both in
/// registers.
#[inline(always)]
pub(crate) unsafe fn alloc(slot: usize, size: usize) -> *mut u8 {
    let heap = heap::current();
    // SAFETY: `slot` < CLASSES; the direct page is a live page of this heap or the empty page.
    unsafe {
        let page = heap::direct(heap, slot);
        if !(*page).free.is_null() {
            return page::pop(page);
        }
        alloc_slow(heap, size)
    }
}

/// [`alloc`]'s slow path: null, with errno ENOMEM, when out of memory. Secure mode's malloc
/// starts here, with its own fast path (see `secure`).
///
/// The functions the fast paths end in (this, [`alloc_large`], `free_checked`,
/// `free::free_slow` and `heap::retire`) are `extern "C"`: they cannot unwind (a panic in one
/// aborts), so a C entry point that inlines a fast path needs no landing pad around the
/// call, and the call is a jump: the fast path sets up no stack frame.
#[cold]
#[inline(never)]
unsafe extern "C" fn alloc_slow(heap: *mut heap::Heap, size: usize) -> *mut u8 {
    // SAFETY: as for `alloc`.
    unsafe {
        if config::secure() {
            let p = secure::alloc(heap, size);
            if !p.is_null() {
                return p;
            }
        }
        os::enomem_if_null(global::alloc_slow(heap, size))
    }
}

/// Allocates a large block (null, with errno ENOMEM, when out of memory); the settings are
/// loaded first, since a program's first malloc may be a large one (small ones load them on
/// a thread's first malloc).
#[cold]
#[inline(never)]
pub(crate) unsafe extern "C" fn alloc_large(size: usize, align: usize, zero: bool) -> *mut u8 {
    global::init();
    // SAFETY: large blocks take any size and power-of-two alignment.
    os::enomem_if_null(unsafe { large::alloc(size, align, zero) })
}
