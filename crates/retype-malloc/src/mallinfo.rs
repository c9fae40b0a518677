//! glibc's forms of the statistics: the fields of `mallinfo2` ([`Mallinfo`]) and the XML of
//! `malloc_info`, both made from a [`Stats`], with our meaning of glibc's terms.
//!
//! glibc's arena is our segments and what is mapped for them (the cache, the reserve); its
//! mmapped chunks are our large blocks; its fastbins, the free blocks malloc takes first,
//! are our spills. So, as in glibc, `arena` is `uordblks + fordblks`, and `arena + hblkhd`
//! is all that is mapped.

use crate::census::Stats;

/// The fields of glibc's `struct mallinfo2`, in bytes unless named a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mallinfo {
    /// Bytes mapped for small and medium blocks: segments in use, empty segments and freed
    /// large blocks cached with their pages, the reserve not in use.
    pub arena: usize,
    /// Free runs: empty pages kept by thread heaps, and empty segments cached.
    pub ordblks: usize,
    /// Blocks in the thread heaps' spills (glibc's fastbins).
    pub smblks: usize,
    /// Live large blocks, each mapped on its own.
    pub hblks: usize,
    /// Bytes of their mappings.
    pub hblkhd: usize,
    /// The most bytes mapped at once so far (glibc leaves it 0; it once was this peak).
    pub usmblks: usize,
    /// Bytes of the blocks in the spills.
    pub fsmblks: usize,
    /// Bytes of small and medium blocks in use (the thread heaps' `in_use`).
    pub uordblks: usize,
    /// Bytes of `arena` not in use: free blocks, kept pages and spills of thread heaps, free
    /// slices and headers of segments, the cache, the reserve.
    pub fordblks: usize,
    /// Bytes [`crate::trim`] would give back to the OS now: the cache's, with their pages.
    pub keepcost: usize,
}

impl Stats {
    /// The statistics as the fields of glibc's `mallinfo2` (see [`Mallinfo`]).
    pub fn mallinfo(&self) -> Mallinfo {
        let stats = self;
        let heaps = stats.heap_total();
        let arena = stats.mapped - stats.large_mapped;
        Mallinfo {
            arena,
            ordblks: heaps.kept_pages + stats.cached_segments,
            smblks: heaps.spilled_blocks,
            hblks: stats.large_blocks,
            hblkhd: stats.large_mapped,
            usmblks: stats.mapped_peak,
            fsmblks: heaps.spilled,
            uordblks: heaps.in_use,
            fordblks: arena.saturating_sub(heaps.in_use),
            keepcost: stats.cached,
        }
    }
}

/// A line of the XML, formatted without allocating.
type Line = retype_stackstr::StackStr<256>;

/// Writes `<tag type="kind" count="count" size="size"/>` (no count when `None`).
fn element(out: &mut dyn FnMut(&[u8]), tag: &[u8], kind: &[u8], count: Option<usize>, size: usize) {
    let mut l = Line::new();
    l.push(b"<")
        .push(tag)
        .push(b" type=\"")
        .push(kind)
        .push(b"\"");
    if let Some(n) = count {
        l.push(b" count=\"").push_num(n as u64).push(b"\"");
    }
    l.push(b" size=\"").push_num(size as u64).push(b"\"/>\n");
    out(l.as_bytes());
}

impl Stats {
    /// Writes the statistics in the XML form of glibc's `malloc_info` through `out`,
    /// without allocating: one `<heap>` per thread heap (numbered as [`Stats::heaps`] lists
    /// them) with its spills as `fast`, its free bytes and kept pages as `rest` (the count
    /// is of kept pages) and its bytes held as `system` and `aspace`; then the totals:
    /// `fast` and `rest` make up `fordblks` (see [`Mallinfo`]), `mmap` the large blocks,
    /// `system` the bytes mapped now and at their peak, `aspace` the bytes mapped.
    pub fn write_xml(&self, out: &mut dyn FnMut(&[u8])) {
        let stats = self;
        out(b"<malloc version=\"1\">\n");
        for (nr, h) in stats.heaps.iter().enumerate() {
            let b = &h.bytes;
            let mut l = Line::new();
            l.push(b"<heap nr=\"")
                .push_num(nr as u64)
                .push(b"\">\n<sizes>\n</sizes>\n");
            out(l.as_bytes());
            element(out, b"total", b"fast", Some(b.spilled_blocks), b.spilled);
            element(out, b"total", b"rest", Some(b.kept_pages), b.free + b.kept);
            element(out, b"system", b"current", None, b.held);
            element(out, b"system", b"max", None, b.held);
            element(out, b"aspace", b"total", None, b.held);
            element(out, b"aspace", b"mprotect", None, b.held);
            out(b"</heap>\n");
        }
        let m = stats.mallinfo();
        element(out, b"total", b"fast", Some(m.smblks), m.fsmblks);
        element(
            out,
            b"total",
            b"rest",
            Some(m.ordblks),
            m.fordblks.saturating_sub(m.fsmblks),
        );
        element(out, b"total", b"mmap", Some(m.hblks), m.hblkhd);
        element(out, b"system", b"current", None, stats.mapped);
        element(out, b"system", b"max", None, stats.mapped_peak);
        element(out, b"aspace", b"total", None, stats.mapped);
        element(out, b"aspace", b"mprotect", None, stats.mapped);
        out(b"</malloc>\n");
    }
}
