//! The census: the statistics as figures for a program to read ([`Stats`], what
//! `retype_malloc::stats()` returns), taken from the counters of `stats` and from the thread
//! heaps, one by one, with the bytes each holds; and their JSON form
//! (`RETYPE_MALLOC_STATS=json`).
//!
//! Nothing here is counted on a fast path: the mapped bytes, the cache and the large blocks
//! are counted on slow paths anyway, and a heap's pages are walked when it is taken. Only
//! the live bytes of small and medium blocks as the program's calls move them need every
//! malloc and free to count (with `RETYPE_MALLOC_STATS` set: [`Stats::small_live`]).
//!
//! A heap's pages may be walked by its own thread, or under the pool's lock while the heap
//! waits in the pool; a heap another thread is running changes without a lock, so only the
//! bytes of its pages are read (see [`HeapState::Running`]).

use core::sync::atomic::{AtomicIsize, Ordering};

use crate::consts::SEGMENT_SIZE;
use crate::heap::{self, Heap};
use crate::page::Page;
use crate::size_class;
use crate::spill;
use crate::stats::{self, get};
use crate::{config, pool};

/// Where a thread heap is when the statistics are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapState {
    /// The heap of the thread that took the statistics: walked.
    Own,
    /// The heap of another running thread: only its bytes held are known, counted as in use.
    Running,
    /// Parked by a thread that waits (see [`crate::park`]), in the pool: walked.
    Parked,
    /// Left by a thread that exited, in the pool until a new thread adopts it: walked.
    Abandoned,
}

impl HeapState {
    /// The state's name in the JSON form.
    pub fn name(self) -> &'static str {
        match self {
            HeapState::Own => "own",
            HeapState::Running => "running",
            HeapState::Parked => "parked",
            HeapState::Abandoned => "abandoned",
        }
    }
}

/// The bytes a thread heap holds, or heaps together, in the pages they took from
/// segments: `held` is `in_use + free + kept + spilled`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapBytes {
    /// Bytes of its pages (whole slices, a segment's first page with the segment's header).
    pub held: usize,
    /// Bytes of blocks handed out and not freed back to it (their size classes' sizes;
    /// blocks freed by other threads count until the heap collects them).
    pub in_use: usize,
    /// Free bytes in its pages in use: free blocks, the part not yet carved into blocks,
    /// what no block fits in.
    pub free: usize,
    /// Bytes of the empty pages it keeps for reuse.
    pub kept: usize,
    /// How many pages it keeps.
    pub kept_pages: usize,
    /// Bytes of the blocks freed into its spills, which malloc takes first.
    pub spilled: usize,
    /// How many blocks its spills hold.
    pub spilled_blocks: usize,
}

/// A thread heap: where it is, and the bytes it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    /// Where the heap is.
    pub state: HeapState,
    /// What it holds.
    pub bytes: HeapBytes,
}

impl HeapBytes {
    /// The heap `heap`, walked unless `state` is `Running` (see [`HeapState`]).
    ///
    /// # Safety
    /// `heap` is a heap made by the pool; unless `state` is `Running`, the caller owns it or
    /// holds the pool's lock over it.
    unsafe fn of(heap: *mut Heap, state: HeapState) -> HeapBytes {
        let held = heap::held(heap);
        let mut h = HeapBytes {
            held,
            in_use: held,
            ..HeapBytes::default()
        };
        if state == HeapState::Running {
            return h;
        }
        // SAFETY: the caller's contract: no other thread changes the heap meanwhile.
        unsafe {
            let mut used = 0;
            heap::each_page(heap, |p: *mut Page| {
                used += (*p).used as usize * (*p).block_size as usize;
            });
            for (i, sp) in (*heap).spills.iter().enumerate() {
                h.spilled_blocks += sp.len();
                h.spilled += sp.len() * size_class::block_size(spill::FIRST_CLASS + i);
            }
            h.kept = (*heap).kept.bytes();
            h.kept_pages = (*heap).kept.len();
            // Spilled blocks are still counted as used by their pages.
            h.in_use = used.saturating_sub(h.spilled);
            h.free = held.saturating_sub(used + h.kept);
        }
        h
    }

    fn add(&mut self, o: &HeapBytes) {
        self.held += o.held;
        self.in_use += o.in_use;
        self.free += o.free;
        self.kept += o.kept;
        self.kept_pages += o.kept_pages;
        self.spilled += o.spilled;
        self.spilled_blocks += o.spilled_blocks;
    }
}

