//! Thread heaps: each thread allocates from its own heap, without locks. A heap keeps, per
//! size class, a queue of pages with free blocks (the first page is the "direct" page the
//! fast path pops from), plus one list of full pages.
//!
//! A free by the owning thread is a push onto the page's free list. A free by another thread
//! is a compare-and-swap onto the page's `thread_free` list; if the page was in the full list,
//! that thread also puts the page on the heap's `notified` stack so the owner moves it back.
//!
//! When a thread exits its heap is *abandoned*: its empty pages are given back and the heap,
//! with the pages still in use, waits in a pool until a new thread adopts it whole.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::lock::SpinLock;
use crate::page::{self, Block, Page, FLAG_FULL, FULL, NOTIFIED, QUEUED};
use crate::segment;
use crate::size_class::{self, CLASSES};
use crate::{config, global, hardened, os, stats, tls};

#[derive(Clone, Copy)]
struct Queue {
    first: *mut Page,
    last: *mut Page,
}

const EMPTY_QUEUE: Queue = Queue {
    first: ptr::null_mut(),
    last: ptr::null_mut(),
};

#[repr(C)]
pub(crate) struct Heap {
    /// Per class, the page the fast path pops from ([`EMPTY_PAGE`] when there is none or in
    /// hardened mode, which sends every malloc to the slow path).
    pub direct: [*mut Page; CLASSES],
    queues: [Queue; CLASSES],
    full: Queue,
    full_count: usize,
    claims_since_sweep: usize,
    /// Full pages that received a remote free, pushed by the freeing thread.
    notified: AtomicPtr<Page>,
    /// Segments of this heap with free slices.
    pub segments: *mut segment::Segment,
    next_in_pool: *mut Heap,
}

struct SyncPage(Page);
// SAFETY: the empty page is never written: its free list is null, so every path that would
// write to it takes the slow path first.
unsafe impl Sync for SyncPage {}
static EMPTY_PAGE: SyncPage = SyncPage(Page::empty());
const EMPTY: *mut Page = ptr::addr_of!(EMPTY_PAGE.0) as *mut Page;

struct SyncHeap(Heap);
// SAFETY: the empty heap is never written (see `current` and `alloc_slow`).
unsafe impl Sync for SyncHeap {}
static EMPTY_HEAP: SyncHeap = SyncHeap(Heap {
    direct: [EMPTY; CLASSES],
    queues: [EMPTY_QUEUE; CLASSES],
    full: EMPTY_QUEUE,
    full_count: 0,
    claims_since_sweep: 0,
    notified: AtomicPtr::new(ptr::null_mut()),
    segments: ptr::null_mut(),
    next_in_pool: ptr::null_mut(),
});
const EMPTY_HEAP_PTR: *mut Heap = ptr::addr_of!(EMPTY_HEAP.0) as *mut Heap;

/// The calling thread's heap: the read-only empty heap until its first malloc.
#[inline(always)]
pub(crate) fn current() -> *mut Heap {
    let h = tls::get();
    if h.is_null() {
        EMPTY_HEAP_PTR
    } else {
        h
    }
}

/// Pops a block from `page` (which has one).
#[inline(always)]
unsafe fn pop(page: *mut Page) -> *mut u8 {
    // SAFETY: the caller checked that the owner's free list is not empty.
    unsafe {
        let b = (*page).free;
        (*page).free = (*b).next;
        (*page).used += 1;
        b.cast()
    }
}

/// Allocates a block of `class` from the calling thread's heap.
#[inline(always)]
pub(crate) unsafe fn alloc(class: usize) -> *mut u8 {
    let heap = current();
    // SAFETY: `class` < CLASSES; direct pages are live pages of this heap or the empty page.
    unsafe {
        let page = *(*heap).direct.get_unchecked(class);
        if !(*page).free.is_null() {
            return pop(page);
        }
        alloc_slow(heap, class)
    }
}

