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
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
/// (`segment.rs` checks that the segment's descriptor ends before it.)
pub(crate) const NODE_OFFSET: usize = HEADER_SIZE - 128;
const _: () = assert!(core::mem::size_of::<Node>() <= HEADER_SIZE - NODE_OFFSET);

/// Bins by length, eight to each power of two from [`SMALLEST_BIN`] (TLSF's mapping), one
/// set for mappings whose pages are kept and one for those whose pages were returned: every
/// mapping in a bin is shorter than every one in the next, so a search for the shortest
/// mapping long enough reads one bin, or the first holding one above it, and of those at
/// most [`SEARCH`] candidates, not every cached mapping (each a header on its own page: with
/// 16 threads freeing and taking large blocks and 400 mappings cached, that walk under the
/// lock made `mstress 16 50 25` 14x slower than tcmalloc on 16 cores).
const SUB_SHIFT: u32 = 3;
/// Lengths below this share the first bin.
const SMALLEST_BIN: u32 = 17;
const BINS: usize = ((usize::BITS - SMALLEST_BIN) << SUB_SHIFT) as usize;
/// A search settles for the best of this many mappings that fit: the lock is held for a
/// bounded time, and mappings in one bin differ in length by at most an eighth.
const SEARCH: usize = 8;

/// The bin of mappings `len` bytes long.
fn bin(len: usize) -> usize {
    let len = len.max(1 << SMALLEST_BIN);
    let log = usize::BITS - 1 - len.leading_zeros();
    let sub = (len >> (log - SUB_SHIFT)) & ((1 << SUB_SHIFT) - 1);
    (((log - SMALLEST_BIN) << SUB_SHIFT) as usize) + sub
}

struct Node {
    /// Neighbours in the bin of its length (null at either end).
    bin_prev: *mut Node,
    bin_next: *mut Node,
    /// Neighbours in the list of every cached mapping, newest first (null at either end);
    /// `newer` also chains mappings unlinked together for a caller.
    newer: *mut Node,
    older: *mut Node,
    len: usize,
    freed_at: u64,
    huge_from: usize,
    /// An empty segment's slices claimed since it was mapped (their pages were touched and
    /// are kept while its pages are).
    touched: u32,
    /// The whole mapping is advised for huge pages (an empty segment's).
    huge: bool,
    /// Its pages (after the header area) were returned: they read as zeros.
    discarded: bool,
    /// It was an empty segment (for the statistics).
    segment: bool,
    /// It lies in the reserve.
    pinned: bool,
    /// Everything after its header area is inaccessible (see [`Mapping::sealed`]).
    sealed: bool,
}

impl Node {
    /// A retired mapping's node, not yet linked.
    fn new(len: usize, freed_at: u64, huge_from: usize, huge: bool, touched: u32) -> Node {
        Node {
            bin_prev: ptr::null_mut(),
            bin_next: ptr::null_mut(),
            newer: ptr::null_mut(),
            older: ptr::null_mut(),
            len,
            freed_at,
            huge_from,
            touched,
            huge,
            discarded: false,
            segment: false,
            pinned: false,
            sealed: false,
        }
    }
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
    /// Everything after the header area is inaccessible: a large block's mapping that left
    /// the quarantine, whose next guarded block needs only its own pages opened, its guard
    /// pages being already in place (see `large::alloc`).
    pub sealed: bool,
}

/// The cached mappings: each is in the bin of its length and in the list by age.
pub(crate) struct List {
    /// Each bin's mappings, newest first: `bins[0]` those whose pages are kept, `bins[1]`
    /// those whose pages were returned.
    bins: [[*mut Node; BINS]; 2],
    /// The newest and the oldest cached mapping (null when none is).
    newest: *mut Node,
    oldest: *mut Node,
    /// Bytes of cached mappings whose pages are kept (not discarded), outside the reserve.
    resident: usize,
    /// Bytes of cached mappings whose pages were returned.
    discarded: usize,
    /// Bytes of the reserve cached.
    pinned: usize,
    /// The recent peak of the bytes in use (see the module's comment and [`in_use`]).
    peak: usize,
}

