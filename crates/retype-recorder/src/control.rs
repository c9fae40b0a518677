//! Recording windows: recording starts and stops while the trace stays open.
//! A paused start (`RETYPE_PAUSED`), the toggle signal
//! (`RETYPE_TOGGLE_SIGNAL`; `retype record --control` sends it with a value
//! that says start or stop) and a recorder loaded into a running process
//! (attach, detach) open and close windows.
//!
//! Each window is written as two meta records, `window_start` and
//! `window_stop`, whose values are `NS REASON`: ns on the events' clock, and
//! what opened it (`start`, `fork`, `exec`, `signal`, `control`, `attach`) or
//! closed it (`exit`, `exec`, `signal`, `control`, `detach`). A window is not
//! a segment: the heap is the same on both sides of a pause, so blocks cross
//! windows, and a free of a block allocated while nothing was recorded is a
//! free of a pointer the trace never returned. A trace recorded without
//! control has no window records: its one window is its whole run.

use std::sync::atomic::{AtomicBool, Ordering};

use libc::c_int;

use crate::sys::{self, StackStr};
use crate::{output, recording, rss, settings};

/// The value `retype record --control` sends with the signal to start recording.
const START: usize = 1;
/// ... and to stop it (a plain signal, without a value, toggles).
const STOP: usize = 2;

/// The trace is open (between the segment's start and its end).
static OPEN: AtomicBool = AtomicBool::new(false);
/// Windows are written: recording is under control (paused start, toggle signal, attach).
static CONTROLLED: AtomicBool = AtomicBool::new(false);

/// Puts recording under control if the settings ask for it (or `attached`):
/// windows are written from now on, and the toggle signal is caught if the
/// program leaves it at its default action (a program's own handler is kept).
pub fn init(attached: bool) {
    let s = settings::get();
    let caught = s.toggle_signal().is_some_and(catch);
    if attached || s.paused() || caught {
        CONTROLLED.store(true, Ordering::Release);
    }
}

/// Installs [`on_signal`] for `sig` if its action is the default or ignore.
fn catch(sig: c_int) -> bool {
    // SAFETY: querying and setting a disposition with valid sigaction structs.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
            || (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN)
        {
            return false;
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_signal as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, std::ptr::null_mut()) == 0
    }
}

/// The toggle signal: starts or stops recording as its value says, or
/// toggles it when it comes without one (`kill -USR2`).
extern "C" fn on_signal(_sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let errno = sys::errno();
    // SAFETY: SA_SIGINFO handlers get a valid siginfo; its value is meant
    // only when the sender queued one (SI_QUEUE).
    let asked = unsafe {
        if (*info).si_code == libc::SI_QUEUE {
            (*info).si_value().sival_ptr as usize
        } else {
            0
        }
    };
    match asked {
        START => start(b"control"),
        STOP => stop(b"control"),
        _ if recording::is_on() => stop(b"signal"),
        _ => start(b"signal"),
    }
    // SAFETY: errno is this thread's; the interrupted code gets its own back.
    unsafe { *libc::__errno_location() = errno };
}

/// The trace has opened; recording starts now if `on` (its first window
/// opens for `reason`), else it waits for a start.
pub fn begin(on: bool, reason: &[u8]) {
    OPEN.store(true, Ordering::Release);
    if on {
        start(reason);
    }
}

/// Opens a window: records from now on (if the trace is open and not stopped for good).
pub fn start(reason: &[u8]) {
    if !OPEN.load(Ordering::Acquire) || !output::writable() {
        return;
    }
    // The time first: every event the window holds begins after it.
    let at = sys::now_ns();
    if recording::switch_on() {
        window(b"window_start", at, reason);
        rss::sample();
    }
}

/// Closes the window: records nothing from now on.
pub fn stop(reason: &[u8]) {
    rss::sample();
    if recording::switch_off() {
        window(b"window_stop", sys::now_ns(), reason);
    }
}

/// The trace is about to end: stops recording. `None` if it was not open,
/// else whether a window was open (the caller closes it with [`ended`] once
/// the events are written).
pub fn end() -> Option<bool> {
    let on = recording::switch_off();
    OPEN.swap(false, Ordering::AcqRel).then_some(on)
}

/// Writes the end of the window [`end`] found open, now, for `reason`.
pub fn ended(reason: &[u8]) {
    window(b"window_stop", sys::now_ns(), reason);
}

/// Writes window record `key` (`window_start`, `window_stop`): `NS REASON`.
fn window(key: &[u8], at: u64, reason: &[u8]) {
    if !CONTROLLED.load(Ordering::Acquire) {
        return;
    }
    let mut value = StackStr::<64>::new();
    value.push_num(at).push(b" ").push(reason);
    output::meta(key, value.as_bytes());
}
