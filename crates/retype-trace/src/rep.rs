//! Conversion between retype traces and malloc-lab `.rep` request streams
//! ([`crate::malloclab`] reads and writes the files).
//!
//! `.rep` names blocks by id and has no threads, clock, alignment or failed
//! calls. Importing gives block `id` the address [`synthetic_addr`]`(id)`;
//! exporting serializes threads by timestamp, numbers live blocks with the
//! smallest free id, and drops what the format cannot say (free(NULL), failed
//! calls, frees of blocks allocated before the trace began; a `.rep` file also
//! loses alignments, see [`clamp_alignments`]).

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
}

/// The page size valloc and pvalloc align to.
const PAGE: u64 = 4096;

/// The stream as a `.rep` file can hold it: alignments above malloc-lab's are
/// lost; returns how many were.
pub fn clamp_alignments(ops: &mut [malloclab::Op]) -> u64 {
    let mut lost = 0;
    for op in ops {
        if let malloclab::Op::Alloc { align, .. } = op {
            if *align > MALLOCLAB_ALIGN {
                *align = MALLOCLAB_ALIGN;
                lost += 1;
            }
        }
    }
    lost
}

/// A retype trace as a malloc-lab request stream: threads serialized by time,
/// aligned allocations keep their alignment (valloc and pvalloc: the page),
/// and blocks live at an exec are freed there (the new image's heap is empty).
pub fn to_malloclab(t: &Trace) -> (Vec<malloclab::Op>, Dropped) {
    let mut ids = Ids::default();
    let mut ops = Vec::new();
    let mut dropped = Dropped::default();
    for (k, segment) in t.serialized_segments().into_iter().enumerate() {
        if k > 0 {
            ops.extend(ids.end_all());
        }
        for e in segment {
            let frees = e.op == Op::Free || (e.op == Op::Realloc && e.size == 0 && e.ret == 0);
            match e.op {
                Op::Free | Op::Realloc if e.ptr != 0 && frees => match ids.end(e.ptr) {
                    Some(id) => ops.push(malloclab::Op::Free { id }),
                    None => dropped.unknown_pointers += 1,
                },
                Op::Free => dropped.free_null += 1,
                _ if e.ret == 0 => dropped.failed += 1,
                Op::Realloc if e.ptr != 0 => match ids.moved(e.ptr, e.ret) {
                    Some(id) => ops.push(malloclab::Op::Realloc { id, size: e.size }),
                    None => {
                        dropped.unknown_pointers += 1;
                        ops.extend(ids.begin(e.ret, e.size, MALLOCLAB_ALIGN));
                    }
                },
                _ => {
                    let align = match e.op {
                        Op::Valloc | Op::Pvalloc => PAGE,
                        _ => e.align.clamp(u64::from(MALLOCLAB_ALIGN), 1 << 31),
                    };
                    ops.extend(ids.begin(e.ret, e.size, align.next_power_of_two() as u32));
                }
            }
        }
    }
    (ops, dropped)
}

/// Live addresses and the ids they go by; a freed id is reused, smallest first.
#[derive(Default)]
struct Ids {
    live: HashMap<u64, u32>,
    free: BTreeSet<u32>,
    next: u32,
}

impl Ids {
    /// A block appears at `addr`. A live address handed out again means the
    /// trace missed its free: that free comes first.
    fn begin(&mut self, addr: u64, size: u64, align: u32) -> impl Iterator<Item = malloclab::Op> {
        let missed = self.end(addr).map(|id| malloclab::Op::Free { id });
        let id = self.free.pop_first().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.live.insert(addr, id);
        missed
            .into_iter()
            .chain([malloclab::Op::Alloc { id, size, align }])
    }

    fn end(&mut self, addr: u64) -> Option<u32> {
        let id = self.live.remove(&addr)?;
        self.free.insert(id);
        Some(id)
    }

    fn moved(&mut self, from: u64, to: u64) -> Option<u32> {
        let id = self.live.remove(&from)?;
        self.live.insert(to, id);
        Some(id)
    }

    /// Frees every live block (the program image ends).
    fn end_all(&mut self) -> Vec<malloclab::Op> {
        let mut ids: Vec<u32> = self.live.drain().map(|(_, id)| id).collect();
        ids.sort_unstable();
        self.free.extend(&ids);
        ids.into_iter()
            .map(|id| malloclab::Op::Free { id })
            .collect()
    }
}
