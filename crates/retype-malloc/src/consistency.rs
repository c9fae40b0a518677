//! The full consistency check of a thread's heap, for tests (see [`check_consistency`]): its
//! queues (with `heap::check_class` and `heap::check_full`, which debug builds also run as
//! the heap changes), its segments, its kept pages, its spills and its counts of bytes, held
//! against each other.

use core::ptr;

use crate::heap::{self, id, Heap};
use crate::page::{self, Page};
use crate::segment::{self, Segment};
use crate::size_class::CLASSES;
use crate::spill;

/// Checks the calling thread's heap and panics, naming the first inconsistency, if its page
/// queues, full list, segment list, segments or free lists disagree (see `check`). Only
/// reads the heap; its cost grows with the heap, so it is for tests. Unlike the checks that
/// debug builds run as the heap changes, it checks in release builds too.
pub fn check_consistency() {
    // SAFETY: the calling thread's heap (or the read-only empty heap) is its own to read.
    if let Err(what) = unsafe { check(heap::current()) } {
        panic!("retype-malloc: inconsistent heap: {what}");
    }
}

/// Segments seen by [`check`], without allocating; past `SEEN_MAX` the rest go uncounted.
struct Seen {
    segments: [*mut Segment; SEEN_MAX],
    len: usize,
    overflow: bool,
}

const SEEN_MAX: usize = 128;

impl Seen {
    fn add(&mut self, seg: *mut Segment) {
        if self.segments[..self.len].contains(&seg) {
            return;
        }
        if self.len == SEEN_MAX {
            self.overflow = true;
            return;
        }
        self.segments[self.len] = seg;
        self.len += 1;
    }
}

/// Checks all of `heap`: every class queue and the full list with the pages' free lists
/// (`heap::check_class`, `heap::check_full`), the list of segments with free slices, every
/// segment holding its pages (`segment::check`), and that the pages in use in those segments
/// are exactly the pages in its queues (so no page is lost or queued twice). The `notified`
/// stack and the pages' `thread_free` lists are not walked: other threads push onto them
/// meanwhile.
pub(crate) unsafe fn check(heap: *mut Heap) -> Result<(), &'static str> {
    let mut seen = Seen {
        segments: [ptr::null_mut(); SEEN_MAX],
        len: 0,
        overflow: false,
    };
    let mut queued = 0;
    let mut marked = 0;
    // SAFETY: the calling thread owns `heap` and everything reachable from its lists.
    unsafe {
        let mut page_bytes = 0;
        let mut each = |p: *mut Page| {
            seen.add(segment::of(p.cast()));
            marked += usize::from((*p).kept);
            page_bytes += page::span_bytes(p);
        };
        for class in 0..CLASSES {
            queued += heap::check_class(heap, class, true, &mut each)?;
        }
        queued += heap::check_full(heap, true, &mut each)?;
        (*heap).segments.check(|s| {
            if !(*s).listed {
                return Err("heap: a segment in its list is not marked listed");
            }
            seen.add(s);
            Ok(())
        })?;
        let mut in_use = 0;
        for &s in &seen.segments[..seen.len] {
            in_use += segment::check(s, id(heap))?;
            if (*s).listed && !(*heap).segments.contains(s) {
                return Err("heap: a segment marked listed is not in its list");
            }
        }
        if !seen.overflow && in_use != queued {
            return Err("heap: the pages in use in its segments are not the pages in its queues");
        }
        if page_bytes != heap::held(heap) {
            return Err("heap: the bytes of its pages are not as counted");
        }
        (*heap).kept.check(id(heap), marked)?;
        check_spills(heap)
    }
}

/// Checks every spill: blocks of the heap's pages of its class of few enough blocks to spill
/// (full when the blocks came; frees by other threads may have made them not full since, see
/// `spill`), as many as counted, and none unless the heap knows it spills.
/// (That the fast path pops from a spill holding blocks is `heap::check_class`'s.)
unsafe fn check_spills(heap: *mut Heap) -> Result<(), &'static str> {
    // SAFETY: the calling thread owns `heap`, its spills and the pages their blocks are in.
    unsafe {
        for (i, sp) in (*heap).spills.iter().enumerate() {
            let class = spill::FIRST_CLASS + i;
            let mut b = sp.first();
            let mut n = 0;
            while !b.is_null() {
                let page = segment::page_of(segment::of(b.cast()), b.cast());
                if (*page).heap != id(heap) || (*page).class as usize != class || !spill::fits(page)
                {
                    return Err("heap: a spilled block not of a page of its class that spills");
                }
                n += 1;
                if n > sp.len() {
                    return Err("heap: a spill longer than counted (a cycle?)");
                }
                b = (*b).next;
            }
            if n != sp.len() {
                return Err("heap: a spill shorter than counted");
            }
            if n > 0 && !(*heap).spilling {
                return Err("heap: a spill holds blocks, and the heap does not look at it");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::Block;

    /// The heap check can fail: each corruption of a live heap is reported, then undone (this
    /// test's heap is its thread's own; nothing allocates from it while it is corrupt).
    #[test]
    fn corrupt_heaps_are_reported() {
        // SAFETY: the blocks are this thread's; every field changed below is restored before
        // the next malloc or free.
        unsafe {
            let blocks: [*mut u8; 3] = core::array::from_fn(|_| crate::malloc(48));
            let heap = heap::current();
            assert_eq!(check(heap), Ok(()));
            let seg = segment::of(blocks[0]);
            let page = segment::page_of(seg, blocks[0]);
            let class = (*page).class as usize;

            (*page).used += 1;
            assert!(check(heap).unwrap_err().contains("used"));
            (*page).used -= 1;

            let head = (*page).free;
            (*page).free = blocks[0].cast(); // a block in use on the free list: one too many
            (*blocks[0].cast::<Block>()).next = head;
            assert!(check(heap).unwrap_err().contains("capacity"));
            (*page).free = head;

            let index = segment::locate(page).1;
            (*seg).slice_page[index + (*page).span as usize - 1] ^= 1;
            assert!(check(heap).unwrap_err().contains("segment"));
            (*seg).slice_page[index + (*page).span as usize - 1] ^= 1;

            (*heap).full_count += 1;
            assert!(check(heap).unwrap_err().contains("full_count"));
            (*heap).full_count -= 1;

            heap::add_held(heap, 1);
            assert!(check(heap).unwrap_err().contains("bytes of its pages"));
            heap::add_held(heap, -1);

            let direct = (*heap).direct[class];
            (*heap).direct[class] = ptr::NonNull::dangling().as_ptr(); // neither first nor EMPTY
            assert!(check(heap).unwrap_err().contains("direct"));
            (*heap).direct[class] = direct;

            let prev = (*page).links.prev;
            (*page).links.prev = page; // a back link to itself
            assert!(check(heap).unwrap_err().contains("back link"));
            (*page).links.prev = prev;

            assert_eq!(check(heap), Ok(()));
            blocks.iter().for_each(|&b| crate::free(b));
            crate::check_consistency();
        }
    }
}
