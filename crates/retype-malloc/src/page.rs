//! A page: a run of slices inside a segment holding blocks of one size class, with its own
//! free lists (free-list sharding, as in mimalloc):
//! - `free`: blocks ready for the owning thread's malloc; the owner also pushes its own
//!   frees here, so the common free is a plain push;
//! - `thread_free`: blocks freed by other threads, pushed with one compare-and-swap and
//!   taken all at once by the owner when `free` runs dry.
//!
//! Blocks are carved lazily from the page's area ("extend"), a few KiB at a time, so memory
//! is touched only as the page fills.
//!
//! In hardened and secure mode (pages with [`FLAG_CHECKED`]) the links stored in the free
//! blocks of `free` are encoded with the page's secret key, as in mimalloc's secure mode: an
//! overflow or a write after free that rewrites one cannot aim it anywhere, and a link
//! decoded is checked to be a block of the page before it is followed. Malloc clears the link
//! of the block it hands out, so only a free block holds a link that decodes (see
//! [`holds_link`]).

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::consts::SLICE_SIZE;
use crate::list::{self, Linked, Links};
use crate::size_class::{self, CLASSES};
use crate::{canary, config, freed, os, secret};

/// The thread heap owning a page or segment, as this layer and `segment` see it: an identity
/// to store and compare, never dereferenced. Only `heap`, which defines the heap (with its
/// queues of pages), converts; so pages and segments sit below heaps in the module layers.
pub(crate) enum HeapId {}

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
/// Counted mode (`RETYPE_MALLOC_STATS`): frees are counted.
pub(crate) const FLAG_COUNTED: u8 = 16;
/// With [`FLAG_FULL`]: the owner's frees go to the class's spill (see `spill::takes`).
pub(crate) const FLAG_SPILLS: u8 = 32;

/// `full_state`: the page is in its class queue.
pub(crate) const QUEUED: u8 = 0;
/// The page is in the full list; the next remote free must notify the owner.
pub(crate) const FULL: u8 = 1;
/// A remote free has put the page on its heap's `notified` list.
pub(crate) const NOTIFIED: u8 = 2;

/// Bytes carved per extension of a page (at least [`EXTEND_BLOCKS`] blocks).
const EXTEND_BYTES: usize = 4 * 1024;

/// Most blocks carved per extension beyond [`EXTEND_BYTES`]: a page of blocks larger than
/// that carves as many as it has carved, one at first, up to this many. One at a time, every
/// malloc on a fresh page took the slow path (`rptest 2 200 1000`: half the mallocs, an
/// extension in every other one); four from the start, a class used by one block of 32 KiB
/// touched four OS pages (`glibc_thread 2 5`: peak RSS 3.7 MiB, 3.2 with doubling from one,
/// for 4 % more instructions in that `rptest`).
const EXTEND_BLOCKS: usize = 4;

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
    /// Empty, kept by its heap for reuse (see `heap::retire`).
    pub kept: bool,
    pub full_state: AtomicU8,
    pub area: *mut u8,
    pub heap: *mut HeapId,
    pub thread_free: AtomicPtr<Block>,
    /// The key that encodes the links of `free` (pages with [`FLAG_CHECKED`]; see [`encode`]).
    pub key: u64,
    /// Links in the heap's queue of this page's class, or in its full list.
    pub links: Links<Page>,
    /// Link in the heap's `notified` stack.
    pub notified_next: *mut Page,
    /// Bytes of the area carved so far (`capacity * block_size`): with [`Page::reciprocal`],
    /// whether an address is a carved block's start is a compare and a multiplication by
    /// fields of the page (see [`is_carved`]).
    pub carved: u32,
    /// The class's multiplier, `size_class::reciprocal`.
    pub reciprocal: u64,
}

// SAFETY: `links` returns the page's own `links` field, written only by `list::Queue`.
unsafe impl Linked for Page {
    #[inline(always)]
    fn links(this: *mut Self) -> *mut Links<Self> {
        this.wrapping_byte_add(core::mem::offset_of!(Page, links))
            .cast()
    }
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
            kept: false,
            full_state: AtomicU8::new(QUEUED),
            area: ptr::null_mut(),
            heap: ptr::null_mut(),
            thread_free: AtomicPtr::new(ptr::null_mut()),
            key: 0,
            links: Links::NONE,
            notified_next: ptr::null_mut(),
            carved: 0,
            reciprocal: 0,
        }
    }
}

