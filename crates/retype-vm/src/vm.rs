//! The handle an application holds: a space behind a lock that the fault
//! handler and the pager thread can reach too.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use retype_core::caps::Boot;

use crate::error::VmError;
use crate::fault::{Fault, Resolution};
use crate::pager::{PageRequest, Pager, PagerFn};
use crate::shared::{Shared, SpaceGuard};
use crate::signal;
use crate::space::{Options, Space};

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
        let slot = signal::register(&*shared, shared.base, shared.len)
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
        signal::unregister(self.slot);
        self.pager.take();
    }
}
