//! Segments: 2 MiB-aligned, 2 MiB mappings, each backed by one transparent huge page, cut
//! into 32 slices of 64 KiB. A page spans 1, 2, 4 or 8 aligned slices, enough for four
//! blocks of its class. The header at the start of the segment holds the page descriptors,
//! so the page of any block is found from its address alone: mask to the segment, shift to
//! the slice, look up the slice's page.
//!
//! Each segment belongs to one thread heap, which takes new pages from the fullest of its
//! segments first, so small objects are packed into as few huge pages as possible.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::consts::{
    EARLY_SLOTS, HEADER_SIZE, OS_PAGE, SEGMENT_MASK, SEGMENT_SIZE, SLICES, SLICE_SHIFT, SLICE_SIZE,
};
use crate::list::{Linked, Links, Queue};
use crate::page::{self, HeapId, Page};
use crate::resident::Slices;
use crate::{cache, config, os, registry, stats};

/// Words of the hardened-mode allocation bitmap per slice: one bit per 16-byte block (kept
/// for blocks without canaries; a canary's tag says whether its block is live).
const BITMAP_WORDS: usize = SLICE_SIZE / 16 / 64;

pub(crate) const KIND_SMALL: u8 = 1;
pub(crate) const KIND_LARGE: u8 = 2;

#[repr(C)]
pub(crate) struct Segment {
    pub kind: u8,
    /// For large blocks in hardened mode: 1 while the block is live.
    pub large_live: AtomicU8,
    /// Slice → where the descriptor of the page covering it lies, in bytes from the
    /// segment's start ([`page_offset`]): free finds a page with one load and one add.
    pub slice_page: [u16; SLICES],
    /// Bitmap of claimed slices.
    pub used: u32,
    /// The segment is linked in its heap's list of segments with free slices.
    pub listed: bool,
    pub heap: *mut HeapId,
    pub links: Links<Segment>,
    /// Length of the whole mapping.
    pub map_len: usize,
    /// For large blocks: the pointer handed out.
    pub large_ptr: *mut u8,
    /// For large blocks: the size asked for (canaries fill the rest of its pages).
    pub large_size: usize,
    /// For large blocks: the end of the usable memory (a guard page follows when guarded).
    pub large_end: *mut u8,
    /// For large blocks: guard pages surround the block's pages.
    pub large_guarded: bool,
    /// For large blocks: its pages are looked at when it is freed (see `large::DENSE`); they
    /// read as zeros when it was handed out, so those resident then are the ones the program
    /// touched.
    pub large_looked: bool,
    /// For large blocks: the offset in the mapping from which it is advised for huge pages
    /// (the range before it advised against them); 0 when not known (see `cache::Mapping`).
    pub huge_from: usize,
    /// For small segments: advised for huge pages (once: advice is a system call, and the
    /// advice stays with the mapping while it is cached and reused).
    pub huge: bool,
    /// For small segments: the slices claimed since the mapping was made, whose pages were
    /// touched (the cache hands out the most touched segment first).
    pub touched: u32,
    /// For small segments: which pages of each slice may be resident (see `resident`).
    pub resident: Slices,
    pub pages: [Page; SLICES],
    /// Hardened mode: which blocks are allocated, per page (indexed by its first slice).
    pub alloc_bits: [[AtomicU64; BITMAP_WORDS]; SLICES],
}

// SAFETY: `links` returns the segment's own `links` field, written only by `list::Queue`.
unsafe impl Linked for Segment {
    fn links(this: *mut Self) -> *mut Links<Self> {
        this.wrapping_byte_add(core::mem::offset_of!(Segment, links))
            .cast()
    }
}

