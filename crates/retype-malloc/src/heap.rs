//! Thread heaps: each thread allocates from its own heap, without locks. A heap keeps, per
//! size class, a queue of pages with free blocks (the first page is the "direct" page the
//! fast path pops from), plus one list of full pages, which a free by another thread takes a
//! page back from through the heap's `notified` stack (see `free`). Here: malloc's slow
//! path; pages moving between their class queue, the full list, the ring of kept pages (see
//! `kept`) and their segment; spills given back to their pages after a while (see `spill`);
//! the batch that counts live bytes; and the checks of a class queue and of the full list,
//! which debug builds run as they change (the full check of a heap is `consistency`'s).
//!
//! Until its first malloc a thread sees a read-only empty heap. Giving it a real one (from
//! `pool`, registering the thread-exit hook) is done above this module, by
//! `global::alloc_slow`, so that nothing here calls upwards.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::kept::{self, Kept};
use crate::list::{self, Queue};
use crate::page::{
    self, Block, HeapId, Page, FLAG_CHECKED, FLAG_FULL, FLAG_SPILLS, FULL, NOTIFIED, QUEUED,
};
use crate::remote::Batch;
use crate::segment::{self, Segment};
use crate::size_class::{self, CLASSES};
use crate::spill::{self, Spill};
use crate::{config, freed, hardened, os, quarantine, stats, tls, transfer};

#[repr(C)]
pub(crate) struct Heap {
    /// Per slot (see [`size_class`]), the page the fast path pops from: its class's spill's
    /// while that holds blocks (see [`spill`]), else the first page of its class's queue, or
    /// [`EMPTY`] when there is none, for slot 0 and in hardened mode, which sends every
    /// malloc to the slow path.
    pub direct: [*mut Page; CLASSES],
    queues: [Queue<Page>; CLASSES],
    /// Per class, the pages the heap holds (in its queue or full): a class with several gets
    /// larger pages (see [`size_class::span_of`]).
    pub pages: [u32; CLASSES],
    /// Bytes of the pages the heap holds: written by its owner alone (see [`add_held`]), read
    /// by the statistics from any thread.
    held: AtomicUsize,
    full: Queue<Page>,
    pub full_count: usize,
    /// Full pages that received a remote free, pushed by the freeing thread.
    pub notified: AtomicPtr<Page>,
    /// Segments of this heap with free slices.
    pub segments: Queue<Segment>,
    /// Link in the pool's stack of abandoned heaps.
    pub next_in_pool: *mut Heap,
    /// Link in the pool's list of every heap made (heaps are never unmade), set once.
    pub next_made: *mut Heap,
    /// In the pool's stack of abandoned heaps (written under the pool's lock).
    pub pooled: bool,
    /// The thread that parked it while it waited (see `global::park`), until that thread
    /// takes it back: it does so first, even after another thread adopted it meanwhile and
    /// exited. 0: none.
    pub home: usize,
    /// When it was last put in the pool (`os::now_ms`), written by its owner as it gives it up.
    pub pooled_at: u64,
    /// Empty pages kept for reuse, oldest first.
    pub kept: Kept,
    /// Per class from [`spill::FIRST_CLASS`], blocks freed into its full pages (see [`spill`]).
    pub spills: [Spill; spill::CLASSES_SPILLING],
    /// Whether a spill may hold blocks: set by a push, cleared by a look that finds none.
    pub spilling: bool,
    /// The clock (`os::now_ms`, truncated) as last read, which spills are stamped with.
    pub clock: u32,
    /// Spill pushes, and pops by the slow path (the fast path's are not seen), since the
    /// clock was last read.
    ticks: u32,
    /// When the spills were last looked at for stale ones.
    scanned_at: u32,
    /// Hardened mode: blocks this heap's thread freed, not yet reusable (null until needed).
    pub quarantine: *mut quarantine::Ring,
    /// Counted mode: live bytes not yet added to the statistics.
    uncounted: isize,
    /// Blocks its thread freed into a page of another heap, not yet sent (see `remote`).
    pub remote: Batch,
    /// Blocks of class `transferred_class` taken from the transfer cache (see `transfer`):
    /// the free list of a page of its own, which the fast path pops from, as a spill's.
    pub transferred: Page,
    pub transferred_class: usize,
}

struct SyncPage(Page);
// SAFETY: the empty page is never written: it has no free block, so writers take the slow path.
unsafe impl Sync for SyncPage {}
static EMPTY_PAGE: SyncPage = SyncPage(Page::empty());
const EMPTY: *mut Page = ptr::addr_of!(EMPTY_PAGE.0) as *mut Page;

