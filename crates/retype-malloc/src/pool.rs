//! The heap pool: heaps of exited threads wait here, whole (with their pages still in use),
//! until a new thread adopts one; so do the heaps of threads parked while they wait (see
//! `global::park`), which their thread takes back first if no other did. New heaps are cut
//! from 256 KiB mappings, and never unmade: the pool lists them all, for the statistics. Its
//! spin lock is taken only when a thread gets or gives up its heap, at `malloc_trim`, and
//! around fork.
//!
//! Whoever holds the lock owns the heaps waiting here, so the pool reclaims them (see
//! `reclaim_locked`): when a thread exits, the pages of the heaps that waited here for a tenth
//! of the purge delay (see [`RECLAIM_WAIT_PARTS`]) that other threads' frees emptied go back
//! to their segments, and at `malloc_trim` those of every heap here. A heap that waited then holds only pages with live
//! blocks: what exited and waiting threads hold follows the blocks still live, not how many
//! threads came and went (see `docs/malloc.md`, "Memory as threads come and go").

use core::ptr;
use core::sync::atomic::Ordering;

use crate::consistency;
use crate::heap::{self, Heap};
use crate::lock::{Guard, SpinLock};
use crate::{config, free, os, stats};

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

/// A heap waits in the pool this part of the purge delay before a thread's exit reclaims it:
/// where many threads come and go on few cores (`transient 16 2000 2000` on 2 cores), heaps
/// that waited 10 to 100 ms held the pages that other threads' frees emptied since: peak RSS
/// 10.2-15.4 MiB with the whole delay, 12.1-13.0 with a quarter, 8.4-10.5 with a tenth (jemalloc
/// 8.5-9.1), for 1.8 times the page faults; at 2 threads 1 % more instructions.
const RECLAIM_WAIT_PARTS: u64 = 10;

/// Abandons `heap`, the heap of an exiting thread: its quarantine lets its blocks go (hardened
/// mode: no later free of the thread would, and they would pin their pages), its empty pages
/// go back to their segments and the rest waits in the pool; then the heaps that waited in the pool for longer
/// than a tenth of the purge delay are reclaimed (see [`reclaim_locked`]).
pub(crate) unsafe fn abandon(heap: *mut Heap) {
    // SAFETY: the exiting thread owns `heap`; afterwards the pool does.
    let pool = unsafe {
        free::empty_quarantine(heap);
        free::give_back_transferred(heap);
        heap::release_empty_pages(heap);
        put(heap)
    };
    let wait = config::PURGE_DELAY_MS.load(Ordering::Relaxed) / RECLAIM_WAIT_PARTS;
    reclaim_locked(&pool, os::now_ms().saturating_sub(wait));
}

/// Gives back the pages of every heap in the pool that hold no live block (`malloc_trim`):
/// see [`reclaim_locked`].
pub(crate) fn reclaim() {
    let pool = POOL.lock();
    reclaim_locked(&pool, u64::MAX);
}

/// Gives back the pages of the heaps put in the pool before `before` (the clock, ms) that hold
/// no live block: frees by other threads emptied them since the heap's thread exited or
/// parked (they are collected here, as the owner would), and a parked heap's kept pages and
/// spills. A heap put in the pool since is left as it is, as the cache leaves a segment for
/// the purge delay: a thread created meanwhile adopts it, and would only claim its pages
/// again (`transient 2 2000 1000`, whose main thread starts a thread as soon as one exits:
/// reclaiming every heap at every exit took twice the page claims and 1.3 times the peak
/// RSS). Its time grows with the heaps in the pool and their pages: a thread's exit pays it,
/// as it pays for its own heap.
fn reclaim_locked(pool: &Pool, before: u64) {
    let mut h = pool.abandoned;
    while !h.is_null() {
        // SAFETY: heaps in the pool are the pool's, and its lock is held: no thread runs them.
        unsafe {
            if (*h).pooled_at < before {
                free::give_back_transferred(h);
                heap::release_empty_pages(h);
                os::debug_verify(|| consistency::check(h));
            }
            h = (*h).next_in_pool;
        }
    }
}

/// Puts `heap`, whole, in the pool: the heap of a thread that waits (see `global::park`),
/// whose empty pages stay for the thread that adopts it or for its own next malloc. Constant
/// time, whatever the heap holds: a thread may wait often.
pub(crate) unsafe fn park(heap: *mut Heap) {
    // SAFETY: the calling thread owns `heap`; the pool does afterwards.
    unsafe { put(heap) };
}

/// Puts `heap` (the calling thread's, its batch of remote frees sent and its live bytes
/// counted) on the pool's stack; returns the pool, locked.
unsafe fn put(heap: *mut Heap) -> Guard<'static, Pool> {
    // SAFETY: the calling thread owns `heap`.
    unsafe {
        free::send_batch(heap);
        heap::settle_count(heap);
        (*heap).pooled_at = os::now_ms();
    }
    let mut pool = POOL.lock();
    // SAFETY: the calling thread owns `heap`; afterwards the pool does.
    unsafe {
        (*heap).next_in_pool = pool.abandoned;
        (*heap).pooled = true;
    }
    pool.abandoned = heap;
    pool
}
