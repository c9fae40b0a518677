//! Retired mappings (empty segments and freed large blocks) wait here for reuse, so a program
//! that frees and allocates again pays neither mmap and munmap nor page faults each time.
//!
//! A request takes the shortest cached mapping long enough; one much longer is cut at a 2 MiB
//! boundary and the rest stays cached (so a freed 20 MiB block can serve a 6 MiB one and
//! segments). `large` prefers mappings whose pages are kept, even a shorter one, which it
//! grows: their pages serve again without page faults.
//!
//! Purge policy, which returns memory without thrashing:
//! - decay: a mapping cached for `RETYPE_MALLOC_PURGE_DELAY` ms has its pages returned to the
//!   OS (`MADV_DONTNEED`: the range stays mapped and advised, and is reused as zeroed memory,
//!   with page faults but no system call); after [`UNMAP_AFTER_DELAYS`] delays it is unmapped.
//!   A delay of 0 unmaps at once.
//! - cap: the cached bytes whose pages are kept never exceed `RETYPE_MALLOC_CACHE_MIB` or, if
//!   more, what the segments and large blocks in use lack of their recent peak (so the cache
//!   never takes the footprint past that peak); past it, the oldest mappings' pages are
//!   returned at once, when a mapping is retired. The peak is the highest since the cache
//!   last held a mapping unused for a whole delay; it starts again from the bytes in use and
//!   kept then.
//!
//! The delay keeps memory a program frees and takes again soon (a loop, a phase) mapped and
//! resident, the cap bounds what it costs (a program that empties a heap of any size and fills
//! it again keeps it: no purge, no page fault, nothing beyond the peak it already reached),
//! and returning pages before unmapping keeps the address space of a program that comes
//! back later.
//!
//! The reserve (`RETYPE_MALLOC_RESERVE`) is mapped and faulted in at start-up and cached
//! pinned: its pieces serve segments and large blocks like any cached mapping, but they are
//! never returned to the OS, moved or counted against the cap, so once a real-time program
//! has warmed up, its mallocs and frees within the reserve make no system call.

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::consts::{HEADER_SIZE, SEGMENT_SIZE};
use crate::lock::SpinLock;
use crate::{config, os, registry, stats};

/// No piece shorter than this is cut off and cached: it could hold no large block.
const MIN_PIECE: usize = 256 << 10;

/// A mapping whose pages were returned is unmapped this many purge delays after its free.
pub(crate) const UNMAP_AFTER_DELAYS: u64 = 10;

/// The list node lives at the end of the retired mapping's header area, clear of the fields
/// that hardened mode reads to diagnose a free of a pointer into a retired mapping. Returning
/// pages spares the header area, so the node survives it.
const NODE_OFFSET: usize = HEADER_SIZE - 64;

struct Node {
    next: *mut Node,
    len: usize,
    freed_at: u64,
    huge_from: usize,
    /// The whole mapping is advised for huge pages (an empty segment's).
    huge: bool,
    /// An empty segment's slices claimed since it was mapped (their pages were touched and
    /// are kept while its pages are).
    touched: u32,
    /// Its pages (after the header area) were returned: they read as zeros.
    discarded: bool,
    /// It was an empty segment (for the statistics).
    segment: bool,
    /// It lies in the reserve.
    pinned: bool,
}

/// A mapping handed out by the cache.
pub(crate) struct Mapping {
    pub base: *mut u8,
    pub len: usize,
    /// The offset from which the mapping is advised for huge pages, the range before it
    /// against them (0: no such advice known; the mapping is one kernel mapping, VMA).
    pub huge_from: usize,
    /// The whole mapping is advised for huge pages: a segment made of it needs no advice
    /// (a system call) again.
    pub huge: bool,
    /// The slices of an empty segment claimed since it was mapped, resident (0 if unknown).
    pub touched: u32,
    /// Everything after the header area reads as zeros.
    pub zeroed: bool,
}

