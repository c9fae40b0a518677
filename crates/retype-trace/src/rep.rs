//! Conversion between retype traces and malloc-lab `.rep` request streams
//! ([`crate::malloclab`] reads and writes the files).
//!
//! `.rep` names blocks by id and has no threads, clock, alignment or failed
//! calls. Importing gives block `id` the address [`synthetic_addr`]`(id)`;
//! exporting serializes threads by timestamp, numbers live blocks with the
//! smallest free id, and drops what the format cannot say (free(NULL), failed
//! calls, frees of blocks allocated before the trace began, alignments).

use std::collections::{BTreeSet, HashMap};

use crate::event::{Event, Op};
use crate::malloclab::{self, MALLOCLAB_ALIGN};
use crate::trace::Trace;
use crate::wee_alloc::synthetic_addr;

/// A malloc-lab request stream as a retype trace; event `i` gets time `i`.
pub fn from_malloclab(m: &malloclab::Trace) -> Trace {
    let mut t = Trace::default();
    t.meta.push(("source".into(), "malloc-lab .rep".into()));
    t.meta.push(("addresses".into(), "synthetic".into()));
    for (i, op) in m.ops.iter().enumerate() {
        let time_ns = i as u64;
        let e = match *op {
            malloclab::Op::Alloc { id, size, align } if align > MALLOCLAB_ALIGN => Event {
                op: Op::AlignedAlloc,
                align: u64::from(align),
                size,
                ret: synthetic_addr(u64::from(id)),
                ..Event::default()
            },
            malloclab::Op::Alloc { id, size, .. } => Event {
                op: Op::Malloc,
                size,
                ret: synthetic_addr(u64::from(id)),
                ..Event::default()
            },
            malloclab::Op::Realloc { id, size } => {
                let a = synthetic_addr(u64::from(id));
                Event {
                    op: Op::Realloc,
                    ptr: a,
                    size,
                    ret: a,
                    ..Event::default()
                }
            }
            malloclab::Op::Free { id } => Event {
                op: Op::Free,
                ptr: synthetic_addr(u64::from(id)),
                ..Event::default()
            },
        };
        t.events.push(Event { time_ns, ..e });
    }
    t
}

/// What [`to_malloclab`] could not express.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub free_null: u64,
    pub failed: u64,
    pub unknown_pointers: u64,
    pub alignments: u64,
}

/// A retype trace as a malloc-lab request stream (threads serialized by time).
pub fn to_malloclab(t: &Trace) -> (Vec<malloclab::Op>, Dropped) {
    let mut ops = Vec::new();
    let mut dropped = Dropped::default();
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut free_ids = BTreeSet::new();
    let mut next_id = 0u32;
    let mut take_id = |free_ids: &mut BTreeSet<u32>| {
        free_ids.pop_first().unwrap_or_else(|| {
            next_id += 1;
            next_id - 1
        })
    };
    for e in t.serialized() {
        match e.op {
            Op::Free if e.ptr == 0 => dropped.free_null += 1,
            Op::Free | Op::Realloc
                if e.ptr != 0 && (e.op == Op::Free || (e.size == 0 && e.ret == 0)) =>
            {
                match ids.remove(&e.ptr) {
                    Some(id) => {
                        free_ids.insert(id);
                        ops.push(malloclab::Op::Free { id });
                    }
                    None => dropped.unknown_pointers += 1,
                }
            }
            Op::Realloc if e.ptr != 0 => {
                if e.ret == 0 {
                    dropped.failed += 1;
                    continue;
                }
                match ids.remove(&e.ptr) {
                    Some(id) => {
                        ids.insert(e.ret, id);
                        ops.push(malloclab::Op::Realloc { id, size: e.size });
                    }
                    None => {
                        dropped.unknown_pointers += 1;
                        let id = take_id(&mut free_ids);
                        ids.insert(e.ret, id);
                        ops.push(malloclab::Op::Alloc {
                            id,
                            size: e.size,
                            align: MALLOCLAB_ALIGN,
                        });
                    }
                }
            }
            _ if e.ret == 0 => dropped.failed += 1,
            _ => {
                if e.align > u64::from(MALLOCLAB_ALIGN) || matches!(e.op, Op::Valloc | Op::Pvalloc)
                {
                    dropped.alignments += 1;
                }
                // A live address handed out again means the trace missed its free.
                if let Some(old) = ids.remove(&e.ret) {
                    free_ids.insert(old);
                    ops.push(malloclab::Op::Free { id: old });
                }
                let id = take_id(&mut free_ids);
                ids.insert(e.ret, id);
                ops.push(malloclab::Op::Alloc {
                    id,
                    size: e.size,
                    align: MALLOCLAB_ALIGN,
                });
            }
        }
    }
    (ops, dropped)
}