struct SyncHeap(Heap);
// SAFETY: the empty heap is never written (see `current` and `global::alloc_slow`).
unsafe impl Sync for SyncHeap {}
static EMPTY_HEAP: SyncHeap = SyncHeap(Heap {
    direct: [EMPTY; CLASSES],
    queues: [const { Queue::EMPTY }; CLASSES],
    pages: [0; CLASSES],
    held: AtomicUsize::new(0),
    full: Queue::EMPTY,
    full_count: 0,
    notified: AtomicPtr::new(ptr::null_mut()),
    segments: Queue::EMPTY,
    next_in_pool: ptr::null_mut(),
    next_made: ptr::null_mut(),
    pooled: false,
    home: 0,
    pooled_at: 0,
    kept: Kept::EMPTY,
    spills: [const { Spill::empty() }; spill::CLASSES_SPILLING],
    spilling: false,
    clock: 0,
    ticks: 0,
    scanned_at: 0,
    quarantine: ptr::null_mut(),
    uncounted: 0,
    remote: Batch::EMPTY,
    transferred: Page::empty(),
    transferred_class: 0,
});
const EMPTY_HEAP_PTR: *mut Heap = ptr::addr_of!(EMPTY_HEAP.0) as *mut Heap;

/// `heap` as the pages and segments it owns record it.
#[inline(always)]
pub(crate) fn id(heap: *mut Heap) -> *mut HeapId {
    heap.cast()
}

/// The calling thread's heap: the read-only empty heap until its first malloc.
#[inline(always)]
pub(crate) fn current() -> *mut Heap {
    let h = tls::get().cast::<Heap>();
    if h.is_null() {
        EMPTY_HEAP_PTR
    } else {
        h
    }
}

/// Makes `heap` the calling thread's heap (null: none, the thread is exiting).
pub(crate) fn set_current(heap: *mut Heap) {
    tls::set(heap.cast());
}

/// Whether `heap` is the read-only empty heap of a thread that has not allocated yet.
#[inline]
pub(crate) fn is_empty(heap: *mut Heap) -> bool {
    heap == EMPTY_HEAP_PTR
}

/// Makes a new heap with nothing in it at `at`, unused memory of the pool.
pub(crate) unsafe fn make(at: *mut Heap) {
    // SAFETY: `at` is writable and unused; the empty heap is a valid starting state.
    unsafe { ptr::copy_nonoverlapping(EMPTY_HEAP_PTR, at, 1) };
}

/// Bytes of the pages `heap` holds, as its owner last set them (any thread may ask).
pub(crate) fn held(heap: *mut Heap) -> usize {
    // SAFETY: heaps are never unmapped; the field is atomic.
    unsafe { (*heap).held.load(Ordering::Relaxed) }
}

/// Adds `delta` to the bytes of the pages `heap` holds. Its owner alone writes them, so a
/// plain load and store do (as `page::set_flag`'s), which other threads may read meanwhile.
pub(crate) unsafe fn add_held(heap: *mut Heap, delta: isize) {
    // SAFETY: the caller owns `heap`.
    let held = unsafe { &(*heap).held };
    let now = held.load(Ordering::Relaxed).wrapping_add_signed(delta);
    held.store(now, Ordering::Relaxed);
}

/// Calls `each` on every page `heap` holds: those of its class queues, then its full list.
pub(crate) unsafe fn each_page(heap: *mut Heap, mut each: impl FnMut(*mut Page)) {
    // SAFETY: the caller owns `heap` (or holds the pool's lock over a heap in the pool).
    unsafe {
        for q in (*heap).queues.iter().chain(core::iter::once(&(*heap).full)) {
            let mut page = q.first;
            while !page.is_null() {
                each(page);
                page = (*page).links.next;
            }
        }
    }
}

/// The page the fast path of `slot` pops from: a live page of `heap`, or the empty page.
#[inline(always)]
pub(crate) unsafe fn direct(heap: *mut Heap, slot: usize) -> *mut Page {
    // SAFETY: `slot` < CLASSES (the caller's contract); `heap` is live.
    unsafe { *(*heap).direct.get_unchecked(slot) }
}

/// The spill of `class`, if its pages can be of few enough blocks to spill.
pub(crate) unsafe fn spill_of<'a>(heap: *mut Heap, class: usize) -> Option<&'a mut Spill> {
    // SAFETY: the heap is the calling thread's own.
    unsafe {
        (*heap)
            .spills
            .get_mut(class.checked_sub(spill::FIRST_CLASS)?)
    }
}

