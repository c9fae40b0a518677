//! The state a space's handle shares with the signal handler and the pager
//! thread: the space behind a lock, and which thread holds it.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use crate::space::Space;

/// What the fault handler reaches from the registry.
pub(crate) struct Shared {
    pub(crate) space: Mutex<Space>,
    /// The thread holding `space` (0: none), so that a fault on that thread
    /// is not handled by waiting for itself.
    pub(crate) owner: AtomicU64,
    pub(crate) base: usize,
    pub(crate) len: usize,
}

/// This thread's identity for `owner`: a number handed out once per thread
/// (no system call, so cheap on every lock and in the signal handler).
fn tid() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: Cell<u64> = const { Cell::new(0) };
    }
    ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT.fetch_add(1, SeqCst));
        }
        id.get()
    })
}

impl Shared {
    pub(crate) fn window_contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.len
    }

    pub(crate) fn lock(&self) -> SpaceGuard<'_> {
        assert_ne!(
            self.owner.load(SeqCst),
            tid(),
            "this thread already holds the space (a second lock() in one expression?)"
        );
        let guard = self.space.lock().unwrap_or_else(|p| p.into_inner());
        self.owner.store(tid(), SeqCst);
        SpaceGuard {
            guard,
            owner: &self.owner,
        }
    }

    /// The space, unless this thread already holds it.
    pub(crate) fn lock_from_fault(&self) -> Option<SpaceGuard<'_>> {
        (self.owner.load(SeqCst) != tid()).then(|| self.lock())
    }
}

/// The space, locked: every invocation goes through this.
pub struct SpaceGuard<'a> {
    guard: MutexGuard<'a, Space>,
    owner: &'a AtomicU64,
}

impl Drop for SpaceGuard<'_> {
    fn drop(&mut self) {
        self.owner.store(0, SeqCst);
    }
}

impl Deref for SpaceGuard<'_> {
    type Target = Space;
    fn deref(&self) -> &Space {
        &self.guard
    }
}

impl DerefMut for SpaceGuard<'_> {
    fn deref_mut(&mut self) -> &mut Space {
        &mut self.guard
    }
}
