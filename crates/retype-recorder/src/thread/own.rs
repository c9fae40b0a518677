//! The calling thread's own buffer, which its state ([`Local`]) points to:
//! taken on the thread's first event, when the thread also asks to be told
//! of its exit ([`exit`]).

use retype_trace::Event;

use super::buffer::{self, ThreadBuf};
use super::exit;
use super::local::Local;
use crate::stacks::ThreadStack;

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
    let mut b = l.buf.get();
    if b.is_null() {
        if exit::exiting() {
            return None;
        }
        b = mine(l);
    }
    // SAFETY: `b`, if not null, is this thread's live buffer.
    unsafe { b.as_mut() }.map(ThreadBuf::stack)
}

/// This thread's id (its buffer's), 0 if it has no buffer (it is exiting,
/// or none could be mapped): no system call.
#[inline(always)]
pub fn tid(l: &Local) -> u32 {
    let mut b = l.buf.get();
    if b.is_null() {
        if exit::exiting() {
            return 0;
        }
        b = mine(l);
    }
    // SAFETY: `b`, if not null, is this thread's live buffer.
    unsafe { b.as_ref() }.map_or(0, |b| b.tid)
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