// The header is the descriptor rounded up to OS pages (`HEADER_SIZE` is in `consts`, below
// the modules that need it but cannot see `Segment`).
const _: () = assert!(
    HEADER_SIZE == (core::mem::size_of::<Segment>() + OS_PAGE - 1) & !(OS_PAGE - 1),
    "HEADER_SIZE must be size_of::<Segment>() rounded up to OS pages"
);
// A retired mapping's cache node, at the end of its header area, leaves the descriptor whole.
const _: () = assert!(core::mem::size_of::<Segment>() <= cache::NODE_OFFSET);

const ALL_SLICES: u32 = u32::MAX;

/// Whether the heap has grown past the huge-page threshold, dense.
///
/// Huge pages are for big heaps whose pages are used: until the process has
/// `config::HUGE_MIN_SEGMENTS` segments in use (48 MiB by default; more with many threads,
/// see [`SEGMENTS_PER_HEAP`]), segments get no
/// `MADV_HUGEPAGE`, so a small program's resident set holds only the 4 KiB pages it touched.
/// When the heap grows past it and most pages of the early segments are resident, huge pages
/// are switched on for good (a new segment still waits for [`SEGMENTS_PER_HEAP`]), and the
/// early segments are advised and collapsed into huge pages too (see [`huge_pages_for`]); at
/// most [`EARLY_SLOTS`] early segments are remembered. A heap whose blocks are touched here and there (a program that writes the
/// first bytes of 32 KiB blocks) would hold a 2 MiB page for every 4 KiB it uses: it is
/// looked at again each time it has grown by the threshold once more, by the segments made
/// since the last look.
static BIG_HEAP: AtomicBool = AtomicBool::new(false);
/// Segments in use at which the heap is next looked at (0: at the threshold).
static NEXT_LOOK: AtomicUsize = AtomicUsize::new(0);
/// Segments created before the heap was big, to be collapsed into huge pages when it becomes
/// big. An entry may be stale (the segment given back since): advice on a range that is no
/// longer ours, or unmapped, is harmless, because it never changes memory contents.
static EARLY: [AtomicUsize; EARLY_SLOTS] = [const { AtomicUsize::new(0) }; EARLY_SLOTS];

/// Segments in use per thread heap (as many heaps as threads ran at once) below which huge
/// pages do not start, whatever the threshold: each heap fills its newest segment by degrees,
/// and a huge page makes all of it resident, up to 2 MiB a heap that its blocks do not use.
/// Past this many, that is at most an eighth of the heap. Without it, `alloc_test 16 5`'s
/// peak RSS was 76 MB against 54 MB with 4 KiB pages (jemalloc 47 MB). Once huge pages are
/// on, a new segment still gets them only past this many a heap: a main thread that fills
/// its heap before it starts its threads switched them on for the threads' segments too
/// (`larson 16 10 5000 1000000`: 165-178 MiB peak RSS, of which 110 MiB in huge pages,
/// against 118-127 MiB without huge pages; jemalloc 96-104).
const SEGMENTS_PER_HEAP: usize = 8;

