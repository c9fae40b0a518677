//! The replay in CHERI mode (`retype replay --cheri FORMAT`, seed 004's capability half):
//! each trace runs once more on each heap behind
//! [`retype_core::heap::cheri::CheriHeap`], every block a capability whose bounds
//! are exactly representable and cover exactly the block, and what that exactness cost is
//! set beside the plain run: padding, the heap's size, alignment fragmentation, and the
//! blocks that needed rounding, by size range.

use anyhow::{anyhow, Result};
use retype_core::cheri::{Capability, Format};
use retype_core::heap::cheri::{CheriHeap, Region, Rounding, SizeRange};
use retype_core::heap::{Arena, HeapKind};
use retype_trace::Request;
use serde::Serialize;

use super::program::Program;
use super::score::utilization;

/// Requests of one size range and what their exact bounds cost.
#[derive(Clone, Debug, Serialize)]
pub struct Band {
    /// The size range, as `16 KiB-64 KiB`.
    pub range: &'static str,
    pub requests: u64,
    /// Requests whose length had to grow to be representable.
    pub rounded: u64,
    /// Requests whose base needed more alignment than they asked for.
    pub realigned: u64,
    pub requested: u64,
    pub padding: u64,
}

/// A trace on a heap in CHERI mode, beside its plain run.
#[derive(Clone, Debug, Serialize)]
pub struct CheriRun {
    pub format: &'static str,
    /// The heap's high-water mark in CHERI mode (the plain run's is the row's `heap_size`).
    pub heap_size: usize,
    /// Utilization in CHERI mode: the same peak of live requested bytes over that size.
    pub util: f64,
    pub requests: u64,
    pub rounded: u64,
    pub realigned: u64,
    /// Bytes added to requests so that their bounds are exact.
    pub padding: u64,
    /// Heap bytes beyond the plain run's that padding does not explain: what aligning bases
    /// cost (negative where the changed layout saved more).
    pub alignment_fragmentation: i64,
    /// By size range, the ranges that had requests.
    pub by_size: Vec<Band>,
}

/// The arena a CHERI run needs: the plain replay's size, within the format's addresses
/// (RV32's 4 GiB space holds a region of at most 2 GiB at any alignment of its start).
pub fn arena_for(format: Format, plain: usize) -> Result<Arena> {
    let size = if format.params().addr_width < 64 {
        plain.min(2 << 30)
    } else {
        plain
    };
    Arena::new(size).ok_or_else(|| anyhow!("cannot reserve a {size}-byte arena"))
}

/// Runs `prog` on heap `kind` in CHERI mode `format` over `arena`; `plain_heap_size` is the
/// plain run's high-water mark. Each capability handed out is checked to cover its block
/// (a load or store of every requested byte would pass the hardware's check).
pub fn run(
    arena: &mut Arena,
    kind: HeapKind,
    prog: &Program,
    format: Format,
    plain_heap_size: usize,
) -> Result<CheriRun> {
    let fail = |i: usize, msg: String| {
        anyhow!(
            "{}:{}: {kind} in CHERI mode ({format}): {msg}",
            prog.path,
            prog.requests.lines[i]
        )
    };
    arena.reset();
    let region = Region::new(format, arena.base().as_ptr() as usize, arena.capacity())
        .map_err(|e| anyhow!("{format}: {e}"))?;
    let heap = kind
        .build(&mut *arena)
        .ok_or_else(|| anyhow!("heap {kind}: the arena is too small"))?;
    let mut h = CheriHeap::new(heap, region);
    // Each slot's capability and the alignment it was allocated with.
    let mut slots: Vec<Option<(Capability, usize)>> = vec![None; prog.slots];
    for (i, request) in prog.requests.requests.iter().enumerate() {
        let slot = request.id() as usize;
        // Sizes fit `usize`: `Program` checked them.
        let cap = match *request {
            Request::Alloc { size, align, .. } => {
                let (size, align) = (size as usize, align as usize);
                let cap = h
                    .allocate(size, align)
                    .map_err(|e| fail(i, e.to_string()))?;
                h.access(&cap, size).map_err(|e| fail(i, e.to_string()))?;
                Some((cap, align))
            }
            Request::Realloc { size, .. } => {
                let (old, align) = slots[slot].expect("the reader only emits realloc of live ids");
                let size = size as usize;
                let cap = h
                    .reallocate(&old, size, align)
                    .map_err(|e| fail(i, e.to_string()))?;
                h.access(&cap, size).map_err(|e| fail(i, e.to_string()))?;
                Some((cap, align))
            }
            Request::Free { .. } => {
                let (cap, _) = slots[slot].expect("the reader only emits free of live ids");
                h.free(&cap).map_err(|e| fail(i, e.to_string()))?;
                None
            }
        };
        slots[slot] = cap;
    }
    let heap_size = h.heap().heap_size();
    let padding = h.padding();
    let total = padding.total();
    let band = |(range, r): (SizeRange, &Rounding)| Band {
        range: range.label(),
        requests: r.requests,
        rounded: r.rounded,
        realigned: r.realigned,
        requested: r.requested,
        padding: r.padding,
    };
    Ok(CheriRun {
        format: format.name(),
        heap_size,
        util: utilization(prog.peak_live, heap_size).0,
        requests: total.requests,
        rounded: total.rounded,
        realigned: total.realigned,
        padding: total.padding,
        alignment_fragmentation: h.alignment_fragmentation(plain_heap_size),
        by_size: SizeRange::all()
            .zip(&padding.by_range)
            .filter(|(_, r)| r.requests > 0)
            .map(band)
            .collect(),
    })
}