/// The page the fast path of `class` should pop from: its spill's while that holds blocks,
/// else the first of its queue, if any (none in the modes without a fast path).
unsafe fn direct_of(heap: *mut Heap, class: usize) -> *mut Page {
    if config::no_fast_path() {
        return EMPTY;
    }
    // SAFETY: the heap is the caller's own.
    unsafe {
        if let Some(sp) = spill_of(heap, class).filter(|sp| !sp.is_empty()) {
            return sp.page();
        }
        if !(*heap).transferred.free.is_null() && (*heap).transferred_class == class {
            return &raw mut (*heap).transferred;
        }
        let first = (*heap).queues[class].first;
        if first.is_null() {
            EMPTY
        } else {
            first
        }
    }
}

/// Points the fast path of `class`, at each of its slots, at the first page of its queue.
pub(crate) unsafe fn set_direct(heap: *mut Heap, class: usize) {
    // SAFETY: the heap is the caller's own.
    unsafe {
        let page = direct_of(heap, class);
        for slot in size_class::slots(class) {
            (*heap).direct[slot] = page;
        }
    }
}

/// Moves an exhausted page to the full list. Returns false (and puts it back at the end of
/// its queue) if a remote free arrived meanwhile.
unsafe fn mark_full(heap: *mut Heap, page: *mut Page) -> bool {
    // SAFETY: owner-only lists; the state handshake is with `free::remote_free`.
    unsafe {
        let class = (*page).class as usize;
        (*heap).queues[class].remove(page);
        (*heap).full.push_front(page);
        (*heap).full_count += 1;
        let spills = if spill::fits(page) { FLAG_SPILLS } else { 0 };
        page::set_flag(page, FLAG_FULL | spills, true);
        let _ =
            (*page)
                .full_state
                .compare_exchange(QUEUED, FULL, Ordering::SeqCst, Ordering::Relaxed);
        if (*page).thread_free.load(Ordering::SeqCst).is_null() {
            set_direct(heap, class);
            return true;
        }
        unfull(heap, page);
        false
    }
}

/// Moves a page from the full list to the end of its class queue: by the time allocation
/// reaches it, more of its blocks will have been freed (putting it first would make a page
/// with one free block flip between full and not full on every malloc/free pair).
unsafe fn unfull(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists; `page` is in the full list.
    unsafe {
        let class = (*page).class as usize;
        (*heap).full.remove(page);
        (*heap).full_count -= 1;
        page::set_flag(page, FLAG_FULL | FLAG_SPILLS, false);
        // A NOTIFIED page stays NOTIFIED until the owner drains the notified stack.
        let _ =
            (*page)
                .full_state
                .compare_exchange(FULL, QUEUED, Ordering::SeqCst, Ordering::Relaxed);
        (*heap).queues[class].push_back(page);
        set_direct(heap, class);
    }
}

/// Drains the stack of full pages that received remote frees.
unsafe fn take_notified(heap: *mut Heap) {
    // SAFETY: the owner takes the whole stack; pages on it stay in use (see `retire`).
    unsafe {
        let mut page = list::take_all(&(*heap).notified);
        while !page.is_null() {
            let next = (*page).notified_next;
            (*page).full_state.store(QUEUED, Ordering::SeqCst);
            if (*page).flags.load(Ordering::Relaxed) & FLAG_FULL != 0 {
                unfull(heap, page);
            }
            page = next;
        }
    }
}

/// Full pages looked at for remote frees per page claim.
const SWEEP_STEP: usize = 2;

/// Looks at the first `n` full pages: those that hold remote frees go back to their queues,
/// the others to the back of the full list. Needed because a remote free can race with the
/// owner marking the page full and miss the notification. Each page claim looks at
/// [`SWEEP_STEP`] of them, so every full page is looked at once per as many claims as there
/// are full pages (over the step), and no claim pays for them all. True if a page went back.
unsafe fn sweep(heap: *mut Heap, n: usize) -> bool {
    // SAFETY: owner-only lists.
    unsafe {
        let mut back = false;
        for _ in 0..n.min((*heap).full_count) {
            let page = (*heap).full.first;
            if (*page).thread_free.load(Ordering::Acquire).is_null() {
                (*heap).full.remove(page);
                (*heap).full.push_back(page);
            } else {
                unfull(heap, page);
                back = true;
            }
        }
        os::debug_verify(|| check_full(heap, false, |_| {}));
        back
    }
}

/// The first page of `class` with a free block, after collecting remote frees and moving
/// exhausted pages to the full list; null if none.
unsafe fn find_page(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: owner-only lists and pages.
    unsafe {
        loop {
            let page = (*heap).queues[class].first;
            if page.is_null() {
                return page;
            }
            page::collect(page);
            if (*page).free.is_null() && (*page).capacity < (*page).reserved {
                page::extend(page);
            }
            if !(*page).free.is_null() {
                return page;
            }
            mark_full(heap, page);
        }
    }
}

