//! Process-wide set-up, done once by the first malloc (or the preload library's
//! constructor): settings, the thread-exit key, fork handlers and the exit report. Also each
//! thread's start and end: the heap it gets on its first malloc and gives up at exit.

use core::ptr;
use core::sync::atomic::{AtomicU8, Ordering};

use crate::consts::MIN_ALIGN;
use crate::heap::{self, Heap};
use crate::size_class::{self, MEDIUM_MAX};
use crate::{
    cache, canary, census, config, free, freed, large, os, page, pool, quarantine, registry,
    secret, stats, transfer, zero,
};

static STATE: AtomicU8 = AtomicU8::new(0);
const NONE: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;

static mut KEY: libc::pthread_key_t = 0;

/// Initialises the allocator once; later calls return at once. Safe to call from malloc:
/// nothing before `DONE` allocates, and what runs after it may allocate normally.
pub fn init() {
    if STATE.load(Ordering::Acquire) == DONE {
        return;
    }
    if STATE
        .compare_exchange(NONE, RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        while STATE.load(Ordering::Acquire) != DONE {
            core::hint::spin_loop();
        }
        return;
    }
    config::load();
    if config::hardened() {
        registry::enable();
    }
    if config::hardened() || config::canary() || config::quarantine() {
        secret::init();
    }
    if config::zero_fault() {
        zero::reserve();
    }
    let reserve = config::RESERVE_BYTES.load(Ordering::Relaxed);
    if reserve > 0 {
        cache::reserve(reserve);
    }
    // SAFETY: KEY is written once, here, before STATE becomes DONE.
    unsafe { libc::pthread_key_create(&raw mut KEY, Some(thread_exit)) };
    STATE.store(DONE, Ordering::Release);
    // These two may allocate; the allocator is usable now.
    // SAFETY: the handlers only take and release our own locks.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_release)) };
    if config::exit_check() {
        // SAFETY: `check_at_exit` is a plain function that does not unwind.
        unsafe { libc::atexit(check_at_exit) };
    }
    if config::STATS_FD.load(Ordering::Relaxed) >= 0 {
        // SAFETY: `report_at_exit` is a plain function that does not unwind.
        unsafe { libc::atexit(report_at_exit) };
    }
}

/// malloc's slow path past secure mode's pop (`alloc::alloc_slow`, `secure::alloc`): a page
/// found or made ([`alloc_slow`]), null with errno ENOMEM when out of memory. Out of line,
/// so that secure mode's pop ends in a jump to it and sets up no stack frame.
#[inline(never)]
pub(crate) unsafe extern "C" fn alloc_general(heap: *mut Heap, size: usize) -> *mut u8 {
    // SAFETY: the caller's contract, as `alloc_slow`'s.
    os::enomem_if_null(unsafe { alloc_slow(heap, size) })
}

