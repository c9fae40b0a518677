//! Whether events are recorded now: on once this process's trace is open,
//! off from the moment its segment ends (exit, exec) until a new one begins
//! (a failed exec, or a fork child's own trace). The hooks read it on every
//! call; the process's start, fork, exec and exit switch it.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Whether events are recorded now.
#[inline(always)]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts recording events (the trace is open).
pub fn switch_on() {
    ON.store(true, Ordering::Release);
}

/// Stops recording events; returns whether they were being recorded.
pub fn switch_off() -> bool {
    ON.swap(false, Ordering::AcqRel)
}