/// Allocates a block of `class` from `heap` (the calling thread's, not the empty heap) when
/// its direct page has none, or in the modes without a fast path (hardened, counted): from
/// its spill if that holds blocks (the fast path's own, in the default mode); else from the
/// first page of the class if it has a free block, as the fast path would; else takes back
/// pages with remote frees, then the first page of the class with a free block, else a batch
/// of other threads' frees from the transfer cache (see `transfer`), else a fresh page from
/// a segment.
#[inline(always)]
pub(crate) unsafe fn alloc_slow(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: the heap belongs to the calling thread.
    unsafe {
        if let Some(sp) = spill_of(heap, class) {
            if let Some(b) = sp.pop() {
                if sp.is_empty() {
                    set_direct(heap, class);
                }
                tick(heap);
                if config::counted() {
                    count(heap, size_class::block_size(class) as isize);
                }
                return b.cast();
            }
            // A spilling class has one slot, its own number (`size_class::slots`).
            if (*heap).direct[class] == sp.page() {
                // The fast path took the spill's last block: it goes on from the queue.
                set_direct(heap, class);
            }
        }
        // A class is the last of its slots (`size_class::slots`).
        if (*heap).direct[class] == &raw mut (*heap).transferred {
            let p = next_transferred(heap, class);
            if !p.is_null() {
                return p;
            }
        }
        let mut page = (*heap).queues[class].first;
        if page.is_null() || (*page).free.is_null() {
            page = refill(heap, class);
            if page.is_null() {
                return ptr::null_mut();
            }
        }
        let p = if config::hardened() {
            let p = page::pop_checked(page);
            hardened::remember_block(page, p);
            p
        } else {
            page::pop(page)
        };
        if config::counted() {
            count(heap, (*page).block_size as isize);
        }
        p
    }
}

/// The first page of `class`'s queue, or null: secure mode's malloc pops from it (see
/// `secure::alloc`).
#[inline(always)]
pub(crate) unsafe fn first(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: `class` < CLASSES (a class from `size_class`); `heap` is live.
    unsafe { (*heap).queues.get_unchecked(class).first }
}

/// The page of `class` to allocate from when the first one has no free block: as
/// [`alloc_slow`] says; null when out of memory.
unsafe fn refill(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: the heap belongs to the calling thread.
    unsafe {
        if (*heap).spilling {
            read_clock(heap);
        }
        take_notified(heap);
        let mut page = find_page(heap, class);
        if page.is_null() && sweep(heap, SWEEP_STEP) {
            page = find_page(heap, class);
        }
        if page.is_null() {
            let tp = take_transferred(heap, class);
            if !tp.is_null() {
                set_direct(heap, class);
                return tp;
            }
            transfer::expire_if_due(send_home);
            let span = size_class::span_of(class, (*heap).pages[class]);
            page = segment::claim_page(&mut (*heap).segments, id(heap), class, span);
            if page.is_null() {
                return page;
            }
            (*heap).pages[class] += 1;
            add_held(heap, page::span_bytes(page) as isize);
            (*heap).queues[class].push_front(page);
            page::extend(page);
        }
        set_direct(heap, class);
        os::debug_verify(|| check_class(heap, class, false, |_| {}));
        os::debug_verify(|| page::check(page, id(heap)));
        page
    }
}

/// A batch of `class` from the transfer cache as the free list of the heap's page of
/// transferred blocks, if the cache holds one and that page holds none of another class;
/// else null.
unsafe fn take_transferred(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: the heap is the calling thread's; the batch's blocks are freed blocks, counted
    // as used by their pages, given to this heap.
    unsafe {
        let tp = &raw mut (*heap).transferred;
        if config::no_fast_path() || !(*tp).free.is_null() {
            return ptr::null_mut();
        }
        let Some(b) = transfer::CACHE.pop(class) else {
            return ptr::null_mut();
        };
        (*tp).free = b.first;
        let before = core::mem::replace(&mut (*heap).transferred_class, class);
        if before != class {
            // The fast path of the class the page served before may still point at it (it
            // took the page's last block, and that class took no slow path since): it would
            // pop this class's blocks.
            set_direct(heap, before);
        }
        tp
    }
}

/// After the fast path took the last transferred block of `class`: a block of the cache's next
/// batch, if it holds one, without looking at the pages first (a heap that lives on the
/// cache's batches pays a pop per batch, not a look for a page); else null, the fast path
/// pointed back at the class's pages. Out of line: other slow paths do not pay for it.
#[inline(never)]
unsafe fn next_transferred(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: the heap is the calling thread's; the batch's blocks are freed blocks, counted
    // as used by their pages, given to this heap.
    unsafe {
        let tp = &raw mut (*heap).transferred;
        debug_assert_eq!((*heap).transferred_class, class);
        if let Some(b) = transfer::CACHE.pop(class) {
            (*tp).free = b.first;
            return page::pop(tp);
        }
        set_direct(heap, class);
        ptr::null_mut()
    }
}