/// malloc's slow path for `size` bytes (at most `MEDIUM_MAX`). A thread's first malloc finds
/// the empty heap (see `heap::current`) and is given its heap here, above `heap`, because that
/// takes the pool and the exit key; then the heap's own slow path serves it.
#[cold]
#[inline(never)]
pub(crate) unsafe fn alloc_slow(mut heap: *mut Heap, size: usize) -> *mut u8 {
    if heap::is_empty(heap) {
        heap = thread_init();
        if heap.is_null() {
            return ptr::null_mut();
        }
    }
    if size == 0 && config::zero_fault() {
        let p = zero::block();
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: `heap` is the calling thread's own heap.
    unsafe { free::send_batch(heap) };
    if config::canary() {
        // SAFETY: as below.
        return unsafe { alloc_sealed(heap, size) };
    }
    // SAFETY: `heap` is the calling thread's own heap; the class is in range.
    unsafe { heap::alloc_slow(heap, size_class::class_of(size)) }
}

/// Canary mode: a block with room for the canary's tag after `size` bytes (in the next
/// class up when the tag does not fit in the slack), sealed; large past the medium classes.
unsafe fn alloc_sealed(heap: *mut Heap, size: usize) -> *mut u8 {
    // Every block has a byte of its own (inaccessible zero-size blocks are `zero`'s measure).
    let size = size.max(1);
    let need = size + canary::TAIL;
    if need > MEDIUM_MAX {
        // SAFETY: large blocks take any size.
        return unsafe { large::alloc(size, MIN_ALIGN, false) };
    }
    let class = size_class::class_of(need);
    // SAFETY: `heap` is the calling thread's own heap; the class is in range.
    unsafe {
        let p = heap::alloc_slow(heap, class);
        if !p.is_null() {
            // `heap::alloc_slow` checked the block's fill and tag (see `freed::reuse`).
            canary::seal(p, size_class::block_size(class), size, freed::filled());
        }
        p
    }
}

/// Gives the calling thread its heap on its first malloc; null when out of memory.
#[cold]
fn thread_init() -> *mut Heap {
    init();
    let existing = heap::current();
    if !heap::is_empty(existing) {
        return existing; // the global initialisation allocated and made one already
    }
    // SAFETY: pthread_self always succeeds.
    let heap = pool::acquire(unsafe { libc::pthread_self() } as usize);
    if !heap.is_null() {
        heap::set_current(heap);
        // SAFETY: KEY was created by `init`; setting a key below 32 does not allocate in glibc.
        unsafe { libc::pthread_setspecific(KEY, heap.cast()) };
    }
    heap
}

/// Gives the calling thread, which has no heap, its heap on its first free of a block of
/// another thread (see `alloc::free_first`); out of memory, it stays without one.
pub(crate) fn heap_for_frees() {
    thread_init();
}

/// Thread-exit hook (pthread key destructor): abandons the thread's heap.
extern "C" fn thread_exit(heap: *mut libc::c_void) {
    let heap = heap.cast::<Heap>();
    if heap::current() == heap {
        heap::set_current(ptr::null_mut());
    }
    // SAFETY: the value is the heap this exiting thread registered; it uses it no more.
    unsafe { pool::abandon(heap) };
}

/// Parks the calling thread's heap in the pool, as if the thread had exited, for a thread
/// about to wait for long (in `pthread_join`): a thread created meanwhile adopts it, so the
/// blocks this thread handed to others and they free are reused instead of stranded in a heap
/// whose owner does not run. The thread's next malloc takes its heap back if no other thread
/// adopted it (else another from the pool, or a new one), or once the adopter exits; its
/// frees meanwhile are remote.
pub fn park() {
    let heap = heap::current();
    if heap::is_empty(heap) {
        return;
    }
    heap::set_current(ptr::null_mut());
    // SAFETY: KEY was created by `init` (the thread has a heap); the exit hook must not
    // abandon the heap again. pthread_self always succeeds. The heap is still ours.
    unsafe {
        libc::pthread_setspecific(KEY, ptr::null());
        (*heap).home = libc::pthread_self() as usize;
        pool::park(heap);
    }
}

/// Writes the report at exit, as text or JSON (see `census`).
extern "C" fn report_at_exit() {
    let fd = config::STATS_FD.load(Ordering::Relaxed);
    let out = &mut |line: &[u8]| os::write_all(fd, line);
    if config::STATS_JSON.load(Ordering::Relaxed) {
        census::take().write_json(out);
    } else {
        stats::report(out, config::counted());
    }
}

/// At exit (`RETYPE_MALLOC_EXIT_CHECK`): checks the blocks the exiting thread's quarantine
/// holds, and the free blocks of its pages (where blocks that left it partly checked lie, see
/// `freed`), so a write after free that no later free or malloc met is caught.
extern "C" fn check_at_exit() {
    let heap = heap::current();
    if !heap::is_empty(heap) {
        // SAFETY: the heap is the calling thread's own, and so are its quarantine and pages.
        unsafe {
            quarantine::check_all((*heap).quarantine);
            if !(*heap).quarantine.is_null() && freed::deferred() {
                heap::each_page(heap, |page| page::check_freed(page));
            }
        }
    }
}

/// Takes every global lock so that no other thread holds one while the process forks.
extern "C" fn fork_prepare() {
    pool::POOL.acquire();
    cache::CACHE.acquire();
    quarantine::LARGE.acquire();
    stats::AT_PEAK.acquire();
    transfer::CACHE.acquire_all();
}

/// Releases the locks after fork, in the parent and in the child alike: in the child only
/// the forking thread exists, and heaps of threads that did not survive are never adopted.
extern "C" fn fork_release() {
    transfer::CACHE.release_all();
    stats::AT_PEAK.release();
    quarantine::LARGE.release();
    cache::CACHE.release();
    pool::POOL.release();
}