/// Sets (`on`) or clears `flag` of `page`. By a read-modify-write, not a load and a store:
/// the owner turns `FLAG_FULL` on and off while another thread may set `FLAG_ALIGNED` on the
/// page, having taken one of its blocks from the transfer cache (see `transfer`), and a plain
/// store of the owner's would lose it (the block's aligned pointer then freed as a block).
pub(crate) unsafe fn set_flag(page: *mut Page, flag: u8, on: bool) {
    // SAFETY: the page is a live page descriptor.
    let flags = unsafe { &(*page).flags };
    if on {
        flags.fetch_or(flag, Ordering::Relaxed);
    } else {
        flags.fetch_and(!flag, Ordering::Relaxed);
    }
}

/// Bytes of the slices `page` spans.
pub(crate) fn span_bytes(page: *mut Page) -> usize {
    // SAFETY: `page` is a live page descriptor.
    unsafe { (*page).span as usize * SLICE_SIZE }
}

/// [`gap`] with canaries.
pub(crate) const CANARY_GAP: usize = 16;

/// Bytes kept at the start of a page's slices before its first block: with canaries, 16,
/// which end with a free tag, as if a free block lay before the first one, so an underflow
/// of the first block is caught too.
pub(crate) fn gap() -> usize {
    if config::canary() {
        CANARY_GAP
    } else {
        0
    }
}

/// Makes `page` an empty page of `class` owned by `heap`, over `[area, area+len)` (less the [`gap`]).
pub(crate) unsafe fn init(
    page: *mut Page,
    heap: *mut HeapId,
    class: usize,
    span: usize,
    area: *mut u8,
    len: usize,
) {
    let block_size = size_class::block_size(class);
    let checked = if config::hardened() { FLAG_CHECKED } else { 0 };
    let flags = checked | if config::counted() { FLAG_COUNTED } else { 0 };
    // SAFETY: the caller owns the (unused) page descriptor and the area.
    unsafe {
        let (area, len) = (area.add(gap()), len - gap());
        if config::canary() {
            canary::seal_free(area.wrapping_sub(block_size), block_size);
        }
        page.write(Page {
            reserved: (len / block_size) as u32,
            block_size: block_size as u32,
            flags: AtomicU8::new(flags),
            class: class as u8,
            in_use: 1,
            span: span as u8,
            area,
            heap,
            key: if checked != 0 { secret::random() } else { 0 },
            reciprocal: size_class::reciprocal(class),
            ..Page::empty()
        })
    };
}

/// Pops a block from `page`'s free list, which is not empty.
#[inline(always)]
pub(crate) unsafe fn pop(page: *mut Page) -> *mut u8 {
    // SAFETY: the caller owns the page and checked that its free list is not empty.
    unsafe {
        let b = (*page).free;
        (*page).free = (*b).next;
        // Wrapping: a spill's page (see `spill`) counts every block taken out, without bound.
        (*page).used = (*page).used.wrapping_add(1);
        b.cast()
    }
}

/// The link to `next` as stored in a free block of a page with key `key`: xor-ed with the
/// key, rotated by its low bits and offset by it (mimalloc's `mi_ptr_encode`, with one key).
/// A bijection, so a link that decodes to a block of the page is one only the key could make.
#[inline]
pub(crate) fn encode(key: u64, next: *mut Block) -> *mut Block {
    ((next as u64 ^ key)
        .rotate_left(key as u32 & 63)
        .wrapping_add(key)) as *mut Block
}

/// The block a link stored by [`encode`] points to.
#[inline]
pub(crate) fn decode(key: u64, link: *mut Block) -> *mut Block {
    ((link as u64)
        .wrapping_sub(key)
        .rotate_right(key as u32 & 63)
        ^ key) as *mut Block
}

/// The next block after free block `b` of `page` on its free list.
unsafe fn next_of(page: *const Page, b: *mut Block) -> *mut Block {
    // SAFETY: `b` is a free block of the page, holding its link.
    unsafe {
        if (*page).flags.load(Ordering::Relaxed) & FLAG_CHECKED != 0 {
            decode((*page).key, (*b).next)
        } else {
            (*b).next
        }
    }
}

/// [`pop`] for a page with [`FLAG_CHECKED`]: the link is decoded and checked to be null or a
/// carved block of the page before it is followed, and cleared in the block handed out.
#[inline]
pub(crate) unsafe fn pop_checked(page: *mut Page) -> *mut u8 {
    // SAFETY: the caller owns the page and checked that its free list is not empty.
    unsafe {
        let b = (*page).free;
        let next = decode((*page).key, (*b).next);
        if !next.is_null() && !is_carved(page, next.cast()) {
            return broken_link(page, b.cast());
        }
        (*b).next = ptr::null_mut();
        (*page).free = next;
        (*page).used += 1;
        b.cast()
    }
}

