//! The heap pool: heaps of exited threads wait here, whole (with their pages still in use),
//! until a new thread adopts one; so do the heaps of threads parked while they wait (see
//! `global::park`), which their thread takes back first if no other did. New heaps are cut
//! from 256 KiB mappings, and never unmade: the pool lists them all, for the statistics. Its
//! spin lock is taken only when a thread gets or gives up its
//! heap, and around fork.

use core::ptr;

use crate::heap::{self, Heap};
use crate::lock::SpinLock;
use crate::{os, stats};

/// Heaps of exited threads waiting for adoption, and the bump area new heaps come from.
pub(crate) struct Pool {
    /// A stack linked through `Heap::next_in_pool`.
    abandoned: *mut Heap,
    /// Every heap made, newest first, linked through `Heap::next_made`.
    pub made: *mut Heap,
    bump: *mut u8,
    end: *mut u8,
}
// SAFETY: pool contents are only touched under its lock.
unsafe impl Send for Pool {}

pub(crate) static POOL: SpinLock<Pool> = SpinLock::new(Pool {
    abandoned: ptr::null_mut(),
    made: ptr::null_mut(),
    bump: ptr::null_mut(),
    end: ptr::null_mut(),
});

const HEAP_CHUNK: usize = 256 * 1024;

/// Adopts an abandoned heap for thread `me` (one it parked if there is one here, else the
/// last one abandoned) or makes a new one; null when out of memory.
pub(crate) fn acquire(me: usize) -> *mut Heap {
    let mut pool = POOL.lock();
    if !pool.abandoned.is_null() {
        // SAFETY: heaps in the pool are owned by the pool; `link` points at a link of the stack.
        unsafe {
            let mut link: *mut *mut Heap = &raw mut pool.abandoned;
            while !(*link).is_null() && (**link).home != me {
                link = &raw mut (**link).next_in_pool;
            }
            if (*link).is_null() {
                link = &raw mut pool.abandoned;
            }
            let heap = *link;
            *link = (*heap).next_in_pool;
            (*heap).pooled = false;
            if (*heap).home == me {
                (*heap).home = 0;
            }
            stats::add(&stats::HEAPS_ADOPTED, 1);
            return heap;
        }
    }
    let size = (core::mem::size_of::<Heap>() + 63) & !63;
    if pool.bump.is_null() || (pool.end as usize - pool.bump as usize) < size {
        // SAFETY: a fresh mapping owned by the pool.
        let chunk = unsafe { os::map(HEAP_CHUNK) };
        if chunk.is_null() {
            return ptr::null_mut();
        }
        pool.bump = chunk;
        // SAFETY: end of the chunk just mapped.
        pool.end = unsafe { chunk.add(HEAP_CHUNK) };
    }
    let heap = pool.bump.cast::<Heap>();
    // SAFETY: `size` bytes at `bump` are unused pool memory.
    unsafe {
        pool.bump = pool.bump.add(size);
        heap::make(heap);
        (*heap).next_made = pool.made;
    }
    pool.made = heap;
    stats::add(&stats::HEAPS_CREATED, 1);
    heap
}

/// Abandons `heap`, the heap of an exiting thread: its empty pages go back to their
/// segments and the rest waits in the pool.
pub(crate) unsafe fn abandon(heap: *mut Heap) {
    // SAFETY: the exiting thread owns `heap`; afterwards the pool does.
    unsafe {
        heap::release_empty_pages(heap);
        park(heap);
    }
}

/// Puts `heap`, whole, in the pool: the heap of a thread that waits (see `global::park`),
/// whose empty pages stay for the thread that adopts it or for its own next malloc. Constant
/// time, whatever the heap holds: a thread may wait often.
pub(crate) unsafe fn park(heap: *mut Heap) {
    // SAFETY: the calling thread owns `heap`.
    unsafe { heap::settle_count(heap) };
    let mut pool = POOL.lock();
    // SAFETY: the calling thread owns `heap`; afterwards the pool does.
    unsafe {
        (*heap).next_in_pool = pool.abandoned;
        (*heap).pooled = true;
    }
    pool.abandoned = heap;
}