/// Whether a new mapping should use huge pages, switching them on (and collapsing the early
/// segments) when the process reaches the threshold.
pub(crate) fn big_heap() -> bool {
    if !config::HUGE_PAGES.load(Ordering::Relaxed) {
        return false;
    }
    let segments = stats::SEGMENTS.load(Ordering::Relaxed) + 1;
    let (min, per_heap) = match config::HUGE_MIN_SEGMENTS.load(Ordering::Relaxed) {
        0 => (0, 0),
        min => {
            let per_heap = SEGMENTS_PER_HEAP * stats::HEAPS_CREATED.load(Ordering::Relaxed);
            (min.max(per_heap), per_heap)
        }
    };
    if BIG_HEAP.load(Ordering::Relaxed) {
        return segments >= per_heap;
    }
    let next = NEXT_LOOK.load(Ordering::Relaxed);
    // One thread looks: the one that moves the next look on.
    if segments < next.max(min)
        || NEXT_LOOK
            .compare_exchange(
                next,
                segments + min.max(1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return BIG_HEAP.load(Ordering::Relaxed);
    }
    if !early_dense() {
        // The next look is at the segments made from now on.
        for slot in &EARLY {
            slot.store(0, Ordering::Relaxed);
        }
        return false;
    }
    if BIG_HEAP.swap(true, Ordering::AcqRel) {
        return true;
    }
    for slot in &EARLY {
        let seg = slot.swap(0, Ordering::AcqRel);
        if seg != 0 {
            // SAFETY: advice only (see EARLY).
            unsafe {
                os::advise_huge(seg as *mut u8, SEGMENT_SIZE);
                os::collapse_huge(seg as *mut u8, SEGMENT_SIZE);
            }
        }
    }
    true
}

/// Whether more than half of the pages of the early segments are resident (true if none is
/// remembered: huge pages from the start). One `mincore` per segment.
fn early_dense() -> bool {
    let (mut touched, mut pages) = (0, 0);
    for slot in &EARLY {
        let seg = slot.load(Ordering::Acquire);
        if seg != 0 {
            // SAFETY: reads residency only; a stale entry's range fails and counts for nothing.
            let (t, p) = unsafe { os::resident(seg as *mut u8, SEGMENT_SIZE) };
            touched += t;
            pages += p;
        }
    }
    pages == 0 || 2 * touched > pages
}

/// Gives a segment not yet advised huge pages if the heap is big (never the reserve's,
/// advised at start-up), and says so; otherwise remembers a fresh one for later, in a free
/// slot (a full table is read, not written: no locked instruction). A segment `reused` from
/// the cache was remembered when it was made: remembering it again at every reuse filled the
/// table with copies, and each reuse then took 64 failed compare-and-swaps (over 1 us).
fn huge_pages_for(base: *mut u8, reused: bool) -> bool {
    if reused && cache::reserved(base) {
        return false;
    }
    if big_heap() {
        return advise_huge(base);
    }
    if reused {
        return false;
    }
    for slot in &EARLY {
        if slot.load(Ordering::Relaxed) == 0
            && slot
                .compare_exchange(0, base as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            break;
        }
    }
    false
}

/// Advises the segment at `base` for huge pages; true.
fn advise_huge(base: *mut u8) -> bool {
    // SAFETY: advice on our own segment.
    unsafe { os::advise_huge(base, SEGMENT_SIZE) };
    true
}

/// The segment holding `p`.
#[inline]
pub(crate) fn of(p: *const u8) -> *mut Segment {
    (p as usize & !SEGMENT_MASK) as *mut Segment
}

/// The page descriptor covering `p` inside segment `seg`: the descriptor of `p`'s slice, or
/// for a large block at a segment boundary (further from its header than a segment) the
/// first descriptor, the one large blocks use.
#[inline]
pub(crate) unsafe fn page_of(seg: *mut Segment, p: *const u8) -> *mut Page {
    // The offset in `p`'s own segment, not `p - seg`: that would index past the descriptors
    // for a block at a segment boundary.
    let slice = (p as usize & SEGMENT_MASK) >> SLICE_SHIFT;
    // SAFETY: the offset is below SEGMENT_SIZE, so `slice` < SLICES.
    unsafe {
        let offset = *(*seg).slice_page.get_unchecked(slice) as usize;
        seg.cast::<u8>().add(offset).cast()
    }
}

/// The offset of page descriptor `index` from its segment's start, as [`Segment::slice_page`]
/// holds it.
pub(crate) const fn page_offset(index: usize) -> u16 {
    (core::mem::offset_of!(Segment, pages) + index * core::mem::size_of::<Page>()) as u16
}

const _: () = assert!(
    core::mem::offset_of!(Segment, pages) + SLICES * core::mem::size_of::<Page>()
        <= u16::MAX as usize,
    "page descriptors must lie within a u16 offset of their segment's start"
);

/// The segment and index of a page descriptor.
pub(crate) fn locate(page: *mut Page) -> (*mut Segment, usize) {
    let seg = of(page.cast());
    let first = seg as usize + core::mem::offset_of!(Segment, pages);
    (seg, (page as usize - first) / core::mem::size_of::<Page>())
}

/// The allocation bitmap of the page starting at slice `index`.
pub(crate) unsafe fn bitmap(seg: *mut Segment, index: usize) -> *const [AtomicU64; BITMAP_WORDS] {
    // SAFETY: `index` < SLICES.
    unsafe { ptr::addr_of!((*seg).alloc_bits[index]) }
}

/// A free run of `span` slices (aligned to `span`) in the bitmap `used`.
fn find_free(used: u32, span: usize) -> Option<usize> {
    if span == 1 {
        let free = !used;
        return (free != 0).then(|| free.trailing_zeros() as usize);
    }
    let mask = (1u32 << span) - 1;
    (0..SLICES).step_by(span).find(|&i| (used >> i) & mask == 0)
}

/// A segment for `heap`: a cached one with touched pages if `warm`, else a cached one or a
/// new mapping; null if none (`warm`) or out of memory.
unsafe fn create(heap: *mut HeapId, warm: bool) -> *mut Segment {
    // SAFETY: cached and fresh mappings are ours alone; the header is (re)initialised here.
    unsafe {
        let max = SEGMENT_SIZE + SEGMENT_SIZE / 4;
        let cached = if warm {
            cache::take_warm(SEGMENT_SIZE, max)
        } else {
            cache::take(SEGMENT_SIZE, max, false, false)
        };
        let reused = cached.is_some();
        let (base, len, advised, touched) = match cached {
            Some(m) => (m.base, m.len, m.huge, m.touched),
            None if warm => return ptr::null_mut(),
            None => {
                let p = os::map_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
                if p.is_null() {
                    return p.cast();
                }
                registry::mark(p, SEGMENT_SIZE);
                (p, SEGMENT_SIZE, false, 0)
            }
        };
        let huge = advised || huge_pages_for(base, reused);
        let seg = base.cast::<Segment>();
        (*seg).kind = KIND_SMALL;
        // Every slice names a descriptor, claimed or not (a fresh mapping's zeros would not).
        (*seg).slice_page = [page_offset(0); SLICES];
        (*seg).used = 0;
        (*seg).listed = false;
        (*seg).heap = heap;
        (*seg).map_len = len;
        (*seg).huge = huge;
        (*seg).touched = touched;
        let counted = if returns_pages(seg) { touched } else { 0 };
        ptr::addr_of_mut!((*seg).resident).write(Slices::new(counted));
        (*seg).links = Links::NONE;
        stats::raise(&stats::SEGMENTS, &stats::SEGMENTS_PEAK, 1);
        seg
    }
}

/// Links `seg` in `list`, the segments of its heap with free slices.
unsafe fn link(list: &mut Queue<Segment>, seg: *mut Segment) {
    // SAFETY: the caller owns the list and the segment, which is in no list.
    unsafe {
        list.push_front(seg);
        (*seg).listed = true;
    }
}

unsafe fn unlink(list: &mut Queue<Segment>, seg: *mut Segment) {
    // SAFETY: `seg` is linked in the caller's `list`.
    unsafe {
        list.remove(seg);
        (*seg).listed = false;
    }
}

/// Claims a fresh page of `class` (spanning `span` slices) for `heap`, from the fullest of
/// its segments with room (`segments`, the heap's list), or from a new segment. Null when out
/// of memory.
pub(crate) unsafe fn claim_page(
    segments: &mut Queue<Segment>,
    heap: *mut HeapId,
    class: usize,
    span: usize,
) -> *mut Page {
    // SAFETY: the heap's segments are owned by the calling thread.
    unsafe {
        // Slices whose pages were touched first, so a heap emptied and filled again faults
        // in no new page while touched ones wait (in its segments, else in the cache);
        // among segments, the fullest, so small objects pack into few of them.
        let (seg, index) = match fullest(segments, span, true) {
            Some(found) => found,
            None => {
                let mut seg = create(heap, true);
                if seg.is_null() {
                    if let Some(found) = fullest(segments, span, false) {
                        return take_slices(segments, heap, class, span, found);
                    }
                    seg = create(heap, false);
                    if seg.is_null() {
                        return ptr::null_mut();
                    }
                }
                link(segments, seg);
                let index = find_free(!(*seg).touched, span).unwrap_or(0);
                (seg, index)
            }
        };
        take_slices(segments, heap, class, span, (seg, index))
    }
}

/// The fullest of `segments` with a free run of `span` slices (of touched ones only if
/// `warm`), and the run's first slice.
unsafe fn fullest(
    segments: &Queue<Segment>,
    span: usize,
    warm: bool,
) -> Option<(*mut Segment, usize)> {
    let mut best: Option<(*mut Segment, usize)> = None;
    let mut seg = segments.first;
    // SAFETY: the heap's segments are owned by the calling thread.
    unsafe {
        while !seg.is_null() {
            let blocked = (*seg).used | if warm { !(*seg).touched } else { 0 };
            if let Some(i) = find_free(blocked, span) {
                if best.is_none_or(|(b, _)| (*seg).used.count_ones() > (*b).used.count_ones()) {
                    best = Some((seg, i));
                }
            }
            seg = (*seg).links.next;
        }
    }
    best
}

/// Claims the run of `span` slices at `index` of `seg` (one of `segments`) for a page of
/// `class`.
unsafe fn take_slices(
    segments: &mut Queue<Segment>,
    heap: *mut HeapId,
    class: usize,
    span: usize,
    (seg, index): (*mut Segment, usize),
) -> *mut Page {
    // SAFETY: the heap's segments are owned by the calling thread; the run is free.
    unsafe {
        (*seg).used |= (((1u64 << span) - 1) as u32) << index;
        (*seg).touched |= (*seg).used;
        (*seg).resident.claim(index, span);
        (&mut (*seg).slice_page)[index..index + span].fill(page_offset(index));
        if (*seg).used == ALL_SLICES {
            unlink(segments, seg);
        }
        let header = if index == 0 { HEADER_SIZE } else { 0 };
        let area = seg.cast::<u8>().add(index * SLICE_SIZE + header);
        let page = ptr::addr_of_mut!((*seg).pages[index]);
        page::init(page, heap, class, span, area, span * SLICE_SIZE - header);
        stats::add(&stats::PAGE_BYTES, span * SLICE_SIZE - header);
        stats::add(&stats::PAGES_CLAIMED, 1);
        os::debug_verify(|| check(seg, heap));
        page
    }
}

/// Gives an empty page back to its segment (whose heap's list is `segments`); an empty
/// segment goes to the cache. The page keeps no flag, so that a page with
/// `page::FLAG_CHECKED` is one in use (secure mode's free tests that alone, see `secure`).
pub(crate) unsafe fn release_page(segments: &mut Queue<Segment>, page: *mut Page) {
    // SAFETY: the page is empty and unlinked from every heap list; its segment is the heap's.
    unsafe {
        let (seg, index) = locate(page);
        let span = (*page).span as usize;
        (*page).in_use = 0;
        (*page).flags.store(0, Ordering::Relaxed);
        let header = if index == 0 { HEADER_SIZE } else { 0 };
        stats::lower(&stats::PAGE_BYTES, span * SLICE_SIZE - header);
        (*seg).used &= !((((1u64 << span) - 1) as u32) << index);
        if (*seg).used == 0 {
            if (*seg).listed {
                unlink(segments, seg);
            }
            stats::lower(&stats::SEGMENTS, 1);
            (*seg).resident.forget();
            cache::put_segment(seg.cast(), (*seg).map_len, (*seg).huge, (*seg).touched);
            return;
        }
        if !(*seg).listed {
            link(segments, seg);
        }
        if returns_pages(seg) {
            let carved_end = (*page).area as usize + (*page).carved as usize - seg as usize;
            if let Some(pages) = (*seg).resident.release(index, span, carved_end) {
                os::discard(seg.cast::<u8>().add(pages.start), pages.len());
            }
        }
        os::debug_verify(|| check(seg, (*seg).heap));
    }
}

/// Whether the pages of `seg`'s free slices are returned past the budget (see `resident`):
/// not with huge pages, which it would split, nor in the reserve, which keeps its pages.
unsafe fn returns_pages(seg: *mut Segment) -> bool {
    // SAFETY: the caller owns the segment.
    unsafe { !(*seg).huge && !cache::reserved(seg.cast()) }
}

/// Checks a segment of `heap` that has pages in use (as mimalloc's `mi_segment_is_valid`):
/// the claimed-slice bitmap is exactly the union of the spans of its pages in use, each page
/// starts on a multiple of its span and covers its slices in `slice_page`, each page's area
/// and capacity fit its slices, no other page descriptor is in use, and the segment is listed
/// exactly when it has free slices. Returns how many pages are in use.
pub(crate) unsafe fn check(seg: *mut Segment, heap: *mut HeapId) -> Result<usize, &'static str> {
    // SAFETY: the caller's heap owns the segment; only owner-written fields are read.
    let s = unsafe { &*seg };
    if s.kind != KIND_SMALL || s.heap != heap {
        return Err("segment: not a small-object segment of this heap");
    }
    if s.used == 0 || s.listed != (s.used != ALL_SLICES) {
        return Err("segment: listed does not match having free slices (or nothing in use)");
    }
    let mut in_use = 0;
    let mut i = 0;
    while i < SLICES {
        let page = &s.pages[i];
        if s.used & (1 << i) == 0 {
            if page.in_use != 0 {
                return Err("segment: a page in use on a free slice");
            }
            i += 1;
            continue;
        }
        let span = page.span as usize;
        if page.in_use != 1 || !span.is_power_of_two() || span > 8 || i % span != 0 {
            return Err("segment: a claimed slice starts no page, or a page is misaligned");
        }
        let mask = (((1u64 << span) - 1) as u32) << i;
        if s.used & mask != mask
            || s.slice_page[i..i + span]
                .iter()
                .any(|&o| o != page_offset(i))
        {
            return Err("segment: a page's slices are not all claimed and headed by it");
        }
        if s.pages[i + 1..i + span].iter().any(|p| p.in_use != 0) {
            return Err("segment: a page descriptor in use inside another page");
        }
        let header = if i == 0 { HEADER_SIZE } else { 0 } + page::gap();
        let area = seg as usize + i * SLICE_SIZE + header;
        let len = span * SLICE_SIZE - header;
        let fits = page.block_size != 0 && page.reserved as usize == len / page.block_size as usize;
        if page.area as usize != area || !fits {
            return Err("segment: a page's area or capacity does not match its slices");
        }
        in_use += 1;
        i += span;
    }
    Ok(in_use)
}

#[cfg(test)]
mod tests {
    use super::{huge_pages_for, EARLY};
    use core::sync::atomic::Ordering;

    fn remembered(base: usize) -> usize {
        EARLY
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == base)
            .count()
    }

    /// A reused segment is not remembered again; a fresh one is, once. (Addresses no mapping
    /// has: the advice a big heap would give them fails harmlessly.)
    #[test]
    fn a_reused_segment_is_remembered_once() {
        let base = 0x7e00_0000_0000usize;
        for _ in 0..3 {
            huge_pages_for(base as *mut u8, true);
        }
        assert_eq!(remembered(base), 0);
        if !huge_pages_for((base + (2 << 20)) as *mut u8, false) {
            assert!(remembered(base + (2 << 20)) <= 1);
            for _ in 0..3 {
                huge_pages_for((base + (2 << 20)) as *mut u8, true);
            }
            assert!(remembered(base + (2 << 20)) <= 1);
        }
    }
}
