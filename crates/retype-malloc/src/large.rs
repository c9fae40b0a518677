//! Large objects (over 128 KiB, or with alignment a page cannot give): each is its own
//! 2 MiB-aligned mapping with a segment header in front, so `free` finds it with the same
//! address mask as small blocks. Freed mappings go through the retirement cache and return to
//! the OS after the purge delay.
//!
//! A block of 2 MiB or more (`RETYPE_MALLOC_HUGEPAGES_LARGE`, on by default) starts on a
//! 2 MiB boundary, and its pages are advised for huge pages if it is a block of
//! [`ALWAYS_HUGE`] or more, or once the program has shown that its large blocks are dense
//! (see [`DENSE`]): a big array or list walk gets them, a buffer touched here and there does
//! not pay a 2 MiB page for each byte. The first 2 MiB of an advised mapping hold only the
//! header and are advised against huge pages (a few 4 KiB pages of it are ever touched).
//!
//! A block at a segment boundary (those, and alignments of 2 MiB or more) is where the mask
//! would find no header; the word before such a block points back to the header instead.
//!
//! With guard pages (`RETYPE_MALLOC_GUARD`, hardened and secure modes) a block aligned to at
//! most a page gets an inaccessible page before and after its pages and ends where its last
//! page ends (rounded to its alignment), so an overflow or underflow past its pages faults at
//! the access, and the header cannot be reached from the block. Such a block starts in its
//! mapping's first 2 MiB, where `free` finds the header by the address mask; one of 2 MiB or
//! more is advised for huge pages as an unguarded one would be, from the next 2 MiB boundary,
//! so that all of its pages but those of its first and last 2 MiB can be huge pages. With
//! canaries the slack in the block's first and last pages holds a keyed pattern, checked at
//! free and realloc. With quarantine a freed block's pages are inaccessible until it leaves
//! the quarantine.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::cache::Mapping;
use crate::consts::{HEADER_SIZE, MIN_ALIGN, OS_PAGE, SEGMENT_SIZE, SLICES};
use crate::page::FLAG_LARGE;
use crate::segment::{self, Segment, KIND_LARGE};
use crate::{cache, canary, config, os, quarantine, registry, stats};

/// Blocks of this size or more are advised for huge pages from the first one: so big a block
/// is far more often an array walked whole (seed 004's memory-access case) than a buffer.
const ALWAYS_HUGE: usize = 32 << 20;

/// Whether a large block freed by the program had most of its pages touched: from then on
/// every block of 2 MiB or more is advised for huge pages (if large blocks get them), and a
/// block no freed mapping is long enough for is gathered from shorter ones (see [`gather`]).
/// Until then a block of 2 MiB or more not advised (the first [`LOOKS`], then one in
/// [`LOOK_EVERY`]: `mincore` is a system call) starts on pages that read as zeros, and its
/// free looks at a window of them (see [`look_due`]). One way, as the heap's switch to huge
/// pages for segments is.
static DENSE: AtomicBool = AtomicBool::new(false);
/// Blocks that could have been looked at (see [`DENSE`]).
static LOOKED: AtomicUsize = AtomicUsize::new(0);
/// Blocks looked at before looks are spaced.
const LOOKS: usize = 16;
/// One block in this many looked at after the first [`LOOKS`]: a prime, so that a program
/// alternating blocks of two or more kinds is still seen freeing each kind.
const LOOK_EVERY: usize = 61;