// SAFETY: the nodes are owned by the list and only touched under its lock.
unsafe impl Send for List {}

pub(crate) static CACHE: SpinLock<List> = SpinLock::new(List::EMPTY);

/// No mapping needs purging before this time (`os::now_ms`): read without the lock, so that
/// the check made at each take and retirement costs no lock; written under it.
static NEXT_PURGE: AtomicU64 = AtomicU64::new(u64::MAX);

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
        put(p, len, 0, false);
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
    /// No mapping cached.
    const EMPTY: List = List {
        bins: [[ptr::null_mut(); BINS]; 2],
        newest: ptr::null_mut(),
        oldest: ptr::null_mut(),
        resident: 0,
        discarded: 0,
        pinned: 0,
        peak: 0,
    };

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

    /// Unlinks `node` from its bin and from the list by age, and returns it; its links are
    /// stale until [`List::push`] writes them again (callers that chain unlinked nodes set
    /// `newer` themselves).
    unsafe fn unlink(&mut self, node: *mut Node) -> *mut Node {
        // SAFETY: `node` is cached, so linked in both lists, whose neighbours are cached too.
        unsafe {
            let n = &mut *node;
            match n.bin_prev.as_mut() {
                Some(prev) => prev.bin_next = n.bin_next,
                None => self.bins[n.discarded as usize][bin(n.len)] = n.bin_next,
            }
            if let Some(next) = n.bin_next.as_mut() {
                next.bin_prev = n.bin_prev;
            }
            match n.newer.as_mut() {
                Some(newer) => newer.older = n.older,
                None => self.newest = n.older,
            }
            match n.older.as_mut() {
                Some(older) => older.newer = n.newer,
                None => self.oldest = n.newer,
            }
            self.count(node, false);
        }
        stats::lower(&stats::SEGMENTS_CACHED, 1);
        node
    }

    /// Links `node` (a mapping's node, filled in and unlinked) as the newest.
    unsafe fn push(&mut self, node: *mut Node) {
        // SAFETY: the node lies in a retired mapping the caller gives to the list.
        unsafe {
            let head = &mut self.bins[(*node).discarded as usize][bin((*node).len)];
            (*node).bin_prev = ptr::null_mut();
            (*node).bin_next = *head;
            if let Some(next) = head.as_mut() {
                next.bin_prev = node;
            }
            *head = node;
            (*node).newer = ptr::null_mut();
            (*node).older = self.newest;
            match self.newest.as_mut() {
                Some(newest) => newest.newer = node,
                None => self.oldest = node,
            }
            self.newest = node;
            self.count(node, true);
        }
        stats::add(&stats::SEGMENTS_CACHED, 1);
    }

    /// The node that `better` prefers to every other for which `fits`, among the first
    /// [`SEARCH`] that fit in the bins `bins` (a set, kept or returned, and a bin), read in
    /// that order.
    unsafe fn find(
        &self,
        bins: impl IntoIterator<Item = (usize, usize)>,
        fits: impl Fn(&Node) -> bool,
        better: impl Fn(&Node, &Node) -> bool,
    ) -> Option<*mut Node> {
        let mut best: Option<*mut Node> = None;
        let mut seen = 0;
        for (set, b) in bins {
            let mut node = self.bins[set][b];
            // SAFETY: every node in a bin is a live mapping owned by the cache.
            unsafe {
                while let Some(n) = node.as_ref() {
                    if fits(n) {
                        if best.is_none_or(|b| better(n, &*b)) {
                            best = Some(node);
                        }
                        seen += 1;
                        if seen == SEARCH {
                            return best;
                        }
                    }
                    node = n.bin_next;
                }
            }
        }
        best
    }

    /// A shortest mapping of at least `min` bytes (whose pages are kept if `kept`); of equal
    /// ones, one whose pages are kept, then one with the most pages already touched, so that
    /// a heap emptied and filled again faults no new pages while touched ones wait.
    unsafe fn shortest(&self, min: usize, kept: bool) -> Option<*mut Node> {
        let sets: &[usize] = if kept { &[0] } else { &[0, 1] };
        let fits = |n: &Node| n.len >= min;
        let better = |a: &Node, b: &Node| {
            let key = |n: &Node| {
                (
                    n.len,
                    n.discarded,
                    core::cmp::Reverse(n.touched.count_ones()),
                )
            };
            key(a) < key(b)
        };
        // Every mapping in a bin is shorter than every one in the next: the shortest long
        // enough lies in the first bin holding one.
        (bin(min)..BINS).find_map(|b| {
            // SAFETY: as in `find`.
            unsafe { self.find(sets.iter().map(|&set| (set, b)), fits, better) }
        })
    }

    /// The empty segment with the most touched slices among those whose pages are kept, `min`
    /// to `max` bytes long, if any has touched slices.
    unsafe fn warmest(&self, min: usize, max: usize) -> Option<*mut Node> {
        let fits = |n: &Node| (min..=max).contains(&n.len) && n.touched != 0;
        let warmer = |a: &Node, b: &Node| a.touched.count_ones() > b.touched.count_ones();
        // SAFETY: as in `find`.
        unsafe { self.find((bin(min)..=bin(max)).map(|b| (0, b)), fits, warmer) }
    }

    /// A longest mapping of at least `min` and fewer than `below` bytes whose pages are kept,
    /// outside the reserve.
    unsafe fn longest_below(&self, min: usize, below: usize) -> Option<*mut Node> {
        let fits = |n: &Node| n.len >= min && n.len < below && !n.pinned;
        let longer = |a: &Node, b: &Node| a.len > b.len;
        // The longest lies in the last bin holding one.
        (bin(min)..=bin(below)).rev().find_map(|b| {
            // SAFETY: as in `find`.
            unsafe { self.find([(0, b)], fits, longer) }
        })
    }
}