/// The cached mappings, newest first.
pub(crate) struct List {
    head: *mut Node,
    /// Bytes of cached mappings whose pages are kept (not discarded).
    resident: usize,
    /// Bytes of cached mappings whose pages were returned.
    discarded: usize,
    /// Bytes of the reserve cached.
    pinned: usize,
    /// No mapping needs purging before this time (`os::now_ms`).
    next_purge: u64,
    /// The recent peak of the bytes in use (see the module's comment and [`in_use`]).
    peak: usize,
}

// SAFETY: the nodes are owned by the list and only touched under its lock.
unsafe impl Send for List {}

pub(crate) static CACHE: SpinLock<List> = SpinLock::new(List {
    head: ptr::null_mut(),
    resident: 0,
    discarded: 0,
    pinned: 0,
    next_purge: u64::MAX,
    peak: 0,
});

/// Bytes of segments and large-block mappings in use.
fn in_use() -> usize {
    stats::SEGMENTS.load(Ordering::Relaxed) * SEGMENT_SIZE
        + stats::LARGE_BYTES.load(Ordering::Relaxed)
}

/// The reserve's range, `[start, end)` (empty without one).
static RESERVE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Maps the reserve of `bytes` (rounded up to 2 MiB), advised for huge pages if the heap may
/// use them, faults its pages in, and caches it pinned. Called once, at start-up.
pub(crate) fn reserve(bytes: usize) {
    let len = bytes.next_multiple_of(SEGMENT_SIZE);
    // SAFETY: a fresh mapping of ours, handed to the cache whole.
    unsafe {
        let p = os::map_aligned(len, SEGMENT_SIZE);
        if p.is_null() {
            return;
        }
        if config::HUGE_PAGES.load(Ordering::Relaxed) {
            os::advise_huge(p, len);
        }
        os::prefault(p, len);
        registry::mark(p, len);
        RESERVE[0].store(p as usize, Ordering::Relaxed);
        RESERVE[1].store(p as usize + len, Ordering::Release);
        put(p, len, 0);
    }
}

/// Bytes kept with their pages, and the most the cap can allow now: the fixed cap or the
/// recent peak (for tests: `kept <= allowed` holds at every moment, whatever other threads
/// do).
#[cfg(test)]
pub(crate) fn kept_and_allowed() -> (usize, usize) {
    let list = CACHE.lock();
    let fixed = config::CACHE_BYTES.load(Ordering::Relaxed);
    (list.resident, fixed.max(list.peak))
}

/// Whether `p` lies in the reserve.
pub(crate) fn reserved(p: *const u8) -> bool {
    let end = RESERVE[1].load(Ordering::Acquire);
    (RESERVE[0].load(Ordering::Relaxed)..end).contains(&(p as usize))
}

fn node_of(base: *mut u8) -> *mut Node {
    base.wrapping_add(NODE_OFFSET).cast()
}

fn base_of(node: *mut Node) -> *mut u8 {
    node.cast::<u8>().wrapping_sub(NODE_OFFSET)
}

impl List {
    /// Counts the bytes of `node` in (`add`) or out of the cache, in its gauges and the
    /// statistics.
    unsafe fn count(&mut self, node: *const Node, add: bool) {
        // SAFETY: the caller's node is a cached (or just unlinked) mapping's.
        let n = unsafe { &*node };
        let len = n.len;
        let (gauge, stat) = match (n.discarded, n.segment) {
            _ if n.pinned => (&mut self.pinned, &stats::CACHE_RESERVE),
            (true, _) => (&mut self.discarded, &stats::CACHE_DISCARDED),
            (false, true) => (&mut self.resident, &stats::CACHE_KEPT_SEGMENTS),
            (false, false) => (&mut self.resident, &stats::CACHE_KEPT_LARGE),
        };
        if add {
            *gauge += len;
            stats::add(stat, len);
        } else {
            *gauge -= len;
            stats::lower(stat, len);
        }
    }

