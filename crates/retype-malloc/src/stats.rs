//! Counters kept on slow paths only (mappings, pages, heaps), and the report written at exit
//! when `RETYPE_MALLOC_STATS` is set. The report also copies the kernel's own view
//! (`Rss`, `AnonHugePages` from /proc/self/smaps_rollup, the peak RSS `VmHWM` from
//! /proc/self/status) so the two can be reconciled.
//!
//! Peak RSS against peak live bytes: with `RETYPE_MALLOC_STATS` set, every malloc and free
//! takes the slow path, which counts the live bytes of small and medium blocks (by their size
//! classes; large blocks count the bytes asked for always). When the bytes the allocator has
//! mapped reach a new peak, where they are is recorded: live blocks, free blocks in the
//! pages of thread heaps, free slices of segments in use, the cache of empty segments and of
//! freed large blocks, and large mappings beyond the bytes asked for.

use core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use crate::consts::SEGMENT_SIZE;
use crate::lock::SpinLock;

pub(crate) static MMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MUNMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MADVISE_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MREMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MPROTECT_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS_PEAK: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS_CACHED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LARGE_BYTES_PEAK: AtomicUsize = AtomicUsize::new(0);
/// Large blocks live.
pub(crate) static LARGE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PAGES_CLAIMED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static HEAPS_CREATED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static HEAPS_ADOPTED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PURGED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of retired mappings cached with their pages (empty segments, freed large blocks),
/// and with their pages returned.
pub(crate) static CACHE_KEPT_SEGMENTS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static CACHE_KEPT_LARGE: AtomicUsize = AtomicUsize::new(0);
pub(crate) static CACHE_DISCARDED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of the reserve (`RETYPE_MALLOC_RESERVE`) cached, not in use.
pub(crate) static CACHE_RESERVE: AtomicUsize = AtomicUsize::new(0);
/// Bytes of the pages that heaps have claimed in their segments (their areas).
pub(crate) static PAGE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Live bytes: of small and medium blocks (counted mode only, in batches per thread, so it
/// may lag by a batch per thread), of large blocks as asked for; the peak of their sum.
pub(crate) static LIVE_SMALL: AtomicIsize = AtomicIsize::new(0);
pub(crate) static LIVE_LARGE: AtomicIsize = AtomicIsize::new(0);
pub(crate) static LIVE_PEAK: AtomicUsize = AtomicUsize::new(0);
/// The bytes mapped at their peak, and where they were then.
pub(crate) static MAPPED_PEAK: AtomicUsize = AtomicUsize::new(0);
/// Taken only when the bytes mapped reach a new peak (and around fork).
pub(crate) static AT_PEAK: SpinLock<Footprint> = SpinLock::new(Footprint::ZERO);

#[inline]
pub(crate) fn add(counter: &AtomicUsize, n: usize) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Adds `n` to a gauge of mapped bytes (segments, large mappings) and raises its peak, and
/// that of all bytes mapped.
pub(crate) fn raise(gauge: &AtomicUsize, peak: &AtomicUsize, n: usize) {
    let now = gauge.fetch_add(n, Ordering::Relaxed) + n;
    peak.fetch_max(now, Ordering::Relaxed);
    note_mapped();
}

/// Adds `delta` bytes to the live bytes of small and medium blocks (`large` false) or large
/// ones, and raises the peak of their sum.
pub(crate) fn live(large: bool, delta: isize) {
    let (gauge, other) = if large {
        (&LIVE_LARGE, &LIVE_SMALL)
    } else {
        (&LIVE_SMALL, &LIVE_LARGE)
    };
    let now = gauge.fetch_add(delta, Ordering::Relaxed) + delta;
    let total = now + other.load(Ordering::Relaxed);
    LIVE_PEAK.fetch_max(total.max(0) as usize, Ordering::Relaxed);
}

/// Where the mapped bytes are, in bytes.
#[derive(Clone, Copy)]
pub(crate) struct Footprint {
    mapped: usize,
    live_small: usize,
    live_large: usize,
    pages: usize,
    segments: usize,
    cache_segments: usize,
    cache_large: usize,
    reserve: usize,
    large: usize,
}

impl Footprint {
    const ZERO: Footprint = Footprint {
        mapped: 0,
        live_small: 0,
        live_large: 0,
        pages: 0,
        segments: 0,
        cache_segments: 0,
        cache_large: 0,
        reserve: 0,
        large: 0,
    };

    fn now() -> Footprint {
        let live = |g: &AtomicIsize| g.load(Ordering::Relaxed).max(0) as usize;
        let mut f = Footprint {
            mapped: 0,
            live_small: live(&LIVE_SMALL),
            live_large: live(&LIVE_LARGE),
            pages: get(&PAGE_BYTES),
            segments: get(&SEGMENTS) * SEGMENT_SIZE,
            cache_segments: get(&CACHE_KEPT_SEGMENTS),
            cache_large: get(&CACHE_KEPT_LARGE),
            reserve: get(&CACHE_RESERVE),
            large: get(&LARGE_BYTES),
        };
        f.mapped = f.segments + f.cache_segments + f.cache_large + f.reserve + f.large;
        f
    }
}

/// Records where the mapped bytes are if they reached a new peak (they grow only when a
/// segment or large mapping is made or grown).
fn note_mapped() {
    let f = Footprint::now();
    if f.mapped <= MAPPED_PEAK.load(Ordering::Relaxed) {
        return;
    }
    let mut at = AT_PEAK.lock();
    if f.mapped > at.mapped {
        *at = f;
        MAPPED_PEAK.store(f.mapped, Ordering::Relaxed);
    }
}

pub(crate) fn lower(gauge: &AtomicUsize, n: usize) {
    gauge.fetch_sub(n, Ordering::Relaxed);
}

/// Calls that mapped, unmapped, moved, advised or protected memory so far.
pub(crate) fn system_calls() -> usize {
    [
        &MMAP_CALLS,
        &MUNMAP_CALLS,
        &MADVISE_CALLS,
        &MREMAP_CALLS,
        &MPROTECT_CALLS,
    ]
    .iter()
    .map(|c| get(c))
    .sum()
}

/// A line of the report, formatted without allocating.
type Line = retype_stackstr::StackStr<256>;

pub(crate) fn get(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

fn row(out: &mut dyn FnMut(&[u8]), indent: &[u8], name: &[u8], value: usize) {
    let mut l = Line::new();
    l.push(indent)
        .push(name)
        .push(b": ")
        .push_num(value as u64)
        .push(b"\n");
    out(l.as_bytes());
}

/// Writes the report through `out`, a line at a time (the caller chooses the descriptor, so
/// this leaf needs no I/O module). `counted`: small and medium live bytes were counted.
pub(crate) fn report(out: &mut dyn FnMut(&[u8]), counted: bool) {
    let seg_mib = SEGMENT_SIZE >> 20;
    let rows: [(&[u8], usize); 17] = [
        (b"segments in use", get(&SEGMENTS)),
        (b"segments peak", get(&SEGMENTS_PEAK)),
        (
            b"segments cached (empty, not yet purged)",
            get(&SEGMENTS_CACHED),
        ),
        (
            b"cached bytes, pages kept",
            get(&CACHE_KEPT_SEGMENTS) + get(&CACHE_KEPT_LARGE),
        ),
        (b"cached bytes, pages returned", get(&CACHE_DISCARDED)),
        (b"large-object bytes mapped", get(&LARGE_BYTES)),
        (b"large-object bytes peak", get(&LARGE_BYTES_PEAK)),
        (b"pages claimed", get(&PAGES_CLAIMED)),
        (b"thread heaps created", get(&HEAPS_CREATED)),
        (b"thread heaps adopted", get(&HEAPS_ADOPTED)),
        (b"segments/blocks purged to the OS", get(&PURGED)),
        (b"mmap calls", get(&MMAP_CALLS)),
        (b"munmap calls", get(&MUNMAP_CALLS)),
        (b"madvise calls", get(&MADVISE_CALLS)),
        (b"mremap calls", get(&MREMAP_CALLS)),
        (b"mprotect calls", get(&MPROTECT_CALLS)),
        (b"bytes mapped, peak", get(&MAPPED_PEAK)),
    ];
    let mut head = Line::new();
    head.push(b"retype-malloc statistics (segment = ")
        .push_num(seg_mib as u64)
        .push(b" MiB)\n");
    out(head.as_bytes());
    for (name, value) in rows {
        row(out, b"  ", name, value);
    }
    if counted {
        row(out, b"  ", b"live bytes, peak", get(&LIVE_PEAK));
    } else {
        out(b"  live bytes, peak: not counted (set RETYPE_MALLOC_STATS)\n");
    }
    let f = *AT_PEAK.lock();
    out(b"  where the bytes mapped were at their peak:\n");
    let counted_rows = [
        (b"live small and medium blocks" as &[u8], f.live_small),
        (
            b"free blocks in pages of thread heaps",
            f.pages.saturating_sub(f.live_small),
        ),
    ];
    let uncounted_rows = [(
        b"pages of thread heaps, live and free blocks" as &[u8],
        f.pages,
    )];
    let rest: [(&[u8], usize); 6] = [
        (
            b"free slices and headers of segments in use",
            f.segments.saturating_sub(f.pages),
        ),
        (b"empty segments cached, pages kept", f.cache_segments),
        (b"freed large blocks cached, pages kept", f.cache_large),
        (b"reserve not in use", f.reserve),
        (b"live large blocks (bytes asked for)", f.live_large),
        (
            b"large mappings beyond the bytes asked for",
            f.large.saturating_sub(f.live_large),
        ),
    ];
    let small: &[(&[u8], usize)] = if counted {
        &counted_rows
    } else {
        &uncounted_rows
    };
    for &(name, value) in small.iter().chain(&rest) {
        row(out, b"    ", name, value);
    }
    copy_kernel_view(out, c"/proc/self/status", &[b"VmHWM:"]);
    copy_kernel_view(
        out,
        c"/proc/self/smaps_rollup",
        &[b"Rss:", b"AnonHugePages:"],
    );
}

/// Copies the lines of the kernel's file `path` that start with one of `keys`.
fn copy_kernel_view(out: &mut dyn FnMut(&[u8]), path: &core::ffi::CStr, keys: &[&[u8]]) {
    let mut buf = [0u8; 2048];
    // SAFETY: NUL-terminated path; `buf` is a valid out-buffer of its length.
    let n = unsafe {
        let f = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if f < 0 {
            return;
        }
        let n = libc::read(f, buf.as_mut_ptr().cast(), buf.len());
        libc::close(f);
        n
    };
    if n <= 0 {
        return;
    }
    for line in buf[..n as usize].split(|&c| c == b'\n') {
        if keys.iter().any(|k| line.starts_with(k)) {
            let mut l = Line::new();
            l.push(b"  kernel ").push(line).push(b"\n");
            out(l.as_bytes());
        }
    }
}
