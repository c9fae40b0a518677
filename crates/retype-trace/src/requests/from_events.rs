//! Events as requests: a recording (or any trace of events) as the stream a replay runs.
//!
//! Threads are serialized by time ([`Trace::serialized_segments`]), live blocks are numbered
//! with the smallest free id, and what a request stream cannot say is dropped and counted
//! (free(NULL), failed calls, frees of blocks allocated before the trace began).

use std::collections::{BTreeSet, HashMap};

use super::{Request, Requests, MALLOC_ALIGN};
use crate::event::Op;
use crate::trace::Trace;

/// What [`from_events`] could not express.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub free_null: u64,
    pub failed: u64,
    pub unknown_pointers: u64,
}

/// The page size valloc and pvalloc align to.
const PAGE: u64 = 4096;

/// The requests of trace `t`, numbered from 1: aligned allocations keep their alignment
/// (valloc and pvalloc: the page), and blocks live at an exec are freed there (the new
/// image's heap is empty).
pub fn from_events(t: &Trace) -> (Requests, Dropped) {
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
                    Some(id) => ops.push(Request::Free { id }),
                    None => dropped.unknown_pointers += 1,
                },
                Op::Free => dropped.free_null += 1,
                _ if e.ret == 0 => dropped.failed += 1,
                Op::Realloc if e.ptr != 0 => match ids.moved(e.ptr, e.ret) {
                    Some(id) => ops.push(Request::Realloc { id, size: e.size }),
                    None => {
                        dropped.unknown_pointers += 1;
                        ops.extend(ids.begin(e.ret, e.size, MALLOC_ALIGN));
                    }
                },
                _ => {
                    let align = match e.op {
                        Op::Valloc | Op::Pvalloc => PAGE,
                        _ => e.align.clamp(u64::from(MALLOC_ALIGN), 1 << 31),
                    };
                    ops.extend(ids.begin(e.ret, e.size, align.next_power_of_two() as u32));
                }
            }
        }
    }
    (Requests::numbered(ops), dropped)
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
    fn begin(&mut self, addr: u64, size: u64, align: u32) -> impl Iterator<Item = Request> {
        let missed = self.end(addr).map(|id| Request::Free { id });
        let id = self.free.pop_first().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.live.insert(addr, id);
        missed
            .into_iter()
            .chain([Request::Alloc { id, size, align }])
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
    fn end_all(&mut self) -> Vec<Request> {
        let mut ids: Vec<u32> = self.live.drain().map(|(_, id)| id).collect();
        ids.sort_unstable();
        self.free.extend(&ids);
        ids.into_iter().map(|id| Request::Free { id }).collect()
    }
}