    /// Unlinks the node that `link` points to and returns it.
    unsafe fn unlink(&mut self, link: *mut *mut Node) -> *mut Node {
        // SAFETY: `link` points into the list, at a node.
        unsafe {
            let node = *link;
            *link = (*node).next;
            self.count(node, false);
            stats::lower(&stats::SEGMENTS_CACHED, 1);
            node
        }
    }

    /// Links `node` (a mapping's node, filled in) in front.
    unsafe fn push(&mut self, node: *mut Node) {
        // SAFETY: the node lies in a retired mapping the caller gives to the list.
        unsafe {
            (*node).next = self.head;
            self.head = node;
            self.count(node, true);
        }
        stats::add(&stats::SEGMENTS_CACHED, 1);
    }

    /// The link to the node that `better` prefers to every other among those for which
    /// `fits`.
    unsafe fn find(
        &mut self,
        fits: impl Fn(&Node) -> bool,
        better: impl Fn(&Node, &Node) -> bool,
    ) -> Option<*mut *mut Node> {
        let mut best: Option<*mut *mut Node> = None;
        let mut link: *mut *mut Node = &mut self.head;
        // SAFETY: every node in the list is a live mapping owned by the cache.
        unsafe {
            while !(*link).is_null() {
                let node = &**link;
                if fits(node) && best.is_none_or(|b| better(node, &**b)) {
                    best = Some(link);
                }
                link = &mut (**link).next;
            }
        }
        best
    }
}

/// Takes the shortest cached mapping of at least `min` bytes (only among those whose pages
/// are kept if `kept`); one longer than `max` is cut after `min` rounded up to 2 MiB, the
/// rest staying cached.
pub(crate) unsafe fn take(min: usize, max: usize, kept: bool) -> Option<Mapping> {
    purge(false);
    let mut list = CACHE.lock();
    // SAFETY: the node found is a cached mapping, ours to hand out once unlinked.
    unsafe {
        let fits = |n: &Node| n.len >= min && !(kept && n.discarded);
        // The shortest; of equal ones, the one with the most pages already touched, so that a
        // heap emptied and filled again faults no new pages while touched ones wait.
        let better = |a: &Node, b: &Node| {
            (a.len, core::cmp::Reverse(a.touched.count_ones()))
                < (b.len, core::cmp::Reverse(b.touched.count_ones()))
        };
        let link = list.find(fits, better)?;
        let node = list.unlink(link);
        let (freed_at, huge, segment, pinned) = (
            (*node).freed_at,
            (*node).huge,
            (*node).segment,
            (*node).pinned,
        );
        let mut m = mapping(node);
        let cut = min.next_multiple_of(SEGMENT_SIZE);
        if m.len > max && cut + MIN_PIECE <= m.len {
            let rest_base = m.base.add(cut);
            if !m.zeroed {
                clear_header(rest_base);
            }
            let rest = node_of(rest_base);
            rest.write(Node {
                next: ptr::null_mut(),
                len: m.len - cut,
                freed_at,
                huge_from: 0,
                huge,
                touched: 0,
                discarded: m.zeroed,
                segment,
                pinned,
            });
            list.push(rest);
            m.len = cut;
            if m.huge_from >= cut {
                m.huge_from = 0;
            }
        }
        drop(list);
        registry::mark(m.base, m.len);
        Some(m)
    }
}

/// Takes the cached empty segment with the most touched slices whose pages are kept (at least
/// `min` and at most `max` bytes long), if any has touched slices.
pub(crate) unsafe fn take_warm(min: usize, max: usize) -> Option<Mapping> {
    let mut list = CACHE.lock();
    // SAFETY: as in `take`.
    unsafe {
        let fits = |n: &Node| (min..=max).contains(&n.len) && !n.discarded && n.touched != 0;
        let link = list.find(fits, |a, b| a.touched.count_ones() > b.touched.count_ones())?;
        let m = mapping(list.unlink(link));
        drop(list);
        registry::mark(m.base, m.len);
        Some(m)
    }
}

