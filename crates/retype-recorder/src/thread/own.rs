//! The calling thread's own buffer, which its state ([`Local`]) points to:
//! taken on the thread's first event, when the thread also asks to be told
//! of its exit ([`exit`]).

use retype_trace::Event;

use super::buffer::{self, ThreadBuf};
use super::exit;
use super::local::Local;
use crate::stacks::ThreadStack;
use crate::tally::Tally;

/// Appends the event `event` makes to this thread's buffer (see
/// [`buffer::append`]); `l` is this thread's state.
#[inline(always)]
pub fn append(l: &Local, event: impl FnOnce() -> Event) {
    let mut b = l.buf.get();
    if b.is_null() {
        if exit::exiting() {
            return buffer::write_stray(&event());
        }
        b = mine(l);
    }
    if b.is_null() {
        return;
    }
    // SAFETY: `b` is this thread's live buffer.
    unsafe { buffer::append(b, event) }
}

/// This thread's unwinding state (in its buffer, made on first use), or
/// `None` if it has no buffer (it is exiting, or none could be mapped).
/// Buffers are never unmapped; the caller (a hook) holds it for one call.
#[inline(always)]
pub fn stack_state(l: &Local) -> Option<&'static mut ThreadStack> {
    // SAFETY: `buffer` gives this thread's live buffer, or null.
    unsafe { buf(l).as_mut() }.map(ThreadBuf::stack)
}

/// This thread's counters (in its buffer; `None` as [`stack_state`]) and where its last
/// allocation is kept ([`crate::aggregate::slot`] of its id; of 0 if it has
/// no buffer).
#[inline(always)]
pub fn counts(l: &Local) -> (Option<&'static Tally>, u32) {
    // SAFETY: as in `stack_state`.
    match unsafe { buf(l).as_ref() } {
        Some(b) => (Some(b.tally()), b.count_at),
        None => (None, 0),
    }
}

/// This thread's buffer, taken on first use; null if it is exiting or none
/// could be mapped.
#[inline(always)]
fn buf(l: &Local) -> *mut ThreadBuf {
    let b = l.buf.get();
    if !b.is_null() || exit::exiting() {
        return b;
    }
    mine(l)
}

/// This thread's buffer, taken on its first use; null if none could be had.
#[cold]
fn mine(l: &Local) -> *mut ThreadBuf {
    let b = buffer::take();
    if !b.is_null() {
        l.buf.set(b);
        exit::watch(b);
    }
    b
}