/// Pushes the free block `b` onto `page`'s free list (the owner's push; the link encoded on
/// a page with [`FLAG_CHECKED`]).
#[inline]
pub(crate) unsafe fn push(page: *mut Page, b: *mut Block) {
    // SAFETY: the caller owns the page and gives up `b`.
    unsafe {
        push_after(page, b, (*page).free);
        (*page).free = b;
    }
}

/// [`push`] for a page with [`FLAG_CHECKED`]: the link encoded (the flag not read again).
#[inline(always)]
pub(crate) unsafe fn push_checked(page: *mut Page, b: *mut Block) {
    // SAFETY: the caller owns the page and gives up `b`.
    unsafe {
        (*b).next = encode((*page).key, (*page).free);
        (*page).free = b;
    }
}

/// Whether the first word of `block`, a block of the checked `page`, is a free-list link
/// (decodes to null or to a carved block of the page): a block that is free holds one;
/// a block in use does not, but by a chance of about one in 2^50 (malloc clears the word, and
/// nothing can write one without the key).
#[inline(always)]
pub(crate) unsafe fn holds_link(page: *const Page, block: *const u8) -> bool {
    // SAFETY: `block` is a carved block of the page, readable.
    unsafe {
        let next = decode((*page).key, *block.cast::<*mut Block>());
        next.is_null() || is_carved(page, next.cast())
    }
}

/// Whether `block` is on the free list of `page`, which the caller owns (a walk, at most as
/// long as the page's capacity).
pub(crate) unsafe fn on_free_list(page: *const Page, block: *const u8) -> bool {
    // SAFETY: the caller owns the page; the links were checked as they were made.
    unsafe {
        let mut b = (*page).free;
        for _ in 0..(*page).capacity {
            if b.is_null() || !is_carved(page, b.cast()) {
                return false;
            }
            if b.cast_const().cast() == block {
                return true;
            }
            b = next_of(page, b);
        }
        false
    }
}

/// Calls `each` on every block on the free list of `page`, which the caller owns, each link
/// checked to be a carved block of the page (see [`Carved::holds`]) before it is followed.
unsafe fn each_free(page: *const Page, mut each: impl FnMut(*const u8)) {
    // SAFETY: the caller owns the page; a link is followed only once checked.
    unsafe {
        let carved = Carved::of(page);
        let mut b = (*page).free;
        for _ in 0..(*page).capacity {
            if b.is_null() {
                return;
            }
            each(b.cast());
            let next = next_of(page, b);
            if !next.is_null() && !carved.holds(next.cast()) {
                broken_link(page, b.cast());
            }
            b = next;
        }
    }
}

/// Checks, as `freed::reuse` does, every block on the free list of `page` (the caller's), so
/// that blocks that left the quarantine with their first word checked are checked whole
/// before the page is given back or its thread exits.
pub(crate) unsafe fn check_freed(page: *const Page) {
    // SAFETY: the caller owns the page; its free blocks are filled and `block_size` long.
    unsafe {
        let size = (*page).block_size as usize;
        each_free(page, |b| freed::check_rest(b, size));
    }
}

/// Fewest blocks hardened mode carves at once: the run it shuffles.
const HARDENED_RUN: usize = 16;

/// Carves the next blocks of the area onto the free list: in address order, or in hardened
/// mode (at least [`HARDENED_RUN`] at a time) in a random order, so that which block a
/// malloc gets cannot be told from the blocks handed out before it.
pub(crate) unsafe fn extend(page: *mut Page) {
    // SAFETY: owner-only fields of a page in use; the run lies inside the page's area.
    unsafe {
        let bs = (*page).block_size as usize;
        let left = ((*page).reserved - (*page).capacity) as usize;
        if !config::hardened() {
            let blocks = ((*page).capacity as usize).clamp(1, EXTEND_BLOCKS);
            return carve(page, (EXTEND_BYTES / bs).max(blocks).min(left), |k| k);
        }
        let n = (EXTEND_BYTES / bs).max(HARDENED_RUN).min(left);
        // Blocks are 16 bytes or more, so a run has at most 256: each index fits a byte.
        let mut order = [0u8; EXTEND_BYTES / 16];
        for (i, slot) in order[..n].iter_mut().enumerate() {
            *slot = i as u8;
        }
        secret::shuffle(&mut order[..n]);
        carve(page, n, |k| order[k] as usize);
    }
}

