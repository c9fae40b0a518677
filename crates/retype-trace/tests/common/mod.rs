//! Strategies both test binaries of the trace format draw from.
#![allow(dead_code)]

use proptest::prelude::*;
use retype_trace::{Event, Op};

fn op() -> impl Strategy<Value = Op> {
    prop::sample::select(Op::ALL.to_vec())
}

/// Values that exercise every varint length, and small ones that are common.
pub fn num() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..300,
        any::<u64>(),
        (any::<u64>(), 0u32..64).prop_map(|(v, shift)| v >> shift),
        Just(u64::MAX)
    ]
}

/// Any event, with the fields its op does not carry zeroed, and no stack.
pub fn event() -> impl Strategy<Value = Event> {
    (
        op(),
        0u32..4,
        num(),
        num(),
        num(),
        num(),
        num(),
        num(),
        any::<bool>(),
    )
        .prop_map(
            |(op, thread, time_ns, latency_ns, size, align, ptr, ret, descheduled)| {
                Event {
                    op,
                    thread,
                    time_ns,
                    latency_ns,
                    size,
                    align,
                    ptr,
                    ret,
                    stack: 0,
                    descheduled,
                }
                .canonical()
            },
        )
}
