//! Protection faults to the application (seed 001 §3.4): what a fault in a
//! window is, and what the application's handler answers. A SIGSEGV at an
//! address in a space's window (or a SIGBUS: an access to a page made
//! inaccessible by removing its entries, see [`crate::space`]) calls that
//! space's handler ([`crate::space::Handler`]) on the faulting thread, with
//! the space itself, so it can change mappings through its capabilities;
//! when the handler says so the access runs again. The `signal` module routes
//! the signals.

/// A fault in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Window offset of the faulting byte.
    pub va: u64,
    /// Its address in the process.
    pub addr: usize,
    /// A write (from the x86 page-fault error code; false elsewhere).
    pub write: bool,
}

/// What the handler did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The cause is gone: run the access again.
    Retry,
    /// Not resolved: the fault is fatal, as without a handler.
    Fail,
}
