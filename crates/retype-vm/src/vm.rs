//! The handle an application holds: a space behind a lock that the fault
//! handler and the pager thread can reach too.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use retype_core::caps::Boot;

use crate::error::VmError;
use crate::fault::{self, Fault, Resolution};
use crate::pager::{PageRequest, Pager, PagerFn};
use crate::space::{Options, Space};

/// What the fault handler reaches from the registry.
pub(crate) struct Shared {
    space: Mutex<Space>,
    /// The thread holding `space` (0: none), so that a fault on that thread
    /// is not handled by waiting for itself.
    owner: AtomicU64,
    base: usize,
    len: usize,
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

    fn lock(&self) -> SpaceGuard<'_> {
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

/// An application's memory: capabilities, the window they map, its fault
/// handler and its pager.
pub struct Vm {
    // Boxed so the registry's pointer stays put when the Vm moves.
    shared: Box<Shared>,
    slot: usize,
    pager: Option<Pager>,
    boot: Boot,
}

impl Vm {
    /// A space with no pager: frame pages nobody wrote read as zeros.
    pub fn new(o: Options) -> Result<Vm, VmError> {
        Vm::build(o, None)
    }

    /// A space whose missing pages come from `pager`, called on the pager
    /// thread with the page to fill (zeroed). Fails with
    /// [`VmError::Unsupported`] where userfaultfd is not permitted.
    pub fn with_pager(
        o: Options,
        pager: impl FnMut(&PageRequest, &mut [u8]) + Send + 'static,
    ) -> Result<Vm, VmError> {
        Vm::build(o, Some(Box::new(pager)))
    }

    fn build(o: Options, pager: Option<PagerFn>) -> Result<Vm, VmError> {
        let space = Space::new(&o, pager.is_some())?;
        let boot = space.boot();
        let pager = match pager {
            Some(p) => Some(Pager::start(&space, p)?),
            None => None,
        };
        let shared = Box::new(Shared {
            base: space.base(),
            len: space.len() as usize,
            space: Mutex::new(space),
            owner: AtomicU64::new(0),
        });
        let slot = fault::register(&*shared, shared.base, shared.len)
            .ok_or_else(|| VmError::Unsupported("too many spaces in one process".into()))?;
        Ok(Vm {
            shared,
            slot,
            pager,
            boot,
        })
    }

    /// The space, for invocations. Do not touch window memory while holding
    /// it: a fault there cannot be handled (the handler needs the space).
    pub fn lock(&self) -> SpaceGuard<'_> {
        self.shared.lock()
    }

    /// Installs the protection-fault handler (see [`crate::fault`]).
    pub fn on_fault(&self, handler: impl FnMut(&mut Space, &Fault) -> Resolution + Send + 'static) {
        self.lock().handler = Some(Box::new(handler));
    }

    /// The first domain's CSpace and boot capabilities (without locking).
    pub fn boot(&self) -> Boot {
        self.boot
    }

    /// The window's first byte (virtual address 0 of the tables).
    pub fn base(&self) -> usize {
        self.shared.base
    }

    pub fn len(&self) -> usize {
        self.shared.len
    }

    pub fn is_empty(&self) -> bool {
        self.shared.len == 0
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        fault::unregister(self.slot);
        self.pager.take();
    }
}