/// Takes a shortest cached mapping of at least `min` bytes (see [`List::shortest`]; only
/// among those whose pages are kept if `kept`); one longer than `max` is cut after `min`
/// rounded up to 2 MiB, the rest staying cached. A sealed one is opened unless `sealed` (the
/// caller opens what it needs).
pub(crate) unsafe fn take(min: usize, max: usize, kept: bool, sealed: bool) -> Option<Mapping> {
    purge(false);
    let mut list = CACHE.lock();
    // SAFETY: the node found is a cached mapping, ours to hand out once unlinked.
    unsafe {
        let found = list.shortest(min, kept)?;
        let node = list.unlink(found);
        let (freed_at, huge, segment, pinned) = (
            (*node).freed_at,
            (*node).huge,
            (*node).segment,
            (*node).pinned,
        );
        let mut m = mapping(node);
        let cut = min.next_multiple_of(SEGMENT_SIZE);
        let rest =
            (m.len > max && cut + MIN_PIECE <= m.len).then(|| (m.base.add(cut), m.len - cut));
        if rest.is_some() {
            m.len = cut;
            if m.huge_from >= cut {
                m.huge_from = 0;
            }
        }
        drop(list);
        if let Some((base, len)) = rest {
            // Its header area lies where the block's pages were: opened, outside the lock.
            if m.sealed {
                os::protect(base, HEADER_SIZE, true);
            }
            if !m.zeroed {
                clear_header(base);
            }
            let node = node_of(base);
            node.write(Node {
                discarded: m.zeroed,
                segment,
                pinned,
                sealed: m.sealed,
                ..Node::new(len, freed_at, 0, huge, 0)
            });
            CACHE.lock().push(node);
        }
        if m.sealed && !sealed {
            open(&mut m);
        }
        registry::mark(m.base, m.len);
        Some(m)
    }
}

/// Makes everything after the header area of the sealed mapping `m` accessible again.
unsafe fn open(m: &mut Mapping) {
    // SAFETY: the caller owns the mapping.
    unsafe { os::protect(m.base.add(HEADER_SIZE), m.len - HEADER_SIZE, true) };
    m.sealed = false;
}

/// Takes the cached empty segment with the most touched slices (see [`List::warmest`]).
pub(crate) unsafe fn take_warm(min: usize, max: usize) -> Option<Mapping> {
    let mut list = CACHE.lock();
    // SAFETY: as in `take`.
    unsafe {
        let found = list.warmest(min, max)?;
        let m = mapping(list.unlink(found));
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
        put(p, len, 0, false);
    }
}

