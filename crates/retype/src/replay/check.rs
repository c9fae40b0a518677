//! Running a program on a heap, watched. The validating run checks what
//! mdriver checks: every block is aligned, overlaps no other, and keeps its
//! bytes until realloc or free (the first and last 64 KiB of a larger block);
//! with `walk`, the heap's own check after every request. Timed runs are
//! watched by [`Quiet`], which checks nothing.

use std::collections::BTreeMap;
use std::ptr::NonNull;

use retype_core::heap::Heap;

use super::placement::Placement;
use retype_trace::Request;

use super::program::Program;

/// Watches a replay; the timed runs use [`Quiet`].
pub trait Observer {
    /// A block of `size` bytes aligned to `align` now lives at `ptr`; the first
    /// `kept` bytes came from the block's previous place.
    fn placed(
        &mut self,
        _h: &dyn Heap,
        _ptr: NonNull<u8>,
        _size: usize,
        _align: usize,
        _kept: usize,
    ) -> Result<(), String> {
        Ok(())
    }
    /// The block at `ptr` of `size` bytes is about to be freed or moved.
    fn leaving(&mut self, _ptr: NonNull<u8>, _size: usize) -> Result<(), String> {
        Ok(())
    }
    /// A request has completed.
    fn after(&mut self, _h: &dyn Heap) -> Result<(), String> {
        Ok(())
    }
    /// A realloc has completed; `moved`: the block changed address.
    fn reallocated(&mut self, _moved: bool) {}
}

pub struct Quiet;
impl Observer for Quiet {}

/// mdriver's validity checks, and with `walk` the heap's own check.
#[derive(Default)]
pub struct Validator {
    /// Live blocks by address: (end, fill byte).
    blocks: BTreeMap<usize, (usize, u8)>,
    /// The fill byte and size of the block a realloc is moving.
    moving: u8,
    moving_size: usize,
    walk: bool,
    placement: Placement,
}

impl Validator {
    /// A validator that walks the heap after every request when `walk`, and
    /// measures placement against the program's peak of live bytes.
    pub fn new(walk: bool, peak: u64) -> Validator {
        Validator {
            walk,
            placement: Placement {
                peak,
                ..Placement::default()
            },
            ..Validator::default()
        }
    }

    /// What the run found of placement.
    pub fn placement(self) -> Placement {
        self.placement
    }
}

/// Bytes of a block that validation fills and checks: all of a block up to
/// 128 KiB, the first and last 64 KiB of a larger one (so that a huge request
/// does not make the check touch gigabytes).
fn windows(size: usize) -> [std::ops::Range<usize>; 2] {
    const W: usize = 64 << 10;
    let head = size.min(W);
    [0..head, head.max(size.saturating_sub(W))..size]
}

impl Observer for Validator {
    fn placed(
        &mut self,
        h: &dyn Heap,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
        kept: usize,
    ) -> Result<(), String> {
        let a = ptr.as_ptr() as usize;
        if !a.is_multiple_of(align) {
            return Err(format!("block {a:#x} is not aligned to {align}"));
        }
        // SAFETY: `ptr` is live in `h`.
        if unsafe { h.usable_size(ptr) } < size {
            return Err(format!(
                "block {a:#x} has fewer than the {size} bytes requested"
            ));
        }
        let end = a + size.max(1);
        if let Some((&s, &(e, _))) = self.blocks.range(..end).next_back() {
            if e > a {
                return Err(format!(
                    "block [{a:#x}, {end:#x}) overlaps [{s:#x}, {e:#x})"
                ));
            }
        }
        let fill = self.moving.wrapping_add(0x5b) | 1;
        // SAFETY: the block has at least `size` usable bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
        for w in windows(self.moving_size) {
            let w = w.start.min(kept)..w.end.min(kept);
            if let Some(i) = bytes[w.clone()].iter().position(|&b| b != self.moving) {
                return Err(format!(
                    "realloc lost byte {} of the block now at {a:#x}",
                    w.start + i
                ));
            }
        }
        for w in windows(size) {
            bytes[w].fill(fill);
        }
        self.blocks.insert(a, (end, fill));
        self.placement.live += size as u64;
        Ok(())
    }

    fn leaving(&mut self, ptr: NonNull<u8>, size: usize) -> Result<(), String> {
        let a = ptr.as_ptr() as usize;
        let (_, fill) = self
            .blocks
            .remove(&a)
            .ok_or_else(|| format!("block {a:#x} is unknown"))?;
        // SAFETY: the block is still live with `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), size) };
        for w in windows(size) {
            if let Some(i) = bytes[w.clone()].iter().position(|&b| b != fill) {
                return Err(format!(
                    "byte {} of the block at {a:#x} changed while it was live",
                    w.start + i
                ));
            }
        }
        (self.moving, self.moving_size) = (fill, size);
        self.placement.live -= size as u64;
        Ok(())
    }

    fn reallocated(&mut self, moved: bool) {
        if moved {
            self.placement.reallocs_moved += 1;
        } else {
            self.placement.reallocs_in_place += 1;
        }
    }

    fn after(&mut self, h: &dyn Heap) -> Result<(), String> {
        self.placement.at_peak(h, &self.blocks);
        if self.walk {
            h.check().map_err(|e| format!("heap check failed: {e}"))?;
        }
        Ok(())
    }
}

/// Runs every request of `prog` on `h`; on failure, the request and why (sizes fit `usize`:
/// [`Program`] checked them).
pub fn run(
    h: &mut dyn Heap,
    prog: &Program,
    obs: &mut impl Observer,
) -> Result<(), (usize, String)> {
    let mut blocks: Vec<(Option<NonNull<u8>>, usize, usize)> = vec![(None, 0, 0); prog.slots];
    for (i, request) in prog.requests.requests.iter().enumerate() {
        let at = |msg: String| (i, msg);
        let slot = request.id() as usize;
        match *request {
            Request::Alloc { size, align, .. } => {
                let (size, align) = (size as usize, align as usize);
                let p = h.allocate(size, align).ok_or_else(|| {
                    at(format!(
                        "malloc({size}) failed with the heap at {} bytes",
                        h.heap_size()
                    ))
                })?;
                obs.placed(h, p, size, align, 0).map_err(at)?;
                blocks[slot] = (Some(p), size, align);
            }
            Request::Realloc { size, .. } => {
                let size = size as usize;
                let (Some(old), old_size, align) = blocks[slot] else {
                    unreachable!("the reader only emits realloc of live ids")
                };
                obs.leaving(old, old_size).map_err(at)?;
                // SAFETY: `old` is live in `h` with this alignment.
                let p = unsafe { h.reallocate(old, size, align) }.ok_or_else(|| {
                    at(format!(
                        "realloc to {size} failed with the heap at {} bytes",
                        h.heap_size()
                    ))
                })?;
                obs.placed(h, p, size, align, old_size.min(size))
                    .map_err(at)?;
                obs.reallocated(p != old);
                blocks[slot] = (Some(p), size, align);
            }
            Request::Free { .. } => {
                let (Some(p), size, _) = blocks[slot] else {
                    unreachable!("the reader only emits free of live ids")
                };
                obs.leaving(p, size).map_err(at)?;
                // SAFETY: `p` is live in `h`.
                unsafe { h.free(p) };
                blocks[slot].0 = None;
            }
        }
        obs.after(h).map_err(at)?;
    }
    Ok(())
}