/// Takes the transferred blocks `heap` holds (see [`take_transferred`]); null if none.
pub(crate) unsafe fn take_transferred_blocks(heap: *mut Heap) -> *mut Block {
    // SAFETY: the heap is the caller's own (or the pool's under its lock).
    unsafe {
        let first = core::mem::replace(&mut (*heap).transferred.free, ptr::null_mut());
        if !first.is_null() {
            set_direct(heap, (*heap).transferred_class);
        }
        first
    }
}

/// Puts the freed blocks `first` to `last`, linked, on the remote list of `page`, which a
/// thread that does not own it freed them into (`free::remote_free`); if the page is full, first on its heap's
/// `notified` stack.
pub(crate) unsafe fn send(page: *mut Page, first: *mut Block, last: *mut Block) {
    // SAFETY: until the blocks are pushed their owner counts them used, so the page and heap
    // stay alive.
    unsafe {
        if (*page).full_state.load(Ordering::SeqCst) == FULL
            && (*page)
                .full_state
                .compare_exchange(FULL, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            let heap = (*page).heap.cast::<Heap>();
            list::push(&(*heap).notified, page, &raw mut (*page).notified_next);
        }
        page::push_remote(page, first, last);
    }
}

/// Sends a batch that waited in the transfer cache to its page's remote list, as if it had
/// never gone there.
pub(crate) fn send_home(b: transfer::Batch) {
    // SAFETY: a batch of the transfer cache is of freed blocks of one page, counted as used by
    // it, linked from `first` to `last`.
    unsafe {
        let page = segment::page_of(segment::of(b.first.cast()), b.first.cast());
        send(page, b.first, b.last);
    }
}

/// Puts `b`, a freed block of `page` (owned by `heap`, the calling thread's), on the page's
/// free list; the page leaves the full list if it was there, and retires if now empty.
#[inline(always)]
pub(crate) unsafe fn give_to_page(heap: *mut Heap, page: *mut Page, b: *mut Block) {
    // SAFETY: `b` is a freed block of `page`, still counted as used.
    unsafe {
        page::push(page, b);
        (*page).used -= 1;
        if (*page).flags.load(Ordering::Relaxed) & FLAG_FULL != 0 || (*page).used == 0 {
            settle(heap, page);
        }
    }
}

/// Puts `page`, the calling thread's, first in its class's queue if it is there (blocks in
/// use, no flag but `FLAG_CHECKED`), so that the class's next mallocs take its free blocks:
/// hardened mode's blocks just out of the quarantine, still cached (see
/// `free::quarantine_or_release`).
pub(crate) unsafe fn to_front(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists; a page in use with no other flag is in its class's queue.
    unsafe {
        if (*page).used == 0 || (*page).flags.load(Ordering::Relaxed) != FLAG_CHECKED {
            return;
        }
        let class = (*page).class as usize;
        let queue = &mut (*heap).queues[class];
        if queue.first != page {
            queue.remove(page);
            queue.push_front(page);
            set_direct(heap, class);
        }
    }
}

/// After its owner's free into `page`, which was full or is now empty: the page leaves the
/// full list, or retires. Out of line, and `extern "C"` (as `retire`), so that secure mode's
/// free (see `secure::free`) ends in a jump to it and sets up no stack frame.
#[inline(never)]
pub(crate) unsafe extern "C" fn settle(heap: *mut Heap, page: *mut Page) {
    // SAFETY: the calling thread owns `heap` and `page`.
    unsafe {
        if (*page).flags.load(Ordering::Relaxed) & FLAG_FULL != 0 {
            unfull(heap, page);
        }
        if (*page).used == 0 {
            retire(heap, page);
        }
    }
}

/// A page whose last block was freed stays if it is the page its class allocates from (so a
/// program that allocates and frees a batch does not claim, carve and release a page every
/// time) or if a remote thread still holds it on the notified stack; else it is kept (see
/// [`kept`]), at the back of its queue, behind the pages that hold blocks.
///
/// `extern "C"`, as `alloc::free_slow`: see `alloc_slow` in the crate root.
pub(crate) unsafe extern "C" fn retire(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists; the page has no live blocks.
    unsafe {
        if (*page).kept || !is_idle(heap, page) {
            return;
        }
        let class = (*page).class as usize;
        let bytes = page::span_bytes(page);
        while let Some(old) = (*heap).kept.make_room(bytes, kept::limit(held(heap))) {
            let_go(heap, old);
        }
        if (*heap).kept.bytes() + bytes > kept::limit(held(heap)) {
            return give_back(heap, page);
        }
        let q = &mut (*heap).queues[class];
        q.remove(page);
        q.push_back(page);
        (*page).kept = true;
        (*heap).kept.push(page, bytes);
    }
}