/// Frees `p`, a block (or aligned pointer into a block) of `page` in segment `seg`.
#[inline(always)]
pub(crate) unsafe fn free(seg: *mut segment::Segment, page: *mut Page, p: *mut u8) {
    let heap = current();
    // SAFETY: `p` is a live block of `page`; owner-only fields are touched only by the owner.
    unsafe {
        if (*page).flags.load(Ordering::Relaxed) == 0 && (*page).heap == heap {
            let b = p.cast::<Block>();
            (*b).next = (*page).free;
            (*page).free = b;
            (*page).used -= 1;
            if (*page).used == 0 {
                retire(heap, page);
            }
            return;
        }
        free_slow(seg, page, p)
    }
}

#[cold]
unsafe fn free_slow(seg: *mut segment::Segment, page: *mut Page, p: *mut u8) {
    // SAFETY: as for `free`; the flags say which special case applies.
    unsafe {
        let flags = (*page).flags.load(Ordering::Relaxed);
        if flags & page::FLAG_LARGE != 0 {
            return crate::large::free(seg);
        }
        let block = if flags & page::FLAG_ALIGNED != 0 {
            page::block_start(page, p)
        } else {
            p
        };
        if flags & page::FLAG_CHECKED != 0 {
            hardened::forget_block(seg, page, block);
        }
        let heap = current();
        if (*page).heap == heap {
            let b = block.cast::<Block>();
            (*b).next = (*page).free;
            (*page).free = b;
            (*page).used -= 1;
            if flags & FLAG_FULL != 0 {
                unfull(heap, page);
            }
            if (*page).used == 0 {
                retire(heap, page);
            }
            return;
        }
        remote_free(page, block.cast());
    }
}

