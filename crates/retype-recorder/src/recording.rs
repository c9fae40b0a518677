//! Whether events are recorded now: on once this process's trace is open
//! (unless it opens paused), off from the moment its segment ends (exit,
//! exec) until a new one begins (a failed exec, or a fork child's own trace),
//! and off while recording is paused. The hooks read it on every call; the
//! process's start, fork, exec and exit, and the recording windows
//! ([`crate::control`]), switch it.
//!
//! The same word says whether a call may take an aggregate recording's
//! path of its own ([`counts_only`]), so that the hooks check that with one
//! load, not the recording, the mode and the phases one by one.

use std::sync::atomic::{AtomicU8, Ordering};

/// Why a call is not simply counted, bits; 0: it is.
static STATE: AtomicU8 = AtomicU8::new(OFF | NOT_AGGREGATE);
/// Recording is off.
const OFF: u8 = 1;
/// The recording keeps more than counters (or has not begun).
const NOT_AGGREGATE: u8 = 2;
/// A phase is active ([`crate::phase_stats`]): its own counts are kept too.
const PHASES: u8 = 4;

/// Whether events are recorded now.
#[inline(always)]
pub fn is_on() -> bool {
    STATE.load(Ordering::Relaxed) & OFF == 0
}

/// Whether a call is only counted: recording is on, an aggregate one, and
/// no phase is active. The functions forwarded to are resolved then (the
/// process's start resolves them before it switches recording on, and this
/// load acquires what that switch released).
#[inline(always)]
pub fn counts_only() -> bool {
    STATE.load(Ordering::Acquire) == 0
}

/// Starts recording events (the trace is open); returns whether they were
/// not being recorded.
pub fn switch_on() -> bool {
    STATE.fetch_and(!OFF, Ordering::AcqRel) & OFF != 0
}

/// Stops recording events; returns whether they were being recorded.
pub fn switch_off() -> bool {
    STATE.fetch_or(OFF, Ordering::AcqRel) & OFF == 0
}

/// Says whether the recording is an aggregate one (a segment begins).
pub fn set_aggregate(aggregate: bool) {
    set(NOT_AGGREGATE, !aggregate);
}

/// Says whether a phase is active.
pub fn set_phases(active: bool) {
    set(PHASES, active);
}

fn set(bit: u8, on: bool) {
    if on {
        STATE.fetch_or(bit, Ordering::AcqRel);
    } else {
        STATE.fetch_and(!bit, Ordering::AcqRel);
    }
}
