//! Whether events are recorded now: on once this process's trace is open
//! (unless it opens paused), off from the moment its segment ends (exit,
//! exec) until a new one begins (a failed exec, or a fork child's own trace),
//! and off while recording is paused. The hooks read it on every call; the
//! process's start, fork, exec and exit, and the recording windows
//! ([`crate::control`]), switch it.
//!
//! The same word says whether a call may take an aggregate recording's
//! path of its own ([`State::counts_only`]) and whether a phase is active,
//! so that the hooks check those with the one load, not the recording, the
//! mode and the phases one by one.

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
    state().is_on()
}

/// What the hooks need to know of the recording now, read once a call.
/// The functions forwarded to are resolved and the settings read once it is
/// on (the process's start does both before it switches recording on, and
/// this load acquires what that switch released).
#[inline(always)]
pub fn state() -> State {
    State(STATE.load(Ordering::Acquire))
}

/// The recording's state at one moment ([`state`]).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct State(u8);

impl State {
    /// Whether events are recorded.
    #[inline(always)]
    pub fn is_on(self) -> bool {
        self.0 & OFF == 0
    }

    /// Whether a call is only counted: recording is on, an aggregate one,
    /// and no phase is active.
    #[inline(always)]
    pub fn counts_only(self) -> bool {
        self.0 == 0
    }

    /// Whether a phase may be active ([`crate::phase_stats`]).
    #[inline(always)]
    pub fn phases(self) -> bool {
        self.0 & PHASES != 0
    }
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
