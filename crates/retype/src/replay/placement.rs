//! Placement as seed 003's TLM measures it: the holes between live blocks when
//! the live bytes peak, and how many reallocs moved.

use std::collections::BTreeMap;
use std::ptr::NonNull;

use retype_core::heap::Heap;
use retype_trace::summary::Log2Histogram;

/// Placement as seed 003's TLM measures it.
#[derive(Clone, Default)]
pub struct Placement {
    /// Live requested bytes now, and at the trace's peak.
    pub live: u64,
    pub peak: u64,
    /// Holes between consecutive live blocks when `live` first reached `peak`.
    pub holes: Option<Log2Histogram>,
    pub hole_bytes: u64,
    pub largest_hole: u64,
    pub reallocs_moved: u64,
    pub reallocs_in_place: u64,
    /// Live blocks at the peak as `[start, end)` offsets from the lowest, with
    /// blocks closer than [`MIN_HOLE`] merged (for the report's heap map).
    pub map: Vec<(u64, u64)>,
}

/// Gaps between live blocks smaller than this are the heap's bookkeeping (the
/// next block's header, alignment padding), not room another block could use.
const MIN_HOLE: u64 = 32;

impl Placement {
    /// Measures the holes between the live `blocks` of `heap` at the peak: a
    /// hole is a gap of at least [`MIN_HOLE`] bytes from the end of one block's
    /// usable bytes to the start of the next block.
    pub fn at_peak(&mut self, heap: &dyn Heap, blocks: &BTreeMap<usize, (usize, u8)>) {
        if self.holes.is_some() || self.live != self.peak {
            return;
        }
        let mut h = Log2Histogram::default();
        // SAFETY: every address in `blocks` is a live block of `heap`.
        let usable_end =
            |a: usize| a + unsafe { heap.usable_size(NonNull::new_unchecked(a as *mut u8)) };
        let base = blocks.keys().next().copied().unwrap_or(0);
        for &a in blocks.keys() {
            let (start, end) = ((a - base) as u64, (usable_end(a) - base) as u64);
            match self.map.last_mut() {
                Some(last) if start < last.1 + MIN_HOLE => last.1 = last.1.max(end),
                _ => self.map.push((start, end)),
            }
        }
        let ends = blocks.keys().map(|&a| usable_end(a));
        for (end, &start) in ends.zip(blocks.keys().skip(1)) {
            let gap = start.saturating_sub(end) as u64;
            if gap >= MIN_HOLE {
                h.add(gap);
                self.hole_bytes += gap;
                self.largest_hole = self.largest_hole.max(gap);
            }
        }
        self.holes = Some(h);
    }
}
