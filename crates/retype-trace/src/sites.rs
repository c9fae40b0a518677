//! What `retype trace sites`, `leaks` and `diff` count per call stack: the
//! allocations made from it, its share of the live bytes at the trace's peak
//! (the moment [`Summary`] reports), and the blocks it left live at exit.
//!
//! Blocks follow the same rules as [`Summary`]: each segment (program image)
//! starts with an empty heap, a realloc moves its block to the realloc's
//! stack (the old block is freed, a new one allocated there, as heaptrack
//! counts it), and a block handed out at an address still live replaces the
//! old one (a free the trace missed). So the stacks' peak bytes add up to
//! the summary's peak and their leaked bytes to its live bytes at the end.

use std::collections::HashMap;

use crate::event::Op;
use crate::summary::Summary;
use crate::trace::Trace;

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
}

impl SiteStats {
    /// Adds `o`'s figures to these.
    pub fn add(&mut self, o: &SiteStats) {
        for (a, b) in self.fields_mut().into_iter().zip(o.fields()) {
            *a = a.saturating_add(b);
        }
    }

    fn fields(&self) -> [u64; 7] {
        [
            self.calls,
            self.bytes,
            self.failed,
            self.peak_blocks,
            self.peak_bytes,
            self.leaked_blocks,
            self.leaked_bytes,
        ]
    }

    fn fields_mut(&mut self) -> [&mut u64; 7] {
        [
            &mut self.calls,
            &mut self.bytes,
            &mut self.failed,
            &mut self.peak_blocks,
            &mut self.peak_bytes,
            &mut self.leaked_blocks,
            &mut self.leaked_bytes,
        ]
    }
}

/// A live block: its size and the stack that allocated it.
#[derive(Clone, Copy)]
struct Block {
    size: u64,
    stack: u32,
}

/// The figures of every stack: element 0 counts the calls without a stack,
/// element `k` those of `trace.stacks[k - 1]`.
pub fn per_stack(trace: &Trace) -> Vec<SiteStats> {
    let summary = Summary::of(trace);
    let mut stats = vec![SiteStats::default(); trace.stacks.len() + 1];
    let mut live: HashMap<u64, Block> = HashMap::new();
    let mut i = 0u64;
    for segment in trace.serialized_segments() {
        live.clear();
        for e in &segment {
            let at = e.stack as usize;
            match e.op {
                Op::Free => {
                    live.remove(&e.ptr);
                }
                Op::Realloc if e.ptr != 0 && e.size == 0 && e.ret == 0 => {
                    live.remove(&e.ptr);
                }
                _ if e.ret == 0 => stats[at].failed += 1,
                _ => {
                    if e.op == Op::Realloc {
                        live.remove(&e.ptr);
                    }
                    live.insert(
                        e.ret,
                        Block {
                            size: e.size,
                            stack: e.stack,
                        },
                    );
                    stats[at].calls += 1;
                    stats[at].bytes = stats[at].bytes.saturating_add(e.size);
                }
            }
            if i == summary.peak_event && summary.peak_live_bytes > 0 {
                for b in live.values() {
                    let s = &mut stats[b.stack as usize];
                    s.peak_blocks += 1;
                    s.peak_bytes = s.peak_bytes.saturating_add(b.size);
                }
            }
            i += 1;
        }
    }
    for b in live.values() {
        let s = &mut stats[b.stack as usize];
        s.leaked_blocks += 1;
        s.leaked_bytes = s.leaked_bytes.saturating_add(b.size);
    }
    stats
}