/// A page out of the ring of kept pages goes back to its segment if it is still idle.
unsafe fn let_go(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists and pages.
    unsafe {
        (*page).kept = false;
        if is_idle(heap, page) {
            give_back(heap, page);
        }
    }
}

/// Whether `page`, in a class queue of `heap`, is empty and not the page its class allocates
/// from, nor held by a remote thread: it may go back to its segment.
unsafe fn is_idle(heap: *mut Heap, page: *mut Page) -> bool {
    // SAFETY: owner-only lists and fields.
    unsafe {
        (*page).used == 0
            && (*page).full_state.load(Ordering::SeqCst) != NOTIFIED
            && (*heap).queues[(*page).class as usize].first != page
    }
}

/// Takes `page`, empty, out of its class queue and gives it back to its segment; its free
/// blocks are checked first where blocks leave the quarantine partly checked (see `freed`).
unsafe fn give_back(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists; the page has no live blocks.
    unsafe {
        if freed::deferred() {
            page::check_freed(page);
        }
        let class = (*page).class as usize;
        (*heap).queues[class].remove(page);
        set_direct(heap, class);
        (*heap).pages[class] -= 1;
        add_held(heap, -(page::span_bytes(page) as isize));
        segment::release_page(&mut (*heap).segments, page);
    }
}

/// Spill pushes and pops between two readings of the clock.
const TICKS_PER_READING: u32 = 256;

/// Counts a spill push (or a pop by the slow path); reads the clock every [`TICKS_PER_READING`].
/// Inlined: the owner's free into a full page of few blocks (`free::free_slow`) ends in it.
#[inline(always)]
pub(crate) unsafe fn tick(heap: *mut Heap) {
    // SAFETY: the heap is the calling thread's own.
    unsafe {
        (*heap).ticks += 1;
        if (*heap).ticks >= TICKS_PER_READING {
            read_clock(heap);
        }
    }
}

/// Reads the clock and, every half purge delay, gives back the spills no malloc took from
/// for a whole delay: their class does not use them, and their pages, once empty, retire
/// and go back to the OS as any others do.
unsafe fn read_clock(heap: *mut Heap) {
    // SAFETY: the heap is the calling thread's own.
    unsafe {
        let now = os::now_ms() as u32;
        (*heap).clock = now;
        (*heap).ticks = 0;
        let delay = config::PURGE_DELAY_MS
            .load(Ordering::Relaxed)
            .min(u32::MAX as u64) as u32;
        if now.wrapping_sub((*heap).scanned_at) < delay / 2 {
            return;
        }
        let last = core::mem::replace(&mut (*heap).scanned_at, now);
        let mut spilling = false;
        for i in 0..spill::CLASSES_SPILLING {
            if (*heap).spills[i].stale(last, now, delay) {
                unspill(heap, spill::FIRST_CLASS + i);
            }
            spilling |= !(*heap).spills[i].is_empty();
        }
        (*heap).spilling = spilling;
    }
}

/// Gives the blocks of the spill of `class` back to their pages.
unsafe fn unspill(heap: *mut Heap, class: usize) {
    // SAFETY: the spill's blocks are freed blocks of the heap's own pages, counted as used.
    unsafe {
        let Some(sp) = spill_of(heap, class) else {
            return;
        };
        let mut b = sp.take();
        set_direct(heap, class);
        while !b.is_null() {
            let next = (*b).next;
            give_to_page(heap, segment::page_of(segment::of(b.cast()), b.cast()), b);
            b = next;
        }
    }
}

/// Gives back the blocks of `heap`'s spills and the empty pages it keeps (`heap` is the
/// calling thread's): `malloc_trim`.
pub(crate) unsafe fn trim(heap: *mut Heap) {
    // SAFETY: the heap is the calling thread's own.
    unsafe {
        for i in 0..spill::CLASSES_SPILLING {
            if !(*heap).spills[i].is_empty() {
                unspill(heap, spill::FIRST_CLASS + i);
            }
        }
        (*heap).spilling = false;
        while let Some(page) = (*heap).kept.pop() {
            let_go(heap, page);
        }
    }
}

/// Live bytes a heap adds up before it adds them to the statistics' count.
const COUNT_BATCH: usize = 64 * 1024;

