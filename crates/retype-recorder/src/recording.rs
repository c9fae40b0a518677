//! Whether events are recorded now: on once this process's trace is open
//! (unless it opens paused), off from the moment its segment ends (exit,
//! exec) until a new one begins (a failed exec, or a fork child's own trace),
//! and off while recording is paused. The hooks read it on every call; the
//! process's start, fork, exec and exit, and the recording windows
//! ([`crate::control`]), switch it.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Whether events are recorded now.
#[inline(always)]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts recording events (the trace is open); returns whether they were
/// not being recorded.
pub fn switch_on() -> bool {
    !ON.swap(true, Ordering::AcqRel)
}

/// Stops recording events; returns whether they were being recorded.
pub fn switch_off() -> bool {
    ON.swap(false, Ordering::AcqRel)
}