/// Maps a block of `size` bytes aligned to `align` (a power of two). `zero` (or
/// `ZERO_ON_MALLOC`) asks for zeroed memory: fresh mappings are, reused ones are cleared here.
pub(crate) unsafe fn alloc(size: usize, align: usize, zero: bool) -> *mut u8 {
    let guarded = config::guard() && align <= OS_PAGE;
    let huge = on_huge_pages(size, guarded);
    // At least one byte, even for size 0, so the block lies inside its mapping (a block at
    // the mapping's end would be outside, and unknown to hardened mode's registry).
    let Some(rounded) = size.max(1).checked_add(align - 1).map(|n| n & !(align - 1)) else {
        return ptr::null_mut();
    };
    // Guarded: header, guard page, the block's pages, guard page.
    let (offset, tail) = if guarded {
        (HEADER_SIZE + OS_PAGE, OS_PAGE)
    } else if align < SEGMENT_SIZE && !huge {
        ((HEADER_SIZE + align - 1) & !(align - 1), 0)
    } else {
        (align.max(SEGMENT_SIZE), 0)
    };
    // A huge block's mapping ends on a 2 MiB boundary too, so its last pages are a huge page
    // and its pieces, cut or gathered in the cache, are whole huge pages.
    let unit = if huge { SEGMENT_SIZE } else { OS_PAGE };
    let Some(need) = offset
        .checked_add(rounded)
        .and_then(|n| n.checked_add(tail))
        .and_then(|n| n.checked_next_multiple_of(unit))
    else {
        return ptr::null_mut();
    };
    if need > isize::MAX as usize {
        return ptr::null_mut();
    }
    // SAFETY: cached and fresh mappings are ours alone; the header is rewritten here.
    unsafe {
        // Cached mappings are only known to be segment-aligned.
        let reused = if align <= SEGMENT_SIZE {
            reuse(need, offset, guarded)
        } else {
            None
        };
        let m = match reused {
            Some(m) => m,
            None => {
                let base = os::map_aligned(need, align.max(SEGMENT_SIZE));
                if base.is_null() {
                    return base;
                }
                registry::mark(base, need);
                Mapping {
                    base,
                    len: need,
                    huge_from: 0,
                    huge: false,
                    touched: 0,
                    zeroed: true,
                    sealed: false,
                }
            }
        };
        let seg = m.base.cast::<Segment>();
        let mut zeroed = m.zeroed;
        let (p, end) = if guarded {
            let end = m.base.add(need - OS_PAGE);
            let p = end.sub(rounded);
            if m.sealed {
                // Its guard pages are in place: the block's pages alone are opened, renewed
                // where `zero_for_reuse` would give them back (one call for both).
                let from = p.sub(p as usize & (OS_PAGE - 1));
                let n = end as usize - from as usize;
                if !zeroed
                    && !zero
                    && config::zero_on_malloc()
                    && !DENSE.load(Ordering::Relaxed)
                    && m.huge_from == 0
                {
                    os::renew(from, n);
                    zeroed = true;
                } else {
                    os::protect(from, n, true);
                }
            } else {
                os::protect(m.base.add(HEADER_SIZE), OS_PAGE, false);
                os::protect(end, OS_PAGE, false);
            }
            (p, end)
        } else {
            (m.base.add(offset), m.base.add(m.len))
        };
        let pages = m.base.add(offset);
        let looked = look_due(pages, size, m.huge_from);
        if looked && !zeroed {
            os::discard(pages, size & !(OS_PAGE - 1));
        }
        write_header(seg, p, size, m.len, end, guarded);
        (*seg).huge_from = m.huge_from;
        (*seg).large_looked = looked;
        if dense(size) {
            if huge {
                advise_huge(seg, offset);
            } else if guarded && size >= SEGMENT_SIZE && config::huge_large() {
                // Its pages after the first 2 MiB boundary, which it spans.
                advise_huge(seg, SEGMENT_SIZE);
            }
        }
        if !zeroed {
            if zero {
                // Asked for by the program (calloc), which is about to use them: written.
                p.write_bytes(0, size);
            } else if config::zero_on_malloc() {
                zero_for_reuse(p, size);
            }
        }
        if config::canary() {
            let (from, to) = slack(seg);
            canary::fill_slack(p, from, p);
            canary::fill_slack(p, p.add(size.max(1)), to);
        }
        // Live first: a new peak of the bytes mapped records the live bytes with it.
        stats::live(true, size.max(1) as isize);
        stats::add(&stats::LARGE_BLOCKS, 1);
        stats::raise(&stats::LARGE_BYTES, &stats::LARGE_BYTES_PEAK, m.len);
        p
    }
}

/// Zeroes the block `p` of `size` bytes for `ZERO_ON_MALLOC` (hardened mode: no block shows
/// an earlier owner's bytes). In a program whose large blocks are dense (see [`DENSE`]) it is
/// written, as its pages will be touched anyway; else its whole pages are returned to the OS,
/// to read as zeros when touched, and only the parts of its first and last pages are written.
/// Writing every block made every page of a reused mapping resident in programs that touch a
/// few bytes of their blocks (hardened `mstress 2 50 25`: 4.0 s and 77 MB, 1.7 s and 10 MB
/// returning pages); returning them made a program that writes every page fault them all in
/// again (hardened `large 1 20 1000 1`: 130,000 page faults writing, 2,300,000 returning).
unsafe fn zero_for_reuse(p: *mut u8, size: usize) {
    let (start, end) = (p as usize, p as usize + size);
    let (first, last) = (start.next_multiple_of(OS_PAGE), end & !(OS_PAGE - 1));
    // SAFETY: the block is the caller's, fresh, its contents not yet anyone's.
    unsafe {
        if first >= last || DENSE.load(Ordering::Relaxed) {
            return p.write_bytes(0, size);
        }
        p.write_bytes(0, first - start);
        os::discard(first as *mut u8, last - first);
        (last as *mut u8).write_bytes(0, end - last);
    }
}