/// Carves the next `n` blocks of the area onto the free list, the `k`-th taken being the
/// `index(k)`-th of the run; filled if free blocks are (see `freed`); with canaries, each gets
/// its free tag.
unsafe fn carve(page: *mut Page, n: usize, index: impl Fn(usize) -> usize) {
    if n == 0 {
        return;
    }
    // SAFETY: owner-only fields of a page in use; `n` blocks are left in the area.
    unsafe {
        let bs = (*page).block_size as usize;
        let first = (*page).area.add((*page).capacity as usize * bs);
        let block = |k: usize| first.add(index(k) * bs).cast::<Block>();
        if freed::filled() {
            (0..n).for_each(|k| freed::fill(block(k).cast(), bs));
        }
        for k in 1..n {
            push_after(page, block(k - 1), block(k));
        }
        if config::canary() {
            for k in 0..n {
                canary::seal_free(block(k).cast(), bs);
            }
        }
        push_after(page, block(n - 1), (*page).free);
        (*page).free = block(0);
        (*page).capacity += n as u32;
        (*page).carved += (n * bs) as u32;
    }
}

/// Moves blocks freed by other threads onto the owner's free list.
pub(crate) unsafe fn collect(page: *mut Page) {
    // SAFETY: the owner takes the whole remote list at once; nobody else reads it afterwards.
    unsafe {
        let list = list::take_all(&(*page).thread_free);
        if list.is_null() {
            return;
        }
        // Hardened mode checks each link, read from a freed block, before following it, and
        // encodes it for the free list; the page's fields it needs are read once (the
        // compiler cannot tell that the blocks written are not the page's fields).
        let checked = (*page).flags.load(Ordering::Relaxed) & FLAG_CHECKED != 0;
        let (carved, key, capacity) = (Carved::of(page), (*page).key, (*page).capacity);
        let mut tail = list;
        let mut n = 1u32;
        while !(*tail).next.is_null() {
            let next = (*tail).next;
            if checked {
                if !carved.holds(next.cast()) {
                    broken_link(page, tail.cast());
                }
                if n >= capacity {
                    os::die("heap corruption (free list loops)", tail.cast(), None);
                }
                (*tail).next = encode(key, next);
            }
            tail = next;
            n += 1;
        }
        let last = (*page).free;
        (*page).free = list;
        push_after(page, tail, last);
        (*page).used -= n;
    }
}

/// Links `tail`, a free block of `page`, to `next`, encoded if the page is checked.
#[inline]
unsafe fn push_after(page: *mut Page, tail: *mut Block, next: *mut Block) {
    // SAFETY: the caller owns the page and `tail`, a free block of it.
    unsafe {
        (*tail).next = if (*page).flags.load(Ordering::Relaxed) & FLAG_CHECKED != 0 {
            encode((*page).key, next)
        } else {
            next
        };
    }
}

/// The carved part of a page's area, as [`is_carved`] tests an address against it: the
/// area's start, the bytes carved so far and the class's reciprocal.
#[derive(Clone, Copy)]
pub(crate) struct Carved {
    area: usize,
    bytes: usize,
    reciprocal: u64,
}

impl Carved {
    /// The carved part of `page`'s area now.
    #[inline(always)]
    pub(crate) unsafe fn of(page: *const Page) -> Carved {
        // SAFETY: the page is in use; its fields are stable while its owner pops or collects.
        unsafe {
            Carved {
                area: (*page).area as usize,
                bytes: (*page).carved as usize,
                reciprocal: (*page).reciprocal,
            }
        }
    }

    /// Whether `p` is the start of a block carved so far: its offset below the bytes carved
    /// and a multiple of the block size by one multiplication (see `size_class::divides`,
    /// where a remainder would divide).
    #[inline(always)]
    pub(crate) fn holds(self, p: *const u8) -> bool {
        let off = (p as usize).wrapping_sub(self.area);
        off < self.bytes && size_class::divides(off, self.reciprocal)
    }
}

/// Whether `p` is the start of a block of `page` carved so far (see [`Carved::holds`]).
#[inline(always)]
pub(crate) fn is_carved(page: *const Page, p: *const u8) -> bool {
    // SAFETY: the page is in use.
    unsafe { Carved::of(page) }.holds(p)
}

/// Stops the program: the link read from `block` of `page` is no block of the page (from
/// [`pop_checked`] or [`collect`]). Typed as returning a block so that [`pop_checked`],
/// inlined in secure mode's malloc, ends in a jump to it and that malloc sets up no stack
/// frame.
#[cold]
#[inline(never)]
unsafe extern "C" fn broken_link(page: *const Page, block: *mut u8) -> *mut u8 {
    // SAFETY: the page is in use.
    let bs = unsafe { (*page).block_size as usize };
    os::die("heap corruption (free list link)", block, Some(bs))
}

