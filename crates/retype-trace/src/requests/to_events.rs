//! Requests as events, for the formats and analyses that read events: block `id` gets the
//! address [`synthetic_addr`]`(id)` and request `i` the time `i` (a request stream has no
//! threads and no clock).

use super::{Request, Requests, MALLOC_ALIGN};
use crate::event::{Event, Op};
use crate::trace::Trace;
use crate::wee_alloc::synthetic_addr;

/// `requests` as a trace whose metadata names `source`.
pub fn to_events(requests: &Requests, source: &str) -> Trace {
    let mut t = Trace::default();
    t.meta.push(("source".into(), source.into()));
    t.meta.push(("addresses".into(), "synthetic".into()));
    for (i, r) in requests.requests.iter().enumerate() {
        let addr = synthetic_addr(u64::from(r.id()));
        let e = match *r {
            Request::Alloc { size, align, .. } if align > MALLOC_ALIGN => Event {
                op: Op::AlignedAlloc,
                align: u64::from(align),
                size,
                ret: addr,
                ..Event::default()
            },
            Request::Alloc { size, .. } => Event {
                op: Op::Malloc,
                size,
                ret: addr,
                ..Event::default()
            },
            Request::Realloc { size, .. } => Event {
                op: Op::Realloc,
                ptr: addr,
                size,
                ret: addr,
                ..Event::default()
            },
            Request::Free { .. } => Event {
                op: Op::Free,
                ptr: addr,
                ..Event::default()
            },
        };
        t.events.push(Event {
            time_ns: i as u64,
            ..e
        });
    }
    t
}