/// Whether a block of `size` bytes (`guarded`: between guard pages) starts on a 2 MiB
/// boundary and is advised for huge pages.
fn on_huge_pages(size: usize, guarded: bool) -> bool {
    !guarded && size >= SEGMENT_SIZE && config::huge_large()
}

/// Whether a block of `size` bytes on a 2 MiB boundary is advised for huge pages (see
/// [`DENSE`]).
fn dense(size: usize) -> bool {
    size >= ALWAYS_HUGE || DENSE.load(Ordering::Relaxed)
}

/// Whether a block of `size` bytes whose pages start at `pages`, about to be handed out, is to
/// be looked at when it is freed (see [`DENSE`]): it is of 2 MiB or more but not advised for
/// huge pages (it lies in a mapping advised from `huge_from`, 0: none), and a look is due. The
/// caller returns its pages first if they were kept: a block made of a cached mapping whose
/// pages were kept would show what touched them before. `mstress 16 50 25`, which writes 256
/// bytes of each block, looked dense in 3 of 36 runs on 2 cores that way, and every block of 2
/// MiB or more then took huge pages (peak RSS 107, 86 and 84 MB, else 27-33 MB; none of 12 runs
/// since, 0.97-1.11 s against 1.05-1.18 s before).
fn look_due(pages: *mut u8, size: usize, huge_from: usize) -> bool {
    if DENSE.load(Ordering::Relaxed)
        || size < SEGMENT_SIZE
        || huge_from != 0
        || cache::reserved(pages)
    {
        return false;
    }
    let n = LOOKED.fetch_add(1, Ordering::Relaxed);
    n < LOOKS || n.is_multiple_of(LOOK_EVERY)
}

