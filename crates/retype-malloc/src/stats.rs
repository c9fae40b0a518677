//! Counters kept on slow paths only (mappings, pages, heaps), and the report written at exit
//! when `RETYPE_MALLOC_STATS` is set. The report also copies the kernel's own view
//! (`Rss`, `AnonHugePages` from /proc/self/smaps_rollup) so the two can be reconciled.

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::consts::SEGMENT_SIZE;

pub(crate) static MMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MUNMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MADVISE_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static MREMAP_CALLS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS_PEAK: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEGMENTS_CACHED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LARGE_BYTES_PEAK: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PAGES_CLAIMED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static HEAPS_CREATED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static HEAPS_ADOPTED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PURGED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of retired mappings cached with their pages, and with their pages returned.
pub(crate) static CACHE_KEPT: AtomicUsize = AtomicUsize::new(0);
pub(crate) static CACHE_DISCARDED: AtomicUsize = AtomicUsize::new(0);

#[inline]
pub(crate) fn add(counter: &AtomicUsize, n: usize) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Adds `n` to a gauge and raises its peak.
pub(crate) fn raise(gauge: &AtomicUsize, peak: &AtomicUsize, n: usize) {
    let now = gauge.fetch_add(n, Ordering::Relaxed) + n;
    peak.fetch_max(now, Ordering::Relaxed);
}

pub(crate) fn lower(gauge: &AtomicUsize, n: usize) {
    gauge.fetch_sub(n, Ordering::Relaxed);
}

/// Calls that mapped, unmapped, moved or advised memory so far.
pub(crate) fn system_calls() -> usize {
    [&MMAP_CALLS, &MUNMAP_CALLS, &MADVISE_CALLS, &MREMAP_CALLS]
        .iter()
        .map(|c| get(c))
        .sum()
}

/// A line of the report, formatted without allocating.
type Line = retype_stackstr::StackStr<256>;

fn get(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

/// Writes the report through `out`, a line at a time (the caller chooses the descriptor, so
/// this leaf needs no I/O module).
pub(crate) fn report(out: &mut dyn FnMut(&[u8])) {
    let seg_mib = SEGMENT_SIZE >> 20;
    let rows: [(&[u8], usize); 15] = [
        (b"segments in use", get(&SEGMENTS)),
        (b"segments peak", get(&SEGMENTS_PEAK)),
        (
            b"segments cached (empty, not yet purged)",
            get(&SEGMENTS_CACHED),
        ),
        (b"cached bytes, pages kept", get(&CACHE_KEPT)),
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
    ];
    let mut head = Line::new();
    head.push(b"retype-malloc statistics (segment = ")
        .push_num(seg_mib as u64)
        .push(b" MiB)\n");
    out(head.as_bytes());
    for (name, value) in rows {
        let mut l = Line::new();
        l.push(b"  ")
            .push(name)
            .push(b": ")
            .push_num(value as u64)
            .push(b"\n");
        out(l.as_bytes());
    }
    copy_kernel_view(out);
}

/// Copies the `Rss:` and `AnonHugePages:` lines of /proc/self/smaps_rollup.
fn copy_kernel_view(out: &mut dyn FnMut(&[u8])) {
    let mut buf = [0u8; 2048];
    // SAFETY: NUL-terminated path; `buf` is a valid out-buffer of its length.
    let n = unsafe {
        let f = libc::open(
            c"/proc/self/smaps_rollup".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
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
        if line.starts_with(b"Rss:") || line.starts_with(b"AnonHugePages:") {
            let mut l = Line::new();
            l.push(b"  kernel ").push(line).push(b"\n");
            out(l.as_bytes());
        }
    }
}
