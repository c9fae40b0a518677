//! A page: a run of slices inside a segment holding blocks of one size class, with its own
//! free lists (free-list sharding, as in mimalloc):
//! - `free`: blocks ready for the owning thread's malloc; the owner also pushes its own
//!   frees here, so the common free is a plain push;
//! - `thread_free`: blocks freed by other threads, pushed with one compare-and-swap and
//!   taken all at once by the owner when `free` runs dry.
//!
//! Blocks are carved lazily from the page's area ("extend"), a few KiB at a time, so memory
//! is touched only as the page fills.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::heap::Heap;

/// A free block: its first word links to the next free block.
#[repr(C)]
pub(crate) struct Block {
    pub next: *mut Block,
}

/// Some blocks were handed out at an aligned address inside the block.
pub(crate) const FLAG_ALIGNED: u8 = 1;
/// Hardened mode: every free is validated.
pub(crate) const FLAG_CHECKED: u8 = 2;
/// The page sits in its heap's full list.
pub(crate) const FLAG_FULL: u8 = 4;
/// The "page" is the header of a large block (free must take the large path).
pub(crate) const FLAG_LARGE: u8 = 8;

/// `full_state`: the page is in its class queue.
pub(crate) const QUEUED: u8 = 0;
/// The page is in the full list; the next remote free must notify the owner.
pub(crate) const FULL: u8 = 1;
/// A remote free has put the page on its heap's `notified` list.
pub(crate) const NOTIFIED: u8 = 2;

/// Bytes carved per extension of a page.
const EXTEND_BYTES: usize = 4 * 1024;

#[repr(C)]
pub(crate) struct Page {
    pub free: *mut Block,
    pub used: u32,
    pub capacity: u32,
    pub reserved: u32,
    pub block_size: u32,
    /// Any non-zero flag sends free to the slow path; read by other threads, written by the owner.
    pub flags: AtomicU8,
    pub class: u8,
    pub in_use: u8,
    pub span: u8,
    pub full_state: AtomicU8,
    pub area: *mut u8,
    pub heap: *mut Heap,
    pub thread_free: AtomicPtr<Block>,
    pub next: *mut Page,
    pub prev: *mut Page,
    pub notified_next: *mut Page,
}

impl Page {
    /// A page with nothing to give: the initial target of every heap's fast path.
    pub(crate) const fn empty() -> Page {
        Page {
            free: ptr::null_mut(),
            used: 0,
            capacity: 0,
            reserved: 0,
            block_size: 0,
            flags: AtomicU8::new(0),
            class: 0,
            in_use: 0,
            span: 0,
            full_state: AtomicU8::new(QUEUED),
            area: ptr::null_mut(),
            heap: ptr::null_mut(),
            thread_free: AtomicPtr::new(ptr::null_mut()),
            next: ptr::null_mut(),
            prev: ptr::null_mut(),
            notified_next: ptr::null_mut(),
        }
    }
}

/// Makes `page` an empty page of `class` owned by `heap`, over `[area, area+len)`.
pub(crate) unsafe fn init(
    page: *mut Page,
    heap: *mut Heap,
    class: usize,
    span: usize,
    area: *mut u8,
    len: usize,
) {
    let block_size = crate::size_class::block_size(class);
    let flags = if crate::config::hardened() {
        FLAG_CHECKED
    } else {
        0
    };
    // SAFETY: the caller owns the (unused) page descriptor.
    unsafe {
        page.write(Page {
            reserved: (len / block_size) as u32,
            block_size: block_size as u32,
            flags: AtomicU8::new(flags),
            class: class as u8,
            in_use: 1,
            span: span as u8,
            area,
            heap,
            ..Page::empty()
        })
    };
}

/// Carves the next blocks of the area onto the free list.
pub(crate) unsafe fn extend(page: *mut Page) {
    // SAFETY: owner-only fields of a page in use; blocks lie inside the page's area.
    unsafe {
        let bs = (*page).block_size as usize;
        let left = ((*page).reserved - (*page).capacity) as usize;
        let n = (EXTEND_BYTES / bs).clamp(1, left.max(1)).min(left);
        if n == 0 {
            return;
        }
        let first = (*page).area.add((*page).capacity as usize * bs);
        for i in 0..n - 1 {
            let b = first.add(i * bs).cast::<Block>();
            (*b).next = first.add((i + 1) * bs).cast();
        }
        let last = first.add((n - 1) * bs).cast::<Block>();
        (*last).next = (*page).free;
        (*page).free = first.cast();
        (*page).capacity += n as u32;
    }
}

/// Moves blocks freed by other threads onto the owner's free list.
pub(crate) unsafe fn collect(page: *mut Page) {
    // SAFETY: the owner takes the whole remote list at once; nobody else reads it afterwards.
    unsafe {
        let list = (*page).thread_free.swap(ptr::null_mut(), Ordering::Acquire);
        if list.is_null() {
            return;
        }
        let mut tail = list;
        let mut n = 1u32;
        while !(*tail).next.is_null() {
            tail = (*tail).next;
            n += 1;
        }
        (*tail).next = (*page).free;
        (*page).free = list;
        (*page).used -= n;
    }
}

/// Pushes a block freed by a thread that does not own the page.
pub(crate) unsafe fn push_remote(page: *mut Page, block: *mut Block) {
    // SAFETY: `block` is a free block of `page`; the list is a lock-free stack.
    unsafe {
        let mut head = (*page).thread_free.load(Ordering::Relaxed);
        loop {
            (*block).next = head;
            match (*page).thread_free.compare_exchange_weak(
                head,
                block,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }
}

/// The start of the block holding `p` (which may point inside it after an aligned malloc).
pub(crate) unsafe fn block_start(page: *const Page, p: *mut u8) -> *mut u8 {
    // SAFETY: `p` lies in the page's area.
    unsafe {
        let off = p as usize - (*page).area as usize;
        let bs = (*page).block_size as usize;
        (*page).area.add(off - off % bs)
    }
}