/// A piece cut from a mapping (at a 2 MiB boundary) has block data where its header would be:
/// cleared, it reads as a fresh mapping's, which a segment needs.
unsafe fn clear_header(p: *mut u8) {
    // SAFETY: the caller owns the piece, at least a header long.
    unsafe { p.write_bytes(0, HEADER_SIZE) };
}

/// Retires the piece `[p, p+len)` cut from a mapping whose pages are kept (`large`'s
/// gathering), `p` on a 2 MiB boundary; unmaps it if too short to be of use.
pub(crate) unsafe fn put_piece(p: *mut u8, len: usize) {
    // SAFETY: the caller gives up the piece.
    unsafe {
        if len < MIN_PIECE {
            return release(p, len);
        }
        clear_header(p);
        put(p, len, 0);
    }
}

/// Takes the longest cached mapping of at least `min` and fewer than `below` bytes whose
/// pages are kept, outside the reserve, for the caller to grow or move.
pub(crate) unsafe fn take_shorter(min: usize, below: usize) -> Option<Mapping> {
    let mut list = CACHE.lock();
    // SAFETY: as in `take`.
    unsafe {
        let fits = |n: &Node| n.len >= min && n.len < below && !n.discarded && !n.pinned;
        let link = list.find(fits, |a, b| a.len > b.len)?;
        Some(mapping(list.unlink(link)))
    }
}

/// The mapping of an unlinked node, which is cleared.
unsafe fn mapping(node: *mut Node) -> Mapping {
    // SAFETY: the caller owns the node's mapping.
    unsafe {
        let m = Mapping {
            base: base_of(node),
            len: (*node).len,
            huge_from: (*node).huge_from,
            huge: (*node).huge,
            touched: if (*node).discarded {
                0
            } else {
                (*node).touched
            },
            zeroed: (*node).discarded,
        };
        node.write_bytes(0, 1);
        m
    }
}

/// Retires the mapping `[p, p+len)` of a large block, advised for huge pages from
/// `huge_from` (see [`Mapping`]); unmaps it at once if the purge delay is 0 (unless it lies
/// in the reserve).
pub(crate) unsafe fn put(p: *mut u8, len: usize, huge_from: usize) {
    // SAFETY: the caller gives up the mapping.
    unsafe { retire(p, len, huge_from, false, 0, false) }
}

/// Retires the mapping `[p, p+len)` of an empty segment, advised for huge pages whole if
/// `huge`, whose slices `touched` were claimed since it was mapped; as [`put`].
pub(crate) unsafe fn put_segment(p: *mut u8, len: usize, huge: bool, touched: u32) {
    // SAFETY: the caller gives up the mapping.
    unsafe { retire(p, len, 0, huge, touched, true) }
}

unsafe fn retire(
    p: *mut u8,
    len: usize,
    huge_from: usize,
    huge: bool,
    touched: u32,
    segment: bool,
) {
    let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
    if delay == 0 && !reserved(p) {
        // SAFETY: the mapping is ours and no longer referenced.
        return unsafe { release(p, len) };
    }
    let now = os::now_ms();
    let victims = {
        let mut list = CACHE.lock();
        // SAFETY: the caller gives us the whole mapping; bytes in its header become the node.
        unsafe {
            let node = node_of(p);
            node.write(Node {
                next: ptr::null_mut(),
                len,
                freed_at: now,
                huge_from,
                huge,
                touched,
                discarded: false,
                segment,
                pinned: reserved(p),
            });
            list.push(node);
        }
        // In use, this mapping included, is highest just before a free.
        list.peak = list.peak.max(in_use() + len);
        list.next_purge = list.next_purge.min(now + delay);
        over_cap(&mut list)
    };
    // SAFETY: the victims were unlinked under the lock and are owned here.
    unsafe { discard_all(victims) };
    purge(false);
}