/// Counted mode: adds `delta` live bytes through `heap`'s batch (the empty heap of a thread
/// that never allocated adds them at once), so threads do not contend on every call.
pub(crate) unsafe fn count(heap: *mut Heap, delta: isize) {
    if is_empty(heap) {
        return stats::live(false, delta);
    }
    // SAFETY: the heap is the calling thread's own.
    unsafe {
        (*heap).uncounted += delta;
        if (*heap).uncounted.unsigned_abs() >= COUNT_BATCH {
            stats::live(false, (*heap).uncounted);
            (*heap).uncounted = 0;
        }
    }
}

/// Counted mode: adds the live bytes `heap` has not added yet to the statistics (when its
/// thread exits or parks it).
pub(crate) unsafe fn settle_count(heap: *mut Heap) {
    // SAFETY: the heap belongs to the calling thread.
    unsafe {
        stats::live(false, (*heap).uncounted);
        (*heap).uncounted = 0;
    }
}

/// Gives back every empty page of `heap` (a heap in the pool, or the calling thread's at
/// `malloc_trim`), after collecting the frees of other threads into its pages.
pub(crate) unsafe fn release_empty_pages(heap: *mut Heap) {
    // SAFETY: the heap is the caller's own, or the pool's under its lock.
    unsafe {
        settle_count(heap);
        trim(heap);
        take_notified(heap);
        sweep(heap, usize::MAX);
        for class in 1..CLASSES {
            let mut page = (*heap).queues[class].first;
            if page.is_null() {
                // No page: what took its last one pointed the fast path elsewhere. Most
                // classes of a heap have none, and a thread's exit walks every class of its
                // heap and of the heaps in the pool (`transient 2 2000 500`: a fifth of its
                // instructions were this loop's `set_direct`).
                continue;
            }
            while !page.is_null() {
                let next = (*page).links.next;
                page::collect(page);
                if (*page).used == 0 && (*page).full_state.load(Ordering::SeqCst) != NOTIFIED {
                    give_back(heap, page);
                }
                page = next;
            }
            set_direct(heap, class);
        }
    }
}

/// Checks the queue of `class`: its links (`list::Queue::check`); every page a page in use of
/// this heap (`page::check_fields`, or with `deep` `page::check`, free list included) of this
/// class and not marked full; and the direct page its first (or the empty page). Calls `each`
/// on every page; returns how many there are.
pub(crate) unsafe fn check_class(
    heap: *mut Heap,
    class: usize,
    deep: bool,
    mut each: impl FnMut(*mut Page),
) -> Result<usize, &'static str> {
    // SAFETY: the calling thread owns `heap`, its queues and pages.
    unsafe {
        let q = &(*heap).queues[class];
        let n = q.check(|p| {
            if deep {
                page::check(p, id(heap))?;
            } else {
                page::check_fields(p, id(heap))?;
            }
            if (*p).class as usize != class {
                return Err("heap: a page in the queue of another class");
            }
            if (*p).flags.load(Ordering::Relaxed) & (FLAG_FULL | FLAG_SPILLS) != 0
                || (*p).full_state.load(Ordering::SeqCst) == FULL
            {
                return Err("heap: a page marked full in a class queue");
            }
            each(p);
            Ok(())
        })?;
        if !size_class::is_class(class) {
            if n != 0 {
                return Err("heap: a page in the queue of a number no size maps to");
            }
            return Ok(0);
        }
        // Or the page of an empty spill: the fast path took its last block, and the next
        // malloc of the class moves on (see `alloc_slow`).
        let first = direct_of(heap, class);
        let spent = spill_of(heap, class).map_or(EMPTY, |sp| sp.page());
        // Or the page of transferred blocks, whose last one the fast path took.
        let transferred = if (*heap).transferred_class == class {
            &raw mut (*heap).transferred
        } else {
            EMPTY
        };
        if size_class::slots(class)
            .any(|slot| ![first, spent, transferred].contains(&(*heap).direct[slot]))
        {
            return Err("heap: the direct page is not the first of its queue");
        }
        Ok(n)
    }
}