/// Pushes blocks freed by a thread that does not own the page, linked from `first` to `last`.
pub(crate) unsafe fn push_remote(page: *mut Page, first: *mut Block, last: *mut Block) {
    // SAFETY: the blocks are free blocks of `page`, which stays in use until its owner
    // collects them; `last` ends the chain, its link is rewritten here.
    unsafe { list::push(&(*page).thread_free, first, &raw mut (*last).next) }
}

/// The index in its page's area of the block holding `p`, at or after the area's start (if
/// `p` lies past the blocks carved, an index past them).
pub(crate) unsafe fn index_of(page: *const Page, p: *const u8) -> usize {
    // SAFETY: the caller's contract: `page` is a page in use.
    unsafe { size_class::index_of(p as usize - (*page).area as usize, (*page).class as usize) }
}

/// The start of the block holding `p` (which may point inside it after an aligned malloc).
pub(crate) unsafe fn block_start(page: *const Page, p: *mut u8) -> *mut u8 {
    // SAFETY: `p` lies in the page's area.
    unsafe {
        let bs = (*page).block_size as usize;
        (*page).area.add(index_of(page, p) * bs)
    }
}

/// Checks the owner-only fields of a page in use by `heap`, without walking its free list.
pub(crate) unsafe fn check_fields(
    page: *const Page,
    heap: *mut HeapId,
) -> Result<(), &'static str> {
    // SAFETY: the caller owns the page; only owner-only fields and atomics are read.
    let p = unsafe { &*page };
    let class = p.class as usize;
    if p.in_use != 1 || p.heap != heap {
        return Err("page: not in use by this heap");
    }
    if !(1..CLASSES).contains(&class) || p.block_size as usize != size_class::block_size(class) {
        return Err("page: class and block size disagree");
    }
    if p.used > p.capacity || p.capacity > p.reserved {
        return Err("page: not used <= capacity <= reserved");
    }
    if p.carved != p.capacity * p.block_size || p.reciprocal != size_class::reciprocal(class) {
        return Err("page: carved bytes or reciprocal do not fit its capacity and class");
    }
    let flags = p.flags.load(Ordering::Relaxed);
    if flags & FLAG_LARGE != 0 || (flags & FLAG_CHECKED != 0) != config::hardened() {
        return Err("page: flags do not fit a small page");
    }
    Ok(())
}

/// [`check_fields`], and the free list: every block in the carved part of the area, on a block
/// boundary, and as many as the page's capacity less the blocks in use (blocks freed by other
/// threads still count as used until collected).
pub(crate) unsafe fn check(page: *const Page, heap: *mut HeapId) -> Result<(), &'static str> {
    // SAFETY: the caller owns the page.
    unsafe { check_fields(page, heap)? };
    // SAFETY: the caller owns the page; only owner-only fields are read through this reference.
    let p = unsafe { &*page };
    let (start, bs) = (p.area as usize, p.block_size as usize);
    let end = start + p.capacity as usize * bs;
    let mut free = 0;
    let mut b = p.free;
    while !b.is_null() {
        let a = b as usize;
        if a < start || a >= end || !(a - start).is_multiple_of(bs) {
            return Err("page: a free block outside the carved area or off a block boundary");
        }
        free += 1;
        if free > p.capacity {
            return Err("page: free list longer than the capacity (a cycle?)");
        }
        // SAFETY: `b` is a block of the page (checked above).
        b = unsafe { next_of(page, b) };
    }
    if free + p.used != p.capacity {
        return Err("page: free blocks + used blocks != capacity");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of 4 KiB or more are carved one at first, then as many as the page has, at
    /// most [`EXTEND_BLOCKS`] at a time; smaller ones [`EXTEND_BYTES`] at a time.
    #[test]
    fn large_blocks_are_carved_one_then_doubling() {
        for (size, expected) in [
            (20_000, vec![1, 2, 4, 8, 12, 16]),
            (64, (1..=6).map(|k| k * EXTEND_BYTES as u32 / 64).collect()),
        ] {
            let class = size_class::class_of(size);
            let bs = size_class::block_size(class);
            let len = 16 * bs.max(EXTEND_BYTES);
            let mut area = vec![0u64; len / 8];
            let mut page = Page::empty();
            // SAFETY: the page describes `area`, which outlives it; nothing else uses either.
            let carved: Vec<u32> = unsafe {
                init(
                    &mut page,
                    ptr::null_mut(),
                    class,
                    1,
                    area.as_mut_ptr().cast(),
                    len,
                );
                (0..6)
                    .map(|_| {
                        extend(&mut page);
                        page.capacity
                    })
                    .collect()
            };
            assert_eq!(carved, expected, "{size} bytes");
        }
    }
}
