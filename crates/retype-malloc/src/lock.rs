//! A spin lock for the few global structures (segment cache, large-object cache, heap pool).
//! None of them is on the malloc/free fast path; the lock never allocates, and fork handlers
//! can take and reset it.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `held`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, yielding the CPU while another thread holds it.
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        self.acquire();
        Guard { lock: self }
    }

    pub(crate) fn acquire(&self) {
        let mut spins = 0u32;
        while self.held.swap(true, Ordering::Acquire) {
            while self.held.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    core::hint::spin_loop();
                } else {
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            }
        }
    }

    /// Releases a lock taken by [`SpinLock::acquire`] (fork handlers), or resets it in a child.
    pub(crate) fn release(&self) {
        self.held.store(false, Ordering::Release);
    }
}

pub(crate) struct Guard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.release();
    }
}
