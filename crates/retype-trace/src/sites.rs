//! What `retype trace sites`, `leaks` and `diff` count per call stack, in
//! the whole trace or a [`Window`] of it: the allocations made from it, its
//! share of the live bytes at the trace's peak (the moment
//! [`Summary`](crate::summary::Summary) reports), the blocks it left live at
//! exit, and its temporary allocations.
//!
//! Blocks follow the [`heap`](crate::heap) model, which is the summary's: so
//! the stacks' peak bytes add up to the summary's peak and their leaked bytes
//! to its live bytes at the end.

use crate::event::Event;
use crate::heap::{Block, Heap};
use crate::kind::Kind;
use crate::trace::Trace;
use crate::window::Window;

/// The figures of one call stack (or of a group of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteStats {
    /// Allocating calls that returned a block (malloc, calloc, the aligned
    /// ones, and realloc to a new size).
    pub calls: u64,
    /// The bytes those calls asked for.
    pub bytes: u64,
    /// Allocating calls that returned NULL.
    pub failed: u64,
    /// Blocks and bytes from it live at the trace's peak.
    pub peak_blocks: u64,
    pub peak_bytes: u64,
    /// Blocks and bytes from it still live when the program exited (the end
    /// of the last segment): never freed.
    pub leaked_blocks: u64,
    pub leaked_bytes: u64,
    /// Of its allocations, those freed before their thread allocated
    /// anything else (heaptrack's temporaries).
    pub temporary: u64,
}

impl SiteStats {
    /// Adds `o`'s figures to these.
    pub fn add(&mut self, o: &SiteStats) {
        for (a, b) in self.fields_mut().into_iter().zip(o.fields()) {
            *a = a.saturating_add(b);
        }
    }

    fn fields(&self) -> [u64; 8] {
        [
            self.calls,
            self.bytes,
            self.failed,
            self.peak_blocks,
            self.peak_bytes,
            self.leaked_blocks,
            self.leaked_bytes,
            self.temporary,
        ]
    }

    fn fields_mut(&mut self) -> [&mut u64; 8] {
        [
            &mut self.calls,
            &mut self.bytes,
            &mut self.failed,
            &mut self.peak_blocks,
            &mut self.peak_bytes,
            &mut self.leaked_blocks,
            &mut self.leaked_bytes,
            &mut self.temporary,
        ]
    }
}

/// The figures of every stack in `window`: element 0 counts the calls
/// without a stack, element `k` those of `trace.stacks[k - 1]`.
///
/// In a window, a stack's calls, bytes, failures and temporaries are those
/// of its calls that started in the window; its peak is its share of the
/// live bytes (blocks allocated before the window included) at the window's
/// highest moment; its leaks are the blocks allocated in the window and
/// still live at its end (at the program's exit when the window reaches it).
///
/// A sampled recording's figures are estimates ([`Kind::weigh`]). An
/// aggregate recording's are its counters, whole: they have no window (the
/// caller refuses one).
pub fn per_stack(trace: &Trace, window: Window) -> Vec<SiteStats> {
    let kind = Kind::of(trace);
    if kind == Kind::Aggregate {
        return counted(trace);
    }
    let segments = trace.serialized_segments();
    let peak = peak_in(&segments, window, kind);
    let mut stats = vec![SiteStats::default(); trace.stacks.len() + 1];
    let mut heap = Heap::new(kind);
    let born_in = |b: &Block| window.contains(b.born_ns);
    let leak = |stats: &mut [SiteStats], b: &Block| {
        let s = &mut stats[b.stack as usize];
        s.leaked_blocks += b.calls;
        s.leaked_bytes = s.leaked_bytes.saturating_add(b.size);
    };
    let mut i = 0u64;
    for (n, segment) in segments.iter().enumerate() {
        heap.clear();
        for e in segment {
            let c = heap.apply(e);
            for (b, temporary) in c.freed.into_iter().flatten() {
                if born_in(&b) {
                    stats[b.stack as usize].temporary += u64::from(temporary) * b.calls;
                    if e.time_ns >= window.to_ns {
                        leak(&mut stats, &b);
                    }
                }
            }
            if window.contains(e.time_ns) {
                let s = &mut stats[e.stack as usize];
                if c.failed {
                    s.failed += heap.weigh(e.size).calls;
                }
                if let Some(b) = c.allocated {
                    s.calls += b.calls;
                    s.bytes = s.bytes.saturating_add(b.size);
                }
            }
            if Some(i) == peak {
                for b in heap.blocks() {
                    let s = &mut stats[b.stack as usize];
                    s.peak_blocks += b.calls;
                    s.peak_bytes = s.peak_bytes.saturating_add(b.size);
                }
            }
            i += 1;
        }
        // Blocks an exec drops were live at the window's end if it came after
        // it; those left at the program's exit, always.
        let last = n + 1 == segments.len();
        let ended_inside = segment.iter().any(|e| e.time_ns >= window.to_ns);
        if last || ended_inside {
            for b in heap.blocks().filter(|b| born_in(b)) {
                leak(&mut stats, b);
            }
        }
    }
    stats
}

/// The index (in time order, all segments) of the event in `window` after
/// which the most bytes were live, the first if several; none if no bytes
/// were ever live in it.
fn peak_in(segments: &[Vec<Event>], window: Window, kind: Kind) -> Option<u64> {
    let mut heap = Heap::new(kind);
    let (mut best, mut at) = (0, None);
    let mut i = 0u64;
    for segment in segments {
        heap.clear();
        for e in segment {
            heap.apply(e);
            if window.contains(e.time_ns) && heap.bytes() > best {
                (best, at) = (heap.bytes(), Some(i));
            }
            i += 1;
        }
    }
    at
}

/// An aggregate recording's figures per stack: calls, bytes, failures and
/// temporaries of every segment; peaks of the segment whose live bytes
/// peaked highest (the first such), as the process's peak is one moment;
/// leaks of the last segment, as blocks an exec drops are no leaks.
fn counted(trace: &Trace) -> Vec<SiteStats> {
    let mut stats = vec![SiteStats::default(); trace.stacks.len() + 1];
    let Some(last) = trace.counters.iter().map(|c| c.segment).max() else {
        return stats;
    };
    let mut peaks = vec![0u64; last as usize + 1];
    for c in &trace.counters {
        let p = &mut peaks[c.segment as usize];
        *p = p.saturating_add(c.counters.peak_bytes);
    }
    let highest = peaks.iter().max().copied().unwrap_or(0);
    let peak_segment = peaks.iter().position(|&p| p == highest).unwrap_or(0) as u32;
    for c in &trace.counters {
        let Some(s) = stats.get_mut(c.stack as usize) else {
            continue;
        };
        let k = &c.counters;
        s.calls += k.calls;
        s.bytes = s.bytes.saturating_add(k.bytes);
        s.failed += k.failed;
        s.temporary += k.temporary;
        if c.segment == peak_segment {
            s.peak_blocks += k.peak_blocks;
            s.peak_bytes = s.peak_bytes.saturating_add(k.peak_bytes);
        }
        if c.segment == last {
            s.leaked_blocks += k.leaked_blocks;
            s.leaked_bytes = s.leaked_bytes.saturating_add(k.leaked_bytes);
        }
    }
    stats
}