/// Takes a longest cached mapping of at least `min` and fewer than `below` bytes whose pages
/// are kept, outside the reserve (see [`List::longest_below`]), for the caller to grow or
/// move.
pub(crate) unsafe fn take_shorter(min: usize, below: usize) -> Option<Mapping> {
    let mut list = CACHE.lock();
    // SAFETY: as in `take`.
    unsafe {
        let found = list.longest_below(min, below)?;
        let mut m = mapping(list.unlink(found));
        drop(list);
        if m.sealed {
            open(&mut m);
        }
        Some(m)
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
            sealed: (*node).sealed,
        };
        node.write_bytes(0, 1);
        m
    }
}

/// Retires the mapping `[p, p+len)` of a large block, advised for huge pages from
/// `huge_from` (see [`Mapping`]), `sealed` if everything after its header area is
/// inaccessible; unmaps it at once if the purge delay is 0 (unless it lies in the reserve).
pub(crate) unsafe fn put(p: *mut u8, len: usize, huge_from: usize, sealed: bool) {
    // SAFETY: the caller gives up the mapping.
    unsafe { retire(p, len, huge_from, false, 0, false, sealed) }
}

/// Retires the mapping `[p, p+len)` of an empty segment, advised for huge pages whole if
/// `huge`, whose slices `touched` were claimed since it was mapped; as [`put`].
pub(crate) unsafe fn put_segment(p: *mut u8, len: usize, huge: bool, touched: u32) {
    // SAFETY: the caller gives up the mapping.
    unsafe { retire(p, len, 0, huge, touched, true, false) }
}

unsafe fn retire(
    p: *mut u8,
    len: usize,
    huge_from: usize,
    huge: bool,
    touched: u32,
    segment: bool,
    sealed: bool,
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
                segment,
                pinned: reserved(p),
                sealed,
                ..Node::new(len, now, huge_from, huge, touched)
            });
            list.push(node);
        }
        // In use, this mapping included, is highest just before a free.
        list.peak = list.peak.max(in_use() + len);
        NEXT_PURGE.fetch_min(now + delay, Ordering::Relaxed);
        over_cap(&mut list)
    };
    // SAFETY: the victims were unlinked under the lock and are owned here.
    unsafe { discard_all(victims) };
    purge(false);
}

/// Unlinks the oldest mappings whose pages are kept until the rest fit the cap, chained by
/// `newer`; the caller returns their pages. So the kept bytes never exceed the cap once the
/// lock is released.
fn over_cap(list: &mut List) -> *mut Node {
    let cap = config::CACHE_BYTES
        .load(Ordering::Relaxed)
        .max(list.peak.saturating_sub(in_use()));
    let mut victims: *mut Node = ptr::null_mut();
    let mut node = list.oldest;
    // SAFETY: nodes are live mappings owned by the list.
    unsafe {
        while list.resident > cap && !node.is_null() {
            let newer = (*node).newer;
            if !(*node).discarded && !(*node).pinned {
                list.unlink(node);
                (*node).newer = victims;
                victims = node;
            }
            node = newer;
        }
    }
    victims
}

