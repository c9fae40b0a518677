//! This thread's recorder state, in one thread-local: a preloaded library
//! reaches its TLS through a `__tls_get_addr` call, so a hook looks it up once
//! and passes the reference down.

use std::cell::Cell;
use std::ptr::null_mut;

use super::buffer::ThreadBuf;
use crate::sample::Gap;

pub struct Local {
    /// This thread is inside the recorder (see [`Busy`]).
    busy: Cell<bool>,
    /// This thread's event buffer; null until its first event, and after its release.
    pub buf: Cell<*mut ThreadBuf>,
    /// This thread's rseq `rseq_cs` field (see [`crate::rseq::mark`]).
    pub rseq_cs: Cell<*mut u64>,
    /// This thread's countdown to its next sampled allocation.
    pub gap: Gap,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            busy: Cell::new(false),
            buf: Cell::new(null_mut()),
            rseq_cs: Cell::new(null_mut()),
            gap: Gap::new(),
        }
    };
}

/// The calling thread's state.
#[inline(always)]
pub fn local() -> &'static Local {
    // SAFETY: a const-initialised thread-local without destructor lives as long
    // as its thread, and `&Local` is neither Send nor Sync (Cell), so the
    // reference never outlives the thread that took it.
    LOCAL.with(|l| unsafe { &*(l as *const Local) })
}

/// This thread is inside the recorder while a `Busy` lives: calls it makes
/// then (the next allocator calling malloc itself, a libc function the
/// recorder uses) are forwarded without a record.
pub struct Busy(&'static Local);

impl Busy {
    /// `None` if this thread is already inside the recorder.
    pub fn enter() -> Option<Busy> {
        Busy::enter_on(local())
    }

    /// [`Busy::enter`] with the thread's state at hand.
    #[inline(always)]
    pub fn enter_on(l: &'static Local) -> Option<Busy> {
        // Lazily: a guard made and dropped on refusal would clear the mark.
        (!l.busy.replace(true)).then(|| Busy(l))
    }
}

impl Drop for Busy {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.busy.set(false);
    }
}