/// Unlinks the oldest mappings whose pages are kept until the rest fit the cap; the caller
/// returns their pages. So the kept bytes never exceed the cap once the lock is released.
fn over_cap(list: &mut List) -> *mut Node {
    let cap = config::CACHE_BYTES
        .load(Ordering::Relaxed)
        .max(list.peak.saturating_sub(in_use()));
    let mut victims: *mut Node = ptr::null_mut();
    if list.resident <= cap {
        return victims;
    }
    // Newest first: the kept bytes past the cap are the oldest ones.
    let mut kept = 0;
    let mut link: *mut *mut Node = &mut list.head;
    // SAFETY: nodes are live mappings owned by the list.
    unsafe {
        while !(*link).is_null() {
            let node = *link;
            if !(*node).discarded && !(*node).pinned {
                kept += (*node).len;
                if kept > cap {
                    list.unlink(link);
                    (*node).next = victims;
                    victims = node;
                    continue;
                }
            }
            link = &mut (*node).next;
        }
    }
    victims
}

/// Returns the pages of every mapping on the unlinked chain `nodes` and caches them again.
unsafe fn discard_all(mut nodes: *mut Node) {
    // SAFETY: the chain's mappings are owned by the caller; none is in the list meanwhile.
    unsafe {
        while !nodes.is_null() {
            let next = (*nodes).next;
            let base = base_of(nodes);
            os::discard(base.add(HEADER_SIZE), (*nodes).len - HEADER_SIZE);
            (*nodes).discarded = true;
            stats::add(&stats::PURGED, 1);
            let mut list = CACHE.lock();
            list.push(nodes);
            let unmap_at = (*nodes).freed_at + unmap_delay();
            list.next_purge = list.next_purge.min(unmap_at);
            drop(list);
            nodes = next;
        }
    }
}

fn unmap_delay() -> u64 {
    config::PURGE_DELAY_MS.load(Ordering::Relaxed) * UNMAP_AFTER_DELAYS
}

/// Applies the decay: returns the pages of mappings cached for the purge delay and unmaps
/// those cached for [`UNMAP_AFTER_DELAYS`] delays (`all`: unmaps every mapping now).
pub(crate) fn purge(all: bool) {
    let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
    let now = os::now_ms();
    let mut expired: *mut Node = ptr::null_mut();
    let mut old: *mut Node = ptr::null_mut();
    {
        let mut list = CACHE.lock();
        if !all && now < list.next_purge {
            return;
        }
        let mut next_purge = u64::MAX;
        let mut link: *mut *mut Node = &mut list.head;
        // SAFETY: nodes are live mappings owned by the list.
        unsafe {
            while !(*link).is_null() {
                let node = *link;
                let age = now.saturating_sub((*node).freed_at);
                let chain = if (*node).pinned {
                    link = &mut (*node).next;
                    continue;
                } else if all || age >= delay * UNMAP_AFTER_DELAYS {
                    &mut expired
                } else if !(*node).discarded && age >= delay {
                    &mut old
                } else {
                    let due = if (*node).discarded {
                        delay * UNMAP_AFTER_DELAYS
                    } else {
                        delay
                    };
                    next_purge = next_purge.min((*node).freed_at + due);
                    link = &mut (*node).next;
                    continue;
                };
                list.unlink(link);
                (*node).next = *chain;
                *chain = node;
            }
        }
        list.next_purge = next_purge;
        if !old.is_null() || !expired.is_null() {
            // Unused for a delay: the peak starts again from what is left.
            list.peak = in_use() + list.resident;
        }
    }
    // SAFETY: both chains were unlinked above and are owned by this function.
    unsafe {
        discard_all(old);
        while !expired.is_null() {
            let next = (*expired).next;
            stats::add(&stats::PURGED, 1);
            release(base_of(expired), (*expired).len);
            expired = next;
        }
    }
}

unsafe fn release(p: *mut u8, len: usize) {
    registry::clear(p, len);
    // SAFETY: the caller owns the mapping.
    unsafe { os::unmap(p, len) };
}
