//! The gate of the records a thread writes straight to the trace, outside
//! the thread buffers: RSS samples ([`crate::rss`]) and mapping calls
//! ([`crate::mapping`]). Each is one `write(2)`, and none may land after its
//! segment's end record (the reader would take it for the start of a segment
//! that never ends). Writers count themselves in while the gate is open;
//! closing it waits for those already in, without a lock the hooks could
//! deadlock on: a writer never waits.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::output;

/// The open bit, and below it the writers inside.
static GATE: AtomicU32 = AtomicU32::new(0);
const OPEN: u32 = 1 << 31;

/// Opens the gate as a segment begins (also forgetting writers a fork left
/// behind in threads the child does not have).
pub fn open() {
    GATE.store(OPEN, Ordering::Release);
}

/// Writes `record` if the segment is open; whether it did.
pub fn write(record: &[u8]) -> bool {
    let g = GATE.fetch_add(1, Ordering::AcqRel);
    let open = g & OPEN != 0;
    if open {
        output::write(record);
    }
    GATE.fetch_sub(1, Ordering::AcqRel);
    open
}

/// Closes the gate before the segment's end record: waits until the writers
/// inside are done. In a signal handler, which may have interrupted a writer
/// on its own thread, it waits a bounded time.
pub fn close(in_signal: bool) {
    GATE.fetch_and(!OPEN, Ordering::AcqRel);
    let mut spins = 0u32;
    while GATE.load(Ordering::Acquire) != 0 && !(in_signal && spins == 100_000) {
        spins += 1;
        std::hint::spin_loop();
    }
}