/// The allocator's statistics at one moment, process-wide, in bytes unless named a count.
/// Taken by [`crate::stats`]; what is mapped: `mapped` is `segment_bytes + cached + reserve
/// + large_mapped`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Bytes mapped, all told.
    pub mapped: usize,
    /// The most bytes mapped at once so far.
    pub mapped_peak: usize,
    /// Segments in use (each [`crate::SEGMENT_SIZE`] bytes), which hold the pages of small
    /// and medium blocks.
    pub segments: usize,
    /// Their bytes.
    pub segment_bytes: usize,
    /// Bytes of empty segments and freed large blocks cached with their pages, for reuse;
    /// given back to the OS after the purge delay, or by [`crate::trim`].
    pub cached: usize,
    /// Empty segments cached, pages kept or not.
    pub cached_segments: usize,
    /// Bytes cached whose pages went back to the OS already (not in `mapped`'s resident
    /// parts; their address space stays reserved until they are unmapped).
    pub cached_returned: usize,
    /// Bytes of the reserve (`RETYPE_MALLOC_RESERVE`) not in use.
    pub reserve: usize,
    /// Bytes of the mappings of live large blocks (over 128 KiB).
    pub large_mapped: usize,
    /// Live large blocks.
    pub large_blocks: usize,
    /// Bytes asked for by live large blocks.
    pub large_live: usize,
    /// Live bytes of small and medium blocks as malloc and free moved them (their size
    /// classes' sizes), counted only with `RETYPE_MALLOC_STATS` set (each thread adds them
    /// in batches of 64 KiB; the calling thread's are added first); `None` otherwise.
    pub small_live: Option<usize>,
    /// The peak of the live bytes, small and large, when they are counted.
    pub live_peak: Option<usize>,
    /// Pages claimed from segments so far.
    pub pages_claimed: usize,
    /// Thread heaps made, and adopted by a new thread, so far.
    pub heaps_created: usize,
    /// See `heaps_created`.
    pub heaps_adopted: usize,
    /// Mappings and large blocks given back to the OS so far.
    pub purged: usize,
    /// Calls that mapped, unmapped, moved, advised or protected memory (see
    /// [`crate::system_calls`]).
    pub system_calls: usize,
    /// Every thread heap made, newest first.
    pub heaps: Vec<HeapStats>,
}

impl Stats {
    /// The thread heaps' bytes added up.
    pub fn heap_total(&self) -> HeapBytes {
        let mut t = HeapBytes::default();
        self.heaps.iter().for_each(|h| t.add(&h.bytes));
        t
    }
}

/// A line of the JSON form, formatted without allocating.
type Line = retype_stackstr::StackStr<256>;

/// Writes `"name": value` (`null` for none), after a comma unless `first`.
fn field(out: &mut dyn FnMut(&[u8]), first: bool, name: &str, value: Option<usize>) {
    let mut l = Line::new();
    l.push(if first { b"\"" } else { b", \"" })
        .push(name.as_bytes())
        .push(b"\": ");
    match value {
        Some(v) => l.push_num(v as u64),
        None => l.push(b"null"),
    };
    out(l.as_bytes());
}

impl HeapBytes {
    /// Writes the bytes as the fields of a JSON object (keys as their names), each after a
    /// comma: the caller writes the braces.
    fn write_json_fields(&self, out: &mut dyn FnMut(&[u8])) {
        let rows = [
            ("held", self.held),
            ("in_use", self.in_use),
            ("free", self.free),
            ("kept", self.kept),
            ("kept_pages", self.kept_pages),
            ("spilled", self.spilled),
            ("spilled_blocks", self.spilled_blocks),
        ];
        for (name, value) in rows {
            field(out, false, name, Some(value));
        }
    }
}

