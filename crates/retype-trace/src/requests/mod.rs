//! The request stream: what a program asked of its allocator, in the one form every
//! format comes to and the replay runs, whatever the trace was written in.
//!
//! Requests name blocks by id: an [`Request::Alloc`] makes its id live, [`Request::Free`]
//! ends it, [`Request::Realloc`] resizes a live id (keeping the alignment it was allocated
//! with), and an id may be used again once freed. C's corner cases are already applied, so a
//! replayer never sees an ill-formed request: no `free(NULL)`, no `realloc` of a dead id or
//! to 0 bytes (see [`Quirk`]).
//!
//! Made from a `.rep` file by [`crate::malloclab`], from a recording or any other trace by
//! [`from_events()`] (threads serialized by time); turned back into events with synthetic
//! addresses by [`to_events()`]. [`crate::format::load_requests`] reads any file as requests.

mod from_events;
mod to_events;

pub use from_events::{from_events, Dropped};
pub use to_events::to_events;

use std::collections::HashMap;

/// The alignment of a plain `malloc` request, and the least any request asks for: the
/// payload alignment the CS:APP malloc-lab driver checks (`ALIGNMENT` in its config.h).
pub const MALLOC_ALIGN: u32 = 8;

/// One allocation request, C semantics applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `ptr[id] = aligned_alloc(align, size)`; a plain `malloc` has [`MALLOC_ALIGN`].
    Alloc { id: u32, size: u64, align: u32 },
    /// `ptr[id] = realloc(ptr[id], size)` with `ptr[id]` live and `size > 0`.
    Realloc { id: u32, size: u64 },
    /// `free(ptr[id])` with `ptr[id]` live.
    Free { id: u32 },
}

impl Request {
    /// The block the request is about.
    pub fn id(&self) -> u32 {
        match *self {
            Request::Alloc { id, .. } | Request::Realloc { id, .. } | Request::Free { id } => id,
        }
    }
}

/// A source line that was rewritten to its C meaning while reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quirk {
    pub line: usize,
    pub what: &'static str,
}

/// A request stream and where each request came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub requests: Vec<Request>,
    /// `lines[i]` is where `requests[i]` came from, for error messages: its 1-based line in
    /// a text file, or its 1-based number in a stream made from events.
    pub lines: Vec<usize>,
    /// Lines rewritten to their C meaning.
    pub quirks: Vec<Quirk>,
}

impl Requests {
    /// Requests numbered from 1, as made from events.
    pub fn numbered(requests: Vec<Request>) -> Requests {
        Requests {
            lines: (1..=requests.len()).collect(),
            requests,
            quirks: Vec::new(),
        }
    }

    /// Renumbers the ids in order of first use, so that they index a table of as many slots
    /// as the stream has distinct ids (a file may name ids sparsely); returns that count.
    pub fn dense(&mut self) -> usize {
        let mut slot: HashMap<u32, u32> = HashMap::new();
        for r in &mut self.requests {
            let next = slot.len() as u32;
            let new = *slot.entry(r.id()).or_insert(next);
            match r {
                Request::Alloc { id, .. } | Request::Realloc { id, .. } | Request::Free { id } => {
                    *id = new
                }
            }
        }
        slot.len()
    }

    /// The most bytes live at once, as requested (mdriver's `max_total_size`).
    pub fn peak_live(&self) -> u64 {
        let mut live: HashMap<u32, u64> = HashMap::new();
        let (mut total, mut peak) = (0u64, 0u64);
        for r in &self.requests {
            match *r {
                Request::Alloc { id, size, .. } | Request::Realloc { id, size } => {
                    total = total - live.insert(id, size).unwrap_or(0) + size;
                }
                Request::Free { id } => total -= live.remove(&id).unwrap_or(0),
            }
            peak = peak.max(total);
        }
        peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Renumbering keeps which requests name the same block, and the ids it gives run
        /// from 0 below the count it returns.
        #[test]
        fn dense_ids_keep_the_blocks(ids in prop::collection::vec(0u32..1_000_000, 0..100)) {
            let requests: Vec<Request> = ids.iter().map(|&id| Request::Free { id }).collect();
            let mut r = Requests::numbered(requests);
            let n = r.dense();
            let new: Vec<u32> = r.requests.iter().map(Request::id).collect();
            for i in 0..ids.len() {
                prop_assert!((new[i] as usize) < n);
                for j in 0..ids.len() {
                    prop_assert_eq!(ids[i] == ids[j], new[i] == new[j]);
                }
            }
            let distinct: std::collections::HashSet<_> = ids.iter().collect();
            prop_assert_eq!(n, distinct.len());
        }
    }
}