/// Checks the full list as [`check_class`] a class queue: every page marked full (its state
/// FULL, or NOTIFIED by a remote free), and `full_count` its length.
pub(crate) unsafe fn check_full(
    heap: *mut Heap,
    deep: bool,
    mut each: impl FnMut(*mut Page),
) -> Result<usize, &'static str> {
    // SAFETY: the calling thread owns `heap`, its full list and pages.
    unsafe {
        let n = (*heap).full.check(|p| {
            if deep {
                page::check(p, id(heap))?;
            } else {
                page::check_fields(p, id(heap))?;
            }
            if (*p).flags.load(Ordering::Relaxed) & FLAG_FULL == 0
                || (*p).full_state.load(Ordering::SeqCst) == QUEUED
            {
                return Err("heap: a page in the full list not marked full");
            }
            each(p);
            Ok(())
        })?;
        if n != (*heap).full_count {
            return Err("heap: full_count is not the length of the full list");
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::SLICE_SIZE;
    use crate::kept::{KEEP_BYTES, KEEP_SHARE};

    /// A class the heap holds few pages of gets pages of eight blocks; once it holds
    /// [`size_class::BUSY_PAGES`], of sixteen; and the count goes down as pages go back.
    #[test]
    fn busy_classes_get_larger_pages() {
        let size = 16 * 1024;
        let class = size_class::class_of(size);
        let span = |p: *mut u8| {
            // SAFETY: a live block of this thread's heap.
            unsafe { (*segment::page_of(segment::of(p), p)).span as usize }
        };
        // The thread's heap may be one adopted from an earlier test's thread, holding pages
        // of the class already: what is certain is what happens from here.
        // SAFETY: blocks of this thread's heap, each freed once below.
        let first = unsafe { crate::malloc(size) };
        // SAFETY: the heap is this thread's own (made by the malloc above at the latest).
        let held = || unsafe { (*current()).pages[class] };
        let before = held();
        // SAFETY: as for `first`.
        let more = (1..20 * 8).map(|_| unsafe { crate::malloc(size) });
        let blocks: Vec<*mut u8> = core::iter::once(first).chain(more).collect();
        let spans: Vec<usize> = blocks.iter().map(|&p| span(p)).collect();
        if before == 1 {
            assert_eq!(spans[0], size_class::span_of(class, 0), "{spans:?}");
        }
        let last = *spans.last().unwrap();
        assert_eq!(
            last,
            size_class::span_of(class, size_class::BUSY_PAGES),
            "{spans:?}"
        );
        assert!(last > size_class::span_of(class, 0));
        assert!(held() >= size_class::BUSY_PAGES, "{}", held());
        // SAFETY: each block is live and freed once; the heap is this thread's own.
        unsafe {
            blocks.iter().for_each(|&p| crate::free(p));
            trim(current());
        }
        assert!(held() <= before, "pages went back: {} left", held());
    }

    /// Pages emptied stay with the heap and serve the next mallocs of their class without
    /// new claims, up to [`KEEP_BYTES`] and a [`KEEP_SHARE`]th of the heap's pages; `trim`
    /// gives them back. (Blocks whose pages hold too many to spill: see the next test.)
    #[test]
    fn emptied_pages_are_kept_for_reuse_up_to_a_bound() {
        let size = 1024;
        let class = size_class::class_of(size);
        let per_page = size_class::span_of(class, 0) * SLICE_SIZE / size;
        assert!(per_page > spill::PAGE_BLOCKS as usize);
        let alloc = |n: usize| -> Vec<*mut u8> {
            // SAFETY: blocks of this thread's heap, each freed once below.
            (0..n).map(|_| unsafe { crate::malloc(size) }).collect()
        };
        // SAFETY: each block is live and freed once.
        let free = |blocks: Vec<*mut u8>| blocks.iter().for_each(|&p| unsafe { crate::free(p) });
        // Live blocks enough for the heap's share to allow the rounds below.
        let base = alloc(4 * 2 * KEEP_BYTES / size);
        // SAFETY: the heap is this thread's own (made by the mallocs above at the latest).
        let pages = || unsafe { (*current()).pages[class] as usize };
        let before = pages();
        let round = |n: usize| {
            let blocks = alloc(n);
            let during = pages();
            free(blocks);
            during
        };
        let during = round(6 * per_page);
        assert!(during >= before + 3, "{before} {during}");
        assert_eq!(pages(), during, "emptied pages stay");
        assert_eq!(round(6 * per_page), during, "and serve the next round");

        let smallest = size_class::span_of(class, 0) * SLICE_SIZE;
        round(4 * KEEP_BYTES / size);
        // The ring's pages, and the page the class allocates from, which stays.
        assert!(
            pages() <= before + KEEP_BYTES / smallest + 1,
            "at most KEEP_BYTES stay: {before} {}",
            pages()
        );
        crate::check_consistency();
        free(base);
        assert!(
            // SAFETY: as above.
            unsafe { (*current()).kept.bytes() } <= held(current()) / KEEP_SHARE,
            "a heap emptied keeps at most its share"
        );
        // SAFETY: the heap is this thread's own.
        unsafe { trim(current()) };
        assert!(
            pages() <= before,
            "trim gives them back: {before} {}",
            pages()
        );
    }
}