/// A free by a thread that does not own the page.
unsafe fn remote_free(page: *mut Page, block: *mut Block) {
    // SAFETY: the page stays in use while `block` is not yet on its lists (the owner counts it
    // as used), so the page and its heap outlive this function's accesses.
    unsafe {
        if (*page).full_state.load(Ordering::SeqCst) == FULL
            && (*page)
                .full_state
                .compare_exchange(FULL, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            let heap = (*page).heap;
            let mut head = (*heap).notified.load(Ordering::Relaxed);
            loop {
                (*page).notified_next = head;
                match (*heap).notified.compare_exchange_weak(
                    head,
                    page,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
        }
        page::push_remote(page, block);
    }
}

fn queue(heap: *mut Heap, class: usize) -> *mut Queue {
    // SAFETY: address computation only.
    unsafe { ptr::addr_of_mut!((*heap).queues[class]) }
}

unsafe fn push_front(q: *mut Queue, page: *mut Page) {
    // SAFETY: owner-only lists; `page` is in no list.
    unsafe {
        (*page).prev = ptr::null_mut();
        (*page).next = (*q).first;
        if (*q).first.is_null() {
            (*q).last = page;
        } else {
            (*(*q).first).prev = page;
        }
        (*q).first = page;
    }
}

unsafe fn push_back(q: *mut Queue, page: *mut Page) {
    // SAFETY: owner-only lists; `page` is in no list.
    unsafe {
        (*page).next = ptr::null_mut();
        (*page).prev = (*q).last;
        if (*q).last.is_null() {
            (*q).first = page;
        } else {
            (*(*q).last).next = page;
        }
        (*q).last = page;
    }
}

unsafe fn remove(q: *mut Queue, page: *mut Page) {
    // SAFETY: `page` is linked in `q`.
    unsafe {
        if (*page).prev.is_null() {
            (*q).first = (*page).next;
        } else {
            (*(*page).prev).next = (*page).next;
        }
        if (*page).next.is_null() {
            (*q).last = (*page).prev;
        } else {
            (*(*page).next).prev = (*page).prev;
        }
        (*page).next = ptr::null_mut();
        (*page).prev = ptr::null_mut();
    }
}

/// Points the fast path of `class` at the first page of its queue.
unsafe fn set_direct(heap: *mut Heap, class: usize) {
    // SAFETY: the heap is the caller's own.
    unsafe {
        let first = (*queue(heap, class)).first;
        (*heap).direct[class] = if first.is_null() || config::hardened() {
            EMPTY
        } else {
            first
        };
    }
}

/// Moves an exhausted page to the full list. Returns false (and puts it back at the end of
/// its queue) if a remote free arrived meanwhile.
unsafe fn mark_full(heap: *mut Heap, page: *mut Page) -> bool {
    // SAFETY: owner-only lists; the state handshake is with `remote_free`.
    unsafe {
        let class = (*page).class as usize;
        remove(queue(heap, class), page);
        push_front(ptr::addr_of_mut!((*heap).full), page);
        (*heap).full_count += 1;
        (*page).flags.fetch_or(FLAG_FULL, Ordering::Relaxed);
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
        remove(ptr::addr_of_mut!((*heap).full), page);
        (*heap).full_count -= 1;
        (*page).flags.fetch_and(!FLAG_FULL, Ordering::Relaxed);
        // A NOTIFIED page stays NOTIFIED until the owner drains the notified stack.
        let _ =
            (*page)
                .full_state
                .compare_exchange(FULL, QUEUED, Ordering::SeqCst, Ordering::Relaxed);
        push_back(queue(heap, class), page);
        set_direct(heap, class);
    }
}

/// Drains the stack of full pages that received remote frees.
unsafe fn take_notified(heap: *mut Heap) {
    // SAFETY: the owner takes the whole stack; pages on it stay in use (see `retire`).
    unsafe {
        let mut page = (*heap).notified.swap(ptr::null_mut(), Ordering::Acquire);
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

/// Moves full pages that hold remote frees back to their queues. Needed because a remote
/// free can race with the owner marking the page full and miss the notification; run only
/// once per as many page claims as there are full pages, so its cost is amortised.
unsafe fn sweep_full(heap: *mut Heap) {
    // SAFETY: owner-only lists.
    unsafe {
        let mut page = (*heap).full.first;
        while !page.is_null() {
            let next = (*page).next;
            if !(*page).thread_free.load(Ordering::Acquire).is_null() {
                unfull(heap, page);
            }
            page = next;
        }
        (*heap).claims_since_sweep = 0;
    }
}

/// The first page of `class` with a free block, after collecting remote frees and moving
/// exhausted pages to the full list; null if none.
unsafe fn find_page(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: owner-only lists and pages.
    unsafe {
        loop {
            let page = (*queue(heap, class)).first;
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

#[cold]
#[inline(never)]
pub(crate) unsafe fn alloc_slow(mut heap: *mut Heap, class: usize) -> *mut u8 {
    let class = class.max(1); // malloc(0) arrives as class 0, whose direct page stays empty
                              // SAFETY: the heap belongs to the calling thread.
    unsafe {
        if heap == EMPTY_HEAP_PTR {
            heap = thread_init();
            if heap.is_null() {
                return ptr::null_mut();
            }
        }
        take_notified(heap);
        let mut page = find_page(heap, class);
        if page.is_null()
            && (*heap).full_count > 0
            && (*heap).claims_since_sweep >= (*heap).full_count
        {
            sweep_full(heap);
            page = find_page(heap, class);
        }
        if page.is_null() {
            page = segment::claim_page(heap, class, size_class::span_of(class));
            if page.is_null() {
                return ptr::null_mut();
            }
            (*heap).claims_since_sweep += 1;
            push_front(queue(heap, class), page);
            page::extend(page);
        }
        set_direct(heap, class);
        let p = pop(page);
        if config::hardened() {
            hardened::remember_block(page, p);
        }
        p
    }
}

/// A page whose last block was freed goes back to its segment, unless it is the page its
/// class allocates from (kept, so a program that allocates and frees a batch does not claim,
/// carve and release a page every time; at most one empty page per class stays) or a remote
/// thread still holds it on the notified stack.
unsafe fn retire(heap: *mut Heap, page: *mut Page) {
    // SAFETY: owner-only lists; the page has no live blocks.
    unsafe {
        let class = (*page).class as usize;
        let q = queue(heap, class);
        if (*page).full_state.load(Ordering::SeqCst) == NOTIFIED || (*q).first == page {
            return;
        }
        remove(q, page);
        set_direct(heap, class);
        segment::release_page(heap, page);
    }
}

/// Gives back every empty page of `heap` (used when its thread exits).
unsafe fn release_empty_pages(heap: *mut Heap) {
    // SAFETY: the heap belongs to the exiting thread.
    unsafe {
        take_notified(heap);
        sweep_full(heap);
        for class in 1..CLASSES {
            let q = queue(heap, class);
            let mut page = (*q).first;
            while !page.is_null() {
                let next = (*page).next;
                page::collect(page);
                if (*page).used == 0 && (*page).full_state.load(Ordering::SeqCst) != NOTIFIED {
                    remove(q, page);
                    segment::release_page(heap, page);
                }
                page = next;
            }
            set_direct(heap, class);
        }
    }
}

/// Heaps of exited threads waiting for adoption, and the bump area new heaps come from.
pub(crate) struct Pool {
    abandoned: *mut Heap,
    bump: *mut u8,
    end: *mut u8,
}
// SAFETY: pool contents are only touched under its lock.
unsafe impl Send for Pool {}

pub(crate) static POOL: SpinLock<Pool> = SpinLock::new(Pool {
    abandoned: ptr::null_mut(),
    bump: ptr::null_mut(),
    end: ptr::null_mut(),
});

const HEAP_CHUNK: usize = 256 * 1024;

/// Adopts an abandoned heap or makes a new one.
unsafe fn acquire() -> *mut Heap {
    let mut pool = POOL.lock();
    if !pool.abandoned.is_null() {
        let heap = pool.abandoned;
        // SAFETY: heaps in the pool are owned by the pool.
        pool.abandoned = unsafe { (*heap).next_in_pool };
        stats::add(&stats::HEAPS_ADOPTED, 1);
        return heap;
    }
    let size = (core::mem::size_of::<Heap>() + 63) & !63;
    if pool.bump.is_null() || (pool.end as usize - pool.bump as usize) < size {
        // SAFETY: a fresh mapping owned by the pool.
        let chunk = unsafe { os::map(HEAP_CHUNK) };
        if chunk.is_null() {
            return ptr::null_mut();
        }
        pool.bump = chunk;
        // SAFETY: end of the chunk just mapped.
        pool.end = unsafe { chunk.add(HEAP_CHUNK) };
    }
    let heap = pool.bump.cast::<Heap>();
    // SAFETY: `size` bytes at `bump` are unused pool memory; the empty heap is a valid start.
    unsafe {
        pool.bump = pool.bump.add(size);
        ptr::copy_nonoverlapping(EMPTY_HEAP_PTR, heap, 1);
    }
    stats::add(&stats::HEAPS_CREATED, 1);
    heap
}

/// Gives the calling thread its heap on its first malloc.
#[cold]
unsafe fn thread_init() -> *mut Heap {
    global::init();
    let existing = current();
    if existing != EMPTY_HEAP_PTR {
        return existing; // the global initialisation allocated and made one already
    }
    // SAFETY: the new heap is owned by this thread from here on.
    unsafe {
        let heap = acquire();
        if !heap.is_null() {
            tls::set(heap);
            global::register_thread(heap.cast());
        }
        heap
    }
}

/// Thread-exit hook (pthread key destructor): abandons the thread's heap.
pub(crate) unsafe fn thread_done(heap: *mut Heap) {
    if tls::get() == heap {
        tls::set(ptr::null_mut());
    }
    // SAFETY: the exiting thread owns `heap`; afterwards the pool does.
    unsafe {
        release_empty_pages(heap);
        let mut pool = POOL.lock();
        (*heap).next_in_pool = pool.abandoned;
        pool.abandoned = heap;
    }
}
