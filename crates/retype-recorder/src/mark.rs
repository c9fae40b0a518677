//! The markers API the program calls (declared in `include/retype.h`):
//! `retype_mark(NAME)` starts a named phase, ending the one before
//! (`retype_mark(NULL)` or `""` ends it without starting another), and
//! `retype_phase_stats` reads the running phase's figures
//! ([`phase_stats`]).
//!
//! Each mark is written as a meta record `phase` valued `NS NAME` (ns on the
//! events' clock, as the window records; `NS` alone for an end), which
//! `retype_trace::phase` reads back: `--phase NAME` in every analysis.

use std::ffi::CStr;

use libc::{c_char, c_int};

use crate::output;
use crate::phase_stats::{self, PhaseFigures};
use crate::sys::{self, StackStr};

/// Starts the phase `name` (NUL-terminated; NULL or empty: ends the phase
/// without starting another). Does nothing while the process records nothing.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn retype_mark(name: *const c_char) {
    if !output::writable() {
        return;
    }
    // The time first: the phase holds the calls made after it.
    let at = sys::now_ns();
    let name = if name.is_null() {
        &[][..]
    } else {
        // SAFETY: per the contract.
        unsafe { CStr::from_ptr(name) }.to_bytes()
    };
    phase_stats::mark(!name.is_empty());
    let mut value = StackStr::<4096>::new();
    value.push_num(at);
    if !name.is_empty() {
        value.push(b" ").push(&name[..name.len().min(4000)]);
    }
    output::meta(b"phase", value.as_bytes());
}

/// Fills `out` with the figures of the phase marked last (its top sites by
/// live bytes if `by_live`, else by bytes allocated); 0, or -1 when the
/// process records nothing (no figures are kept).
///
/// # Safety
/// `out` points to a writable `struct retype_phase_stats`.
#[no_mangle]
pub unsafe extern "C" fn retype_phase_stats(out: *mut PhaseFigures, by_live: c_int) -> c_int {
    if !output::writable() || out.is_null() {
        return -1;
    }
    // SAFETY: per the contract.
    phase_stats::read(unsafe { &mut *out }, by_live != 0);
    0
}