impl Stats {
    /// Writes the statistics as one JSON object through `out`, a piece at a time, without
    /// allocating: keys as the fields' names (`null` for a figure not counted), the heaps'
    /// total as `heap_total` (an object of [`HeapBytes`]' fields), and the heaps as
    /// `heaps`, an array of objects: `state` ([`HeapState::name`]) and the fields of its
    /// [`HeapBytes`]; then a newline.
    pub fn write_json(&self, out: &mut dyn FnMut(&[u8])) {
        out(b"{");
        let rows = [
            ("mapped", Some(self.mapped)),
            ("mapped_peak", Some(self.mapped_peak)),
            ("segments", Some(self.segments)),
            ("segment_bytes", Some(self.segment_bytes)),
            ("cached", Some(self.cached)),
            ("cached_segments", Some(self.cached_segments)),
            ("cached_returned", Some(self.cached_returned)),
            ("reserve", Some(self.reserve)),
            ("large_mapped", Some(self.large_mapped)),
            ("large_blocks", Some(self.large_blocks)),
            ("large_live", Some(self.large_live)),
            ("small_live", self.small_live),
            ("live_peak", self.live_peak),
            ("pages_claimed", Some(self.pages_claimed)),
            ("heaps_created", Some(self.heaps_created)),
            ("heaps_adopted", Some(self.heaps_adopted)),
            ("purged", Some(self.purged)),
            ("system_calls", Some(self.system_calls)),
        ];
        for (i, (name, value)) in rows.into_iter().enumerate() {
            field(out, i == 0, name, value);
        }
        out(b", \"heap_total\": {\"heaps\": ");
        out(Line::new().push_num(self.heaps.len() as u64).as_bytes());
        self.heap_total().write_json_fields(out);
        out(b"}, \"heaps\": [");
        for (i, h) in self.heaps.iter().enumerate() {
            out(if i == 0 {
                b"{\"state\": \""
            } else {
                b", {\"state\": \""
            });
            out(h.state.name().as_bytes());
            out(b"\"");
            h.bytes.write_json_fields(out);
            out(b"}");
        }
        out(b"]}\n");
    }
}

/// Takes the statistics. It allocates (the list of heaps) before it takes the pool's lock,
/// never under it: a thread's first malloc takes that lock.
pub(crate) fn take() -> Stats {
    let mut heaps = Vec::new();
    loop {
        let made = get(&stats::HEAPS_CREATED);
        heaps.reserve(made);
        // After the allocation, which may have given the thread its heap.
        let own = heap::current();
        if !heap::is_empty(own) && config::counted() {
            // SAFETY: the heap is the calling thread's own.
            unsafe { heap::settle_count(own) };
        }
        let pool = pool::POOL.lock();
        // Heaps are made under the lock: none is made while it is held.
        if get(&stats::HEAPS_CREATED) > heaps.capacity() {
            continue;
        }
        let mut h = pool.made;
        while !h.is_null() {
            // SAFETY: heaps are never unmade; a pooled heap is the pool's, and we hold its
            // lock; the own heap is ours; a running one is only read (see `HeapBytes::of`).
            unsafe {
                let state = if h == own {
                    HeapState::Own
                } else if !(*h).pooled {
                    HeapState::Running
                } else if (*h).home != 0 {
                    HeapState::Parked
                } else {
                    HeapState::Abandoned
                };
                let bytes = HeapBytes::of(h, state);
                heaps.push(HeapStats { state, bytes });
                h = (*h).next_made;
            }
        }
        break;
    }
    let live = |g: &AtomicIsize| g.load(Ordering::Relaxed).max(0) as usize;
    let segments = get(&stats::SEGMENTS);
    let counted = config::counted();
    let cached = get(&stats::CACHE_KEPT_SEGMENTS) + get(&stats::CACHE_KEPT_LARGE);
    let reserve = get(&stats::CACHE_RESERVE);
    let large_mapped = get(&stats::LARGE_BYTES);
    let mapped = segments * SEGMENT_SIZE + cached + reserve + large_mapped;
    Stats {
        mapped,
        // The reserve, mapped at start-up, is counted at the next new mapping.
        mapped_peak: get(&stats::MAPPED_PEAK).max(mapped),
        segments,
        segment_bytes: segments * SEGMENT_SIZE,
        cached,
        cached_segments: get(&stats::SEGMENTS_CACHED),
        cached_returned: get(&stats::CACHE_DISCARDED),
        reserve,
        large_mapped,
        large_blocks: get(&stats::LARGE_BLOCKS),
        large_live: live(&stats::LIVE_LARGE),
        small_live: counted.then(|| live(&stats::LIVE_SMALL)),
        live_peak: counted.then(|| get(&stats::LIVE_PEAK)),
        pages_claimed: get(&stats::PAGES_CLAIMED),
        heaps_created: get(&stats::HEAPS_CREATED),
        heaps_adopted: get(&stats::HEAPS_ADOPTED),
        purged: get(&stats::PURGED),
        system_calls: stats::system_calls(),
        heaps,
    }
}
