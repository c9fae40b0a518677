//! A thread's exit: a pthread key's destructor, asked for by each thread as
//! it takes its buffer, writes the thread's events and its summary record
//! and gives the buffer back for reuse. Calls the thread makes after that
//! (glibc's own cleanup) are written one by one.

use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::c_void;
use retype_trace::codec::{self, thread_fields};

use super::buffer::{self, ThreadBuf};
use super::cost;
use super::local::{local, Busy};
use crate::sys;

/// The pthread key whose destructor tells us a thread exits (u32::MAX: none).
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

thread_local! {
    /// This thread's summary has been written.
    static SUMMARIZED: Cell<bool> = const { Cell::new(false) };
}

/// Creates the thread-exit key (once, from the constructor).
pub fn init() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; `on_exit` has the destructor's signature.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_exit)) } == 0 {
        KEY.store(key, Ordering::Release);
    }
}

/// Asks for `on_exit(b)` when this thread exits; `b` is its buffer.
pub fn watch(b: *mut ThreadBuf) {
    let key = KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: `key` was created by pthread_key_create.
        unsafe { libc::pthread_setspecific(key, b.cast()) };
    }
}

unsafe extern "C" fn on_exit(b: *mut c_void) {
    let _busy = Busy::enter();
    let b = b.cast::<ThreadBuf>();
    let mut rec = [0u8; 1 + 8 * codec::MAX_VARINT];
    let mut n = 0;
    if !SUMMARIZED.replace(true) {
        // SAFETY: the destructor gets the buffer pointer we registered.
        let start_ns = unsafe { (*b).start_ns };
        if let Some(s) = cost::summary(sys::gettid(), start_ns, true) {
            n = codec::varint_record(&mut rec, codec::TAG_THREAD, &thread_fields(&s)).unwrap_or(0);
        }
    }
    // SAFETY: `b` is this thread's buffer, which it no longer reaches once
    // its state forgets it (below).
    unsafe { buffer::release(b, &rec[..n]) };
    local().buf.set(null_mut());
}

/// Whether this thread has released its buffer at thread exit.
pub fn exiting() -> bool {
    SUMMARIZED.get()
}

/// Whether this thread's summary is still to be written (and now will be).
pub fn claim_own_summary() -> bool {
    !SUMMARIZED.replace(true)
}
