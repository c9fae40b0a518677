//! Process-wide set-up, done once by the first malloc (or the preload library's
//! constructor): settings, the thread-exit key, fork handlers and the exit report.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::{cache, config, heap, registry, stats};

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
    // SAFETY: KEY is written once, here, before STATE becomes DONE.
    unsafe { libc::pthread_key_create(&raw mut KEY, Some(thread_exit)) };
    STATE.store(DONE, Ordering::Release);
    // These two may allocate; the allocator is usable now.
    // SAFETY: the handlers only take and release our own locks.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_release)) };
    if config::STATS_FD.load(Ordering::Relaxed) >= 0 {
        // SAFETY: `report_at_exit` is a plain function that does not unwind.
        unsafe { libc::atexit(report_at_exit) };
    }
}

/// Arranges for `heap` to be abandoned when the calling thread exits.
pub(crate) fn register_thread(heap: *mut libc::c_void) {
    // SAFETY: KEY was created by `init`; setting a key below 32 does not allocate in glibc.
    unsafe { libc::pthread_setspecific(KEY, heap) };
}

extern "C" fn thread_exit(heap: *mut libc::c_void) {
    // SAFETY: the value is the heap registered by this thread.
    unsafe { heap::thread_done(heap.cast()) };
}

extern "C" fn report_at_exit() {
    stats::report(config::STATS_FD.load(Ordering::Relaxed));
}

/// Takes every global lock so that no other thread holds one while the process forks.
extern "C" fn fork_prepare() {
    heap::POOL.acquire();
    cache::CACHE.acquire();
}

/// Releases the locks after fork, in the parent and in the child alike: in the child only
/// the forking thread exists, and heaps of threads that did not survive are never adopted.
extern "C" fn fork_release() {
    cache::CACHE.release();
    heap::POOL.release();
}