/// Returns the pages of every mapping on the unlinked chain `nodes` and caches them again.
unsafe fn discard_all(mut nodes: *mut Node) {
    // SAFETY: the chain's mappings are owned by the caller; none is in the list meanwhile.
    unsafe {
        while !nodes.is_null() {
            let next = (*nodes).newer;
            let base = base_of(nodes);
            os::discard(base.add(HEADER_SIZE), (*nodes).len - HEADER_SIZE);
            (*nodes).discarded = true;
            stats::add(&stats::PURGED, 1);
            let mut list = CACHE.lock();
            list.push(nodes);
            NEXT_PURGE.fetch_min((*nodes).freed_at + unmap_delay(), Ordering::Relaxed);
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
    if !all && now < NEXT_PURGE.load(Ordering::Relaxed) {
        return;
    }
    let mut expired: *mut Node = ptr::null_mut();
    let mut old: *mut Node = ptr::null_mut();
    {
        let mut list = CACHE.lock();
        let mut next_purge = u64::MAX;
        let mut node = list.newest;
        // SAFETY: nodes are live mappings owned by the list.
        unsafe {
            while !node.is_null() {
                let older = (*node).older;
                let age = now.saturating_sub((*node).freed_at);
                let chain = if (*node).pinned {
                    node = older;
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
                    node = older;
                    continue;
                };
                list.unlink(node);
                (*node).newer = *chain;
                *chain = node;
                node = older;
            }
        }
        NEXT_PURGE.store(next_purge, Ordering::Relaxed);
        if !old.is_null() || !expired.is_null() {
            // Unused for a delay: the peak starts again from what is left.
            list.peak = in_use() + list.resident;
        }
    }
    // SAFETY: both chains were unlinked above and are owned by this function.
    unsafe {
        discard_all(old);
        while !expired.is_null() {
            let next = (*expired).newer;
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::consts::OS_PAGE;
    use proptest::prelude::*;
    use std::sync::{Mutex, MutexGuard};

    /// Tests that move or read the cache's statistics (`List::count` keeps them) take this,
    /// so that one's mappings never show in another's figures; and the transfer cache's
    /// tests (`free::tests`), so that no `trim` empties it under them.
    static STATISTICS: Mutex<()> = Mutex::new(());

    /// Takes [`STATISTICS`] (a test that panicked while it held it leaves it usable).
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        STATISTICS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A cached mapping of the model: its length, pages returned, pinned, touched slices.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Model {
        len: usize,
        discarded: bool,
        pinned: bool,
        touched: u32,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Put(Model),
        Shortest(usize, bool),
        Warmest(usize, usize),
        LongestBelow(usize, usize),
        EvictOldest,
    }

    fn length() -> impl Strategy<Value = usize> {
        // Page multiples from 64 KiB to 64 MiB, clustered on a few lengths as programs' are.
        prop_oneof![
            (16usize..16384).prop_map(|pages| pages * OS_PAGE),
            prop::sample::select(vec![276 << 10, 1 << 21, 3 << 20, 8 << 20]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (length(), any::<bool>(), prop::bool::weighted(0.1), any::<u32>()).prop_map(
                |(len, discarded, pinned, touched)| Op::Put(Model { len, discarded, pinned, touched })
            ),
            2 => (length(), any::<bool>()).prop_map(|(min, kept)| Op::Shortest(min, kept)),
            1 => (length(), length()).prop_map(|(a, b)| Op::Warmest(a.min(b), a.max(b))),
            1 => (length(), length()).prop_map(|(a, b)| Op::LongestBelow(a.min(b), a.max(b))),
            1 => Just(Op::EvictOldest),
        ]
    }

    /// The node's fields as the model holds them.
    fn seen(node: *mut Node) -> Model {
        // SAFETY: the node is one of the test's, cached or just unlinked.
        let n = unsafe { &*node };
        Model {
            len: n.len,
            discarded: n.discarded,
            pinned: n.pinned,
            touched: n.touched,
        }
    }

    proptest! {
        /// Against a list of the cached mappings, newest first: each search finds one exactly
        /// when one fits, the shortest (longest) within a bin's width of the true one, and
        /// the true one whenever no more than `SEARCH` fit; the gauges hold the sums, and the
        /// list by age holds the model's order.
        #[test]
        fn the_bins_find_what_a_walk_of_every_mapping_finds(
            ops in prop::collection::vec(op(), 1..120)
        ) {
            let _serial = serial();
            let mut list = List::EMPTY;
            // Each mapping's header area, of which the list uses only the node.
            let mut headers: Vec<Box<[u8; HEADER_SIZE]>> = Vec::new();
            let mut model: Vec<(Model, *mut Node)> = Vec::new(); // newest first
            let take = |list: &mut List, model: &mut Vec<(Model, *mut Node)>, found: Option<*mut Node>,
                        want: Option<Model>| {
                prop_assert_eq!(found.is_some(), want.is_some(), "found {:?}, model {:?}", found.map(seen), want);
                if let Some(node) = found {
                    let at = model.iter().position(|&(_, n)| n == node).expect("a cached node");
                    model.remove(at);
                    // SAFETY: the node was found in the list.
                    unsafe { list.unlink(node) };
                }
                Ok(())
            };
            for op in ops {
                // SAFETY: every node handed to the list lives in `headers`, kept to the end.
                unsafe {
                    match op {
                        Op::Put(m) => {
                            let mut header = Box::new([0u8; HEADER_SIZE]);
                            let node = node_of(header.as_mut_ptr());
                            node.write(Node {
                                discarded: m.discarded,
                                pinned: m.pinned,
                                ..Node::new(m.len, 0, 0, false, m.touched)
                            });
                            headers.push(header);
                            list.push(node);
                            model.insert(0, (m, node));
                        }
                        Op::Shortest(min, kept) => {
                            let fit: Vec<Model> = model.iter().map(|&(m, _)| m)
                                .filter(|m| m.len >= min && !(kept && m.discarded)).collect();
                            let best = fit.iter().map(|m| m.len).min();
                            let found = list.shortest(min, kept);
                            if let (Some(node), Some(best)) = (found, best) {
                                let got = seen(node);
                                prop_assert!(got.len >= min && !(kept && got.discarded));
                                prop_assert!(got.len <= best + best / 8, "{} for {}", got.len, best);
                                if fit.len() <= SEARCH {
                                    prop_assert_eq!(got.len, best);
                                }
                            }
                            take(&mut list, &mut model, found, fit.first().copied())?;
                        }
                        Op::Warmest(min, max) => {
                            let fit: Vec<Model> = model.iter().map(|&(m, _)| m)
                                .filter(|m| (min..=max).contains(&m.len) && !m.discarded && m.touched != 0)
                                .collect();
                            let found = list.warmest(min, max);
                            if let Some(node) = found {
                                let got = seen(node);
                                prop_assert!((min..=max).contains(&got.len) && !got.discarded && got.touched != 0);
                                if fit.len() <= SEARCH {
                                    let most = fit.iter().map(|m| m.touched.count_ones()).max();
                                    prop_assert_eq!(Some(got.touched.count_ones()), most);
                                }
                            }
                            take(&mut list, &mut model, found, fit.first().copied())?;
                        }
                        Op::LongestBelow(min, below) => {
                            let fit: Vec<Model> = model.iter().map(|&(m, _)| m)
                                .filter(|m| m.len >= min && m.len < below && !m.discarded && !m.pinned)
                                .collect();
                            let best = fit.iter().map(|m| m.len).max();
                            let found = list.longest_below(min, below);
                            if let (Some(node), Some(best)) = (found, best) {
                                let got = seen(node);
                                prop_assert!(got.len >= min && got.len < below && !got.discarded && !got.pinned);
                                prop_assert!(got.len + got.len / 8 >= best, "{} for {}", got.len, best);
                                if fit.len() <= SEARCH {
                                    prop_assert_eq!(got.len, best);
                                }
                            }
                            take(&mut list, &mut model, found, fit.first().copied())?;
                        }
                        Op::EvictOldest => {
                            let found = list.oldest.as_ref().map(|_| list.oldest);
                            let want = model.last().map(|&(m, _)| m);
                            take(&mut list, &mut model, found, want)?;
                        }
                    }
                }
                let sum = |f: &dyn Fn(&Model) -> bool| model.iter().filter(|(m, _)| f(m)).map(|(m, _)| m.len).sum::<usize>();
                prop_assert_eq!(list.pinned, sum(&|m| m.pinned));
                prop_assert_eq!(list.discarded, sum(&|m| m.discarded && !m.pinned));
                prop_assert_eq!(list.resident, sum(&|m| !m.discarded && !m.pinned));
                let mut by_age = Vec::new();
                let mut node = list.newest;
                while !node.is_null() {
                    by_age.push(node);
                    // SAFETY: a cached node of the test's.
                    node = unsafe { (*node).older };
                }
                prop_assert_eq!(by_age, model.iter().map(|&(_, n)| n).collect::<Vec<_>>());
            }
            while !list.newest.is_null() {
                // SAFETY: a cached node of the test's, unlinked before its header is dropped.
                unsafe { list.unlink(list.newest) };
            }
        }
    }
}