/// Looks whether the block with header `seg`, about to be freed, had most of its pages
/// touched, if it was chosen for a look (see [`look_due`]) and is still not advised.
unsafe fn look_at_density(seg: *mut Segment) {
    // SAFETY: `seg` heads a live large block; the window read lies inside its pages.
    unsafe {
        if !(*seg).large_looked || DENSE.load(Ordering::Relaxed) || (*seg).huge_from != 0 {
            return;
        }
        // From the block's first page: a guarded block starts inside it.
        let (from, _) = slack(seg);
        let (touched, pages) = os::resident(from, (*seg).large_size & !(OS_PAGE - 1));
        if 2 * touched > pages {
            DENSE.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether the block `p`, resized to `size` bytes, would not start where a new block of that
/// size does (on a 2 MiB boundary), so it must move.
pub(crate) fn misplaced(p: *const u8, size: usize) -> bool {
    on_huge_pages(size, config::guard()) && !(p as usize).is_multiple_of(SEGMENT_SIZE)
}

/// A cached mapping for a block at `offset` that needs `need` bytes (a sealed one, see
/// `cache::Mapping`, only if `guarded`): whose pages are kept, long
/// enough, or else, once the program's blocks are dense (see [`DENSE`]), made from shorter ones
/// (see [`gather`]), so their pages, already faulted in, serve again; else one whose pages were
/// returned. A program that touches its blocks here and there faults few pages in anyway, and
/// gathering cost it system calls: `mstress 2 50 25` (the first 256 bytes of blocks of up to 8
/// MiB) made 830 calls that map, unmap, move or advise memory a run with it, 50 without, and
/// took 0.133 against 0.110 s (tcmalloc 0.107; quiet, five pairs).
unsafe fn reuse(need: usize, offset: usize, guarded: bool) -> Option<Mapping> {
    let max = need + need / 4;
    // SAFETY: cached mappings are ours alone.
    unsafe {
        if let Some(m) = cache::take(need, max, true, guarded) {
            return Some(m);
        }
        if DENSE.load(Ordering::Relaxed) {
            if let Some(m) = gather(need, offset) {
                return Some(m);
            }
        }
        cache::take(need, max, false, guarded)
    }
}

/// Makes a mapping of `need` bytes for a block at `offset` from cached mappings whose pages are
/// kept, all shorter than `need`: the longest ones, their pages moved (not copied) one after
/// the other into a fresh range (for a block on a 2 MiB boundary, each piece at the next
/// boundary, which keeps their huge pages whole). What they do not fill is fresh. The registry
/// (hardened and secure modes) follows: a piece's chunks are ours no more, the new range's are.
/// Each move is a system call, where each page not moved would be a page fault: `large 1 20
/// 1000 1` with `RETYPE_MALLOC_HUGEPAGES=0` took 348,000 faults and 0.57 s of system time when
/// a block not on a 2 MiB boundary grew only the longest one (tcmalloc: 129,000 and 0.19 s).
unsafe fn gather(need: usize, offset: usize) -> Option<Mapping> {
    // Where the next piece goes: a huge block's pieces are whole huge pages.
    let unit = if offset < SEGMENT_SIZE {
        OS_PAGE
    } else {
        SEGMENT_SIZE
    };
    // SAFETY: the pieces taken are ours; a piece that cannot be moved goes back as it was.
    unsafe {
        let first = cache::take_shorter(0, need)?;
        let to = os::map_aligned(need, SEGMENT_SIZE);
        if to.is_null() {
            cache::put(first.base, first.len, first.huge_from, false);
            return None;
        }
        let (mut at, mut piece) = (offset, Some(first));
        while let Some(m) = piece {
            // The kernel moves one of its mappings (VMA) per call: the advised part only.
            let from = m.huge_from;
            let len = (m.len - from).min(need - at);
            // Forgotten before its pages leave: once they have, another thread may map the
            // range and record it. A piece put back is recorded again when it is taken.
            registry::clear(m.base, m.len);
            if !os::move_to(m.base.add(from), len, len, to.add(at)) {
                cache::put(m.base, m.len, m.huge_from, false);
                break;
            }
            if from > 0 {
                os::unmap(m.base, from);
            }
            // What is left of a longer piece stays cached from its next 2 MiB boundary.
            let rest = (from + len).next_multiple_of(SEGMENT_SIZE).min(m.len);
            if from + len < rest {
                os::unmap(m.base.add(from + len), rest - from - len);
            }
            if rest < m.len {
                cache::put_piece(m.base.add(rest), m.len - rest);
            }
            at = (at + len).next_multiple_of(unit);
            piece = if at < need {
                cache::take_shorter(0, need)
            } else {
                None
            };
        }
        registry::mark(to, need);
        Some(Mapping {
            base: to,
            len: need,
            huge_from: 0,
            huge: false,
            touched: 0,
            zeroed: false,
            sealed: false,
        })
    }
}

/// Grows the mapping `[base, base+len)`, advised for huge pages from `huge_from` (see
/// `cache::Mapping`), to `new_len` bytes: where it lies if the address space after it is
/// free, else by moving its pages, without copying them, to a fresh 2 MiB-aligned range.
/// The kernel moves one of its mappings (VMA) per call, so with huge-page advice only the
/// advised part moves, and the range before it (the header's, which the caller rewrites)
/// is fresh at the new place. Returns the new base, or null (nothing changed) on failure.
unsafe fn grow(base: *mut u8, len: usize, huge_from: usize, new_len: usize) -> *mut u8 {
    let keep = huge_from;
    // SAFETY: the mapping is the caller's; the target range is a fresh mapping of ours.
    unsafe {
        if os::grow_in_place(base.add(keep), len - keep, new_len - keep) {
            return base;
        }
        let to = os::map_aligned(new_len, SEGMENT_SIZE);
        if to.is_null() {
            return to;
        }
        if !os::move_to(base.add(keep), len - keep, new_len - keep, to.add(keep)) {
            os::unmap(to, new_len);
            return ptr::null_mut();
        }
        if keep > 0 {
            os::unmap(base, keep);
            os::advise_small(to, keep);
        }
        to
    }
}

/// Writes the header `seg` of a large block `p` of `size` bytes, usable up to `end`, in a
/// mapping of `len` bytes, and the pointer back to it before a block at a segment boundary.
unsafe fn write_header(
    seg: *mut Segment,
    p: *mut u8,
    size: usize,
    len: usize,
    end: *mut u8,
    guarded: bool,
) {
    // SAFETY: `seg` heads the caller's mapping, which holds the block.
    unsafe {
        (*seg).kind = KIND_LARGE;
        (*seg).large_live.store(1, Ordering::Release);
        (*seg).slice_page = [segment::page_offset(0); SLICES];
        (*seg).pages[0].flags.store(FLAG_LARGE, Ordering::Relaxed);
        (*seg).map_len = len;
        (*seg).large_ptr = p;
        (*seg).large_size = size.max(1);
        (*seg).large_end = end;
        (*seg).large_guarded = guarded;
        if p as usize - seg as usize >= SEGMENT_SIZE {
            p.cast::<*mut Segment>().sub(1).write(seg);
        }
    }
}

/// Resizes the large block `p` (header `seg`) to `size` bytes, more than the medium classes
/// hold, without copying it: in its mapping when it fits (giving back the pages after a
/// block shrunk below half of it), else by growing the mapping with an eighth to spare for
/// the next growth (see [`grow`]), or for a block growing past 2 MiB that must start on a
/// 2 MiB boundary by moving its pages to a new block there. Not in hardened mode. None when
/// the caller must copy it: for a block that lies across two differently advised ranges of
/// its mapping or in the reserve, or when the kernel refuses.
pub(crate) unsafe fn realloc(seg: *mut Segment, p: *mut u8, size: usize) -> Option<*mut u8> {
    // SAFETY: `seg` heads the live block `p`, whose mapping is the caller's to resize.
    unsafe {
        let base = seg.cast::<u8>();
        let offset = p as usize - base as usize;
        let huge = on_huge_pages(size, false);
        // Moving or unmapping pages of the reserve would leave holes in it.
        if cache::reserved(base) {
            return None;
        }
        let (len, huge_from) = ((*seg).map_len, (*seg).huge_from);
        let grown = size as isize - (*seg).large_size as isize;
        if huge && !offset.is_multiple_of(SEGMENT_SIZE) {
            return move_to_boundary(seg, p, size);
        }
        let need = (offset + size).next_multiple_of(OS_PAGE);
        if need <= len {
            if need < len / 2 {
                os::unmap(base.add(need), len - need);
                stats::lower(&stats::LARGE_BYTES, len - need);
                (*seg).map_len = need;
                (*seg).large_end = base.add(need);
                if huge_from >= need {
                    (*seg).huge_from = 0;
                }
            }
            stats::live(true, grown);
            (*seg).large_size = size;
            return Some(p);
        }
        // A block before the advised part would be split between two kernel mappings.
        if huge_from > offset {
            return None;
        }
        let unit = if huge { SEGMENT_SIZE } else { OS_PAGE };
        let new_len = (need + need / 8).next_multiple_of(unit);
        let to = grow(base, len, huge_from, new_len);
        if to.is_null() {
            return None;
        }
        let (seg, q) = (to.cast::<Segment>(), to.add(offset));
        stats::live(true, grown);
        write_header(seg, q, size, new_len, to.add(new_len), false);
        (*seg).huge_from = huge_from;
        if huge && dense(size) {
            advise_huge(seg, offset);
        }
        stats::raise(&stats::LARGE_BYTES, &stats::LARGE_BYTES_PEAK, new_len - len);
        Some(q)
    }
}

/// Moves the large block `p` (header `seg`, on no 2 MiB boundary) to a new block of `size`
/// bytes that starts on one, by moving its pages rather than copying them: a copy would
/// write every page of the old block into the new one, also those the program never
/// touched (`mstress 2 50 25`, which writes the first 256 bytes of blocks of up to 8 MiB
/// and grows some by realloc: peak RSS 9.4-10.8 MiB copying, 8.0-8.9 moving, 6.1-6.7 with
/// `RETYPE_MALLOC_HUGEPAGES_LARGE=0`); a copy also made such blocks look dense, switching
/// huge pages on for every later one (see [`DENSE`]). The old mapping, with a hole where the
/// block was, is unmapped. None (nothing changed) when the kernel refuses.
unsafe fn move_to_boundary(seg: *mut Segment, p: *mut u8, size: usize) -> Option<*mut u8> {
    // SAFETY: `seg` heads the live block `p`, whose mapping is the caller's to give up.
    unsafe {
        let old = (*seg).large_size;
        if !(p as usize).is_multiple_of(OS_PAGE) {
            return None;
        }
        let q = alloc(size, MIN_ALIGN, false);
        if q.is_null() {
            return None;
        }
        // All the block may hold: a realloc within its usable bytes leaves its size as it was.
        let moved = usable(seg, p).min(size).next_multiple_of(OS_PAGE);
        if !os::move_to(p, moved, moved, q) {
            free(header_of_aligned(q));
            return None;
        }
        let (base, len) = (seg.cast::<u8>(), (*seg).map_len);
        let after = p.add(moved);
        os::unmap(base, p as usize - base as usize);
        if after < base.add(len) {
            os::unmap(after, base.add(len) as usize - after as usize);
        }
        stats::lower(&stats::LARGE_BYTES, len);
        stats::lower(&stats::LARGE_BLOCKS, 1);
        stats::live(true, -(old as isize));
        Some(q)
    }
}

/// Advises the mapping with header `seg` for huge pages from `offset` (a multiple of 2 MiB,
/// where its block starts) and against them before: once per mapping, which keeps the offset
/// advised in its header, also while it is cached.
unsafe fn advise_huge(seg: *mut Segment, offset: usize) {
    // SAFETY: `seg` heads a mapping of ours at least `offset` bytes long.
    unsafe {
        if (*seg).huge_from == offset {
            return;
        }
        let base = seg.cast::<u8>();
        os::advise_small(base, offset);
        os::advise_huge(base.add(offset), (*seg).map_len - offset);
        (*seg).huge_from = offset;
    }
}

/// The pages of the large block with header `seg`: from the start of its first page to the
/// end of its last (its mapping's end at most).
unsafe fn slack(seg: *mut Segment) -> (*mut u8, *mut u8) {
    // SAFETY: `seg` is the header of a live large block.
    unsafe {
        let p = (*seg).large_ptr;
        let end = (p as usize + (*seg).large_size).next_multiple_of(OS_PAGE);
        let from = p.sub(p as usize & (OS_PAGE - 1));
        (from, (end as *mut u8).min((*seg).large_end))
    }
}

/// Aborts if the canaries in the slack of the large block with header `seg` were overwritten.
unsafe fn check_slack(seg: *mut Segment) {
    // SAFETY: `seg` is the header of a live large block whose slack holds its canaries.
    unsafe {
        let (p, size) = ((*seg).large_ptr, (*seg).large_size);
        let (from, to) = slack(seg);
        canary::check_slack(p, size, from, p);
        canary::check_slack(p, size, p.add(size), to);
    }
}

/// The header of a large block placed at a segment boundary.
#[inline]
pub(crate) unsafe fn header_of_aligned(p: *mut u8) -> *mut Segment {
    // SAFETY: the word before such a block is inside its mapping and holds the header address.
    unsafe { p.cast::<*mut Segment>().sub(1).read() }
}

/// Usable bytes from `p` to the end of its block (with canaries, which are checked here, the
/// size asked for).
pub(crate) unsafe fn usable(seg: *mut Segment, p: *mut u8) -> usize {
    // SAFETY: `seg` is the header of the live block `p`.
    unsafe {
        if config::canary() {
            check_slack(seg);
            return (*seg).large_size;
        }
        (*seg).large_end as usize - p as usize
    }
}

/// Frees the large block whose header is `seg` (in hardened mode, `hardened::forget_large`
/// has checked it first). With quarantine its pages become inaccessible and the mapping
/// waits in the quarantine before it can be reused; else with `ZERO_ON_FREE` it is zeroed.
pub(crate) unsafe fn free(seg: *mut Segment) {
    // SAFETY: the block is live and owned by the caller, who gives it up.
    unsafe {
        if config::canary() {
            check_slack(seg);
        }
        look_at_density(seg);
        let (base, len) = (seg.cast::<u8>(), (*seg).map_len);
        stats::live(true, -((*seg).large_size as isize));
        if config::zero_on_free() && !config::quarantine() {
            (*seg).large_ptr.write_bytes(0, (*seg).large_size);
        }
        stats::lower(&stats::LARGE_BLOCKS, 1);
        if config::quarantine() {
            let p = (*seg).large_ptr;
            let from = p.sub(p as usize & (OS_PAGE - 1));
            os::protect(from, base.add(len) as usize - from as usize, false);
            if quarantine::hold_large(base, len) {
                while let Some((b, l)) = quarantine::large_leaving() {
                    retire(b, l, true);
                }
                return;
            }
            return retire(base, len, true);
        }
        retire(base, len, false)
    }
}

/// Gives the freed large mapping `[base, base+len)` to the cache; `protected`: inaccessible
/// from its block's first page on (quarantine). A guarded block's mapping so protected, its
/// guard page before the block, is cached sealed (see `cache::Mapping`): the next guarded
/// block made of it opens its own pages only, where opening the mapping here and protecting
/// that block's guard pages took three calls more. Any other protected mapping, and a guarded
/// one without quarantine, is opened again: sealing the latter at free would change the
/// protection of every page the program touched, twice a block (secure mode's `large 1 20
/// 1000 1`, dense blocks: 0.80 s of `mprotect` under `strace -f -c` sealed, 0.04 s opened).
unsafe fn retire(base: *mut u8, len: usize, protected: bool) {
    // SAFETY: the mapping is the caller's to give up; its header area is accessible.
    unsafe {
        let seg = base.cast::<Segment>();
        let guarded = (*seg).large_guarded;
        if protected != guarded {
            os::protect(base.add(HEADER_SIZE), len - HEADER_SIZE, true);
        }
        stats::lower(&stats::LARGE_BYTES, len);
        cache::put(base, len, (*seg).huge_from, protected && guarded);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering;

    use proptest::prelude::*;

    use crate::consts::{OS_PAGE, SEGMENT_SIZE};
    use crate::{config, os, stats};

    const MIB: usize = 1 << 20;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(usize),
        Realloc(usize, usize),
        Free(usize),
        /// A new purge delay for the cache (ms; 0 unmaps at once).
        Settle(u64),
    }

    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![
            3 => 129 * 1024..MIB,
            3 => MIB..8 * MIB,
            1 => 8 * MIB..40 * MIB,
            1 => 1usize..100_000,
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => size().prop_map(Op::Alloc),
            3 => (any::<usize>(), size()).prop_map(|(i, s)| Op::Realloc(i, s)),
            3 => any::<usize>().prop_map(Op::Free),
            1 => (0u64..4).prop_map(Op::Settle),
        ]
    }

    /// The offsets of a block of `size` bytes that hold its pattern: its ends and a byte in
    /// every 64 KiB, at varying offsets in the page.
    fn probes(size: usize) -> impl Iterator<Item = usize> {
        let ends = (0..size.min(64)).chain(size.saturating_sub(64)..size);
        ends.chain((0..size).step_by(64 * 1024 + 24))
    }

    fn byte(seed: u8, i: usize) -> u8 {
        seed ^ (i as u8) ^ ((i >> 12) as u8)
    }

    fn fill(p: usize, size: usize, seed: u8) {
        for i in probes(size) {
            // SAFETY: `i` < `size`, the block's usable size.
            unsafe { (p as *mut u8).add(i).write(byte(seed, i)) };
        }
    }

    /// Checks the pattern of a block of `size` bytes in its first `keep` bytes at `p`.
    fn check(p: usize, size: usize, keep: usize, seed: u8) {
        for i in probes(size).filter(|&i| i < keep) {
            // SAFETY: `i` < `size`, within the live block.
            let b = unsafe { (p as *const u8).add(i).read() };
            assert_eq!(b, byte(seed, i), "block {p:#x} of {size} B, byte {i}");
        }
    }

    /// The model: live blocks by address, with the size whose pattern they hold.
    struct Model {
        live: BTreeMap<usize, (usize, u8)>,
        seed: u8,
    }

    impl Model {
        fn insert(&mut self, p: usize, size: usize) {
            assert_ne!(p, 0, "allocation of {size} B failed");
            // SAFETY: `p` is live.
            let usable = unsafe { crate::usable_size(p as *mut u8) };
            assert!(usable >= size, "usable {usable} < {size}");
            if size >= SEGMENT_SIZE && config::huge_large() {
                assert!(p.is_multiple_of(SEGMENT_SIZE), "{size} B at {p:#x}");
            }
            if let Some((&q, &(s, _))) = self.live.range(..p).next_back() {
                assert!(q + s <= p, "{p:#x} overlaps {q:#x}+{s}");
            }
            if let Some((&q, _)) = self.live.range(p..).next() {
                assert!(p + usable <= q, "{p:#x}+{usable} overlaps {q:#x}");
            }
            self.seed = self.seed.wrapping_add(1);
            fill(p, size, self.seed);
            self.live.insert(p, (size, self.seed));
        }

        fn take(&mut self, i: usize) -> Option<(usize, usize, u8)> {
            let (&p, &(size, seed)) = self.live.iter().nth(i % self.live.len().max(1))?;
            check(p, size, size, seed);
            self.live.remove(&p);
            Some((p, size, seed))
        }
    }

    /// Runs `ops` with a cache of `cap_mib` MiB, emptied first.
    fn run(cap_mib: usize, ops: Vec<Op>) {
        let _serial = crate::cache::tests::serial();
        crate::trim();
        config::CACHE_BYTES.store(cap_mib * MIB, Ordering::Relaxed);
        let mut m = Model {
            live: BTreeMap::new(),
            seed: 0,
        };
        for op in ops {
            // SAFETY: the model hands the allocator only live blocks, each freed once.
            unsafe {
                match op {
                    Op::Alloc(size) => m.insert(crate::malloc(size) as usize, size),
                    Op::Realloc(i, size) => {
                        let Some((p, old, seed)) = m.take(i) else {
                            continue;
                        };
                        let q = crate::realloc(p as *mut u8, size) as usize;
                        check(q, old, size, seed);
                        m.insert(q, size);
                    }
                    Op::Free(i) => {
                        if let Some((p, _, _)) = m.take(i) {
                            crate::free(p as *mut u8);
                        }
                    }
                    Op::Settle(delay) => config::PURGE_DELAY_MS.store(delay, Ordering::Relaxed),
                }
            }
            let (kept, allowed) = crate::cache::kept_and_allowed();
            assert!(
                kept <= allowed,
                "{kept} B cached with their pages, cap {allowed}"
            );
        }
        for (&p, &(size, seed)) in &m.live {
            check(p, size, size, seed);
            // SAFETY: every block left is live.
            unsafe { crate::free(p as *mut u8) };
        }
        // Other tests' threads may cache what they free between a trim and the reading (a
        // thread's exit gives its heap's kept pages back at once): a trim must empty the cache
        // at least once they pause.
        let kept = || {
            crate::trim();
            stats::CACHE_KEPT_SEGMENTS.load(Ordering::Relaxed)
                + stats::CACHE_KEPT_LARGE.load(Ordering::Relaxed)
        };
        let left = (0..1000).map(|_| kept()).find(|&k| k == 0);
        assert_eq!(left, Some(0), "after trim: {} B cached", kept());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Random mallocs, reallocs and frees of large blocks, with a random cache cap and
        /// purge delays changed on the way: blocks keep their contents, do not overlap, blocks of 2 MiB
        /// and more start on 2 MiB boundaries, and the bytes the cache keeps stay under its
        /// cap (the fixed one or the recent peak).
        #[test]
        fn large_blocks_keep_their_contents_and_the_cache_its_cap(
            cap_mib in 0usize..80,
            ops in prop::collection::vec(op(), 1..40)
        ) {
            run(cap_mib, ops);
        }
    }

    /// A block growing past 2 MiB moves to a 2 MiB boundary with its pages: its contents
    /// come along, and pages the program never touched stay untouched (a copy would write
    /// them all).
    #[test]
    fn a_block_moved_to_a_boundary_takes_its_pages_along() {
        if config::hardened() {
            return; // hardened mode copies, by design (see `realloc`)
        }
        let old = 1 << 20;
        // SAFETY: a live large block of ours, freed once; the ranges read are its own.
        unsafe {
            let p = crate::malloc(old);
            assert!(!(p as usize).is_multiple_of(SEGMENT_SIZE));
            // Its pages may be a reused mapping's, resident: only the first is to be.
            libc::madvise(p.cast(), old, libc::MADV_DONTNEED);
            fill(p as usize, OS_PAGE, 9);
            let q = crate::realloc(p, 3 << 20);
            assert!((q as usize).is_multiple_of(SEGMENT_SIZE), "{q:?}");
            check(q as usize, OS_PAGE, OS_PAGE, 9);
            let (touched, pages) = os::resident(q.add(OS_PAGE), old - OS_PAGE);
            assert_eq!(pages, old / OS_PAGE - 1);
            assert_eq!(touched, 0, "pages the program never touched were written");
            crate::free(q);
        }
    }
}
