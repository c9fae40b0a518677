//! The binary buddy system (Knowlton 1965; Knuth TAOCP 2.5 algorithm R/S).
//!
//! Blocks have power-of-two sizes and sit at offsets (from the heap's base)
//! that are multiples of their size; a block's buddy is the other half of the
//! block it was split from, at `offset ^ size`. Each block's first word is a
//! tag, (order, free or used); a free block's next two words link it into the
//! free list of its order. Freeing merges a block with its buddy for as long
//! as the buddy is free and whole.
//!
//! The heap grows only as far as it needs: a block that no free list can give
//! is placed at the first offset after the break that is a multiple of its
//! size, and the gap before it is cut into free blocks.

use core::ptr::{self, NonNull};

use super::block::{Block, WORD};
use super::free_list::FreeList;
use super::source::SOURCE_ALIGN;
use super::{ensure, CheckError, Heap, Source, Stats};

/// The smallest block: tag and two links, rounded up to a power of two.
const MIN_ORDER: u32 = (3 * WORD).next_power_of_two().trailing_zeros();
const ORDERS: usize = usize::BITS as usize - 2;

const FREE: usize = 1;
const USED: usize = 2;
const MARK: usize = 4;
const STATE: usize = FREE | USED | MARK;

pub struct Buddy<S> {
    source: S,
    base: *mut u8,
    /// Bytes obtained from the source; blocks tile `[0, brk)`.
    brk: usize,
    lists: [FreeList; ORDERS],
}

// SAFETY: the heap's pointers point only into memory it owns through its
// source; moving the heap to another thread moves that ownership with it.
unsafe impl<S: Send> Send for Buddy<S> {}

fn tag(order: u32, state: usize) -> usize {
    ((order as usize) << 3) | state
}

impl<S: Source> Buddy<S> {
    /// An empty buddy heap over `source`.
    pub fn new(mut source: S) -> Option<Self> {
        let base = source.sbrk(0)?.as_ptr();
        Some(Buddy {
            source,
            base,
            brk: 0,
            lists: core::array::from_fn(|_| FreeList::default()),
        })
    }

    fn block(&self, off: usize) -> Block {
        Block::at(self.base.wrapping_add(off))
    }

    fn offset(&self, b: Block) -> usize {
        b.addr() as usize - self.base as usize
    }

    /// # Safety
    /// A block must start at `off < brk`.
    unsafe fn tag_at(&self, off: usize) -> usize {
        // SAFETY: by the caller's contract the word is heap memory.
        unsafe { self.base.add(off).cast::<usize>().read() }
    }

    /// # Safety
    /// The word at `off` must be heap memory.
    unsafe fn set_tag(&mut self, off: usize, t: usize) {
        // SAFETY: by the caller's contract.
        unsafe { self.base.add(off).cast::<usize>().write(t) }
    }

    /// Whether a free block of order `k` starts at `off` (which may lie past the break).
    unsafe fn is_free(&self, off: usize, k: u32) -> bool {
        // SAFETY: blocks tile [0, brk), so a block of order k at `off` is whole before the break.
        off + (1 << k) <= self.brk && unsafe { self.tag_at(off) } == tag(k, FREE)
    }

    /// Frees the block of order `k` at `off`, merging it with free buddies.
    unsafe fn release(&mut self, mut off: usize, mut k: u32) {
        // SAFETY: `off` is a block of this heap; buddies are checked before use.
        unsafe {
            while (k as usize) + 1 < ORDERS {
                let buddy = off ^ (1 << k);
                if !self.is_free(buddy, k) {
                    break;
                }
                let b = self.block(buddy);
                self.lists[k as usize].remove(b);
                off = off.min(buddy);
                k += 1;
            }
            self.set_tag(off, tag(k, FREE));
            let b = self.block(off);
            self.lists[k as usize].push_front(b);
        }
    }

    /// A used block of order `k`: split from a larger free one, or placed past the break.
    unsafe fn take(&mut self, k: u32) -> Option<usize> {
        // SAFETY: listed blocks are free blocks of this heap.
        unsafe {
            if let Some(j) = (k as usize..ORDERS).find(|&j| !self.lists[j].is_empty()) {
                let b = self.lists[j].head()?;
                self.lists[j].remove(b);
                let off = self.offset(b);
                for half in (k as usize..j).rev() {
                    let upper = off + (1 << half);
                    self.set_tag(upper, tag(half as u32, FREE));
                    let u = self.block(upper);
                    self.lists[half].push_front(u);
                }
                self.set_tag(off, tag(k, USED));
                return Some(off);
            }
            let start = self.brk.checked_next_multiple_of(1 << k)?;
            let end = start.checked_add(1 << k)?;
            self.source.sbrk(end - self.brk)?;
            let gap = self.brk;
            self.brk = end;
            self.set_tag(start, tag(k, USED));
            // Cut the gap into the largest aligned blocks; tag them all before
            // freeing any, so a merge never reads an unwritten tag.
            let pieces = || {
                core::iter::successors((gap < start).then_some(gap), move |&o| {
                    let next = o + (1 << piece_order(o, start));
                    (next < start).then_some(next)
                })
            };
            for o in pieces() {
                self.set_tag(o, tag(piece_order(o, start), USED));
            }
            for o in pieces() {
                self.release(o, piece_order(o, start));
            }
            Some(start)
        }
    }

    /// The order of the block a request of `size` bytes aligned to `align`
    /// needs, and where the payload starts in it.
    fn order_for(size: usize, align: usize) -> Option<(u32, usize)> {
        if !align.is_power_of_two() || align > SOURCE_ALIGN {
            return None;
        }
        let lead = align.max(WORD);
        let k = size
            .checked_add(lead)?
            .checked_next_power_of_two()?
            .trailing_zeros();
        ((k as usize) < ORDERS).then_some((k.max(MIN_ORDER), lead))
    }

    /// The block (offset, order) that holds the live payload `ptr`.
    unsafe fn block_of(&self, ptr: NonNull<u8>) -> (usize, u32) {
        // SAFETY: the word before a payload repeats its block's tag.
        let k = unsafe { ptr.as_ptr().sub(WORD).cast::<usize>().read() } >> 3;
        let off = (ptr.as_ptr() as usize - self.base as usize - 1) & !((1 << k) - 1);
        (off, k as u32)
    }

    /// Marks `off` a used block of order `k` whose payload is at `ptr`.
    unsafe fn set_used(&mut self, off: usize, k: u32, ptr: *mut u8) {
        // SAFETY: `ptr` lies in the block, at least one word after its start.
        unsafe {
            self.set_tag(off, tag(k, USED));
            ptr.sub(WORD).cast::<usize>().write(tag(k, USED));
        }
    }

    /// Grows the used block (off, k) in place to order `want` by absorbing
    /// free upper buddies or the space past the break; all or nothing.
    unsafe fn grow_in_place(&mut self, off: usize, k: u32, want: u32) -> bool {
        let mut extra = 0;
        for j in k..want {
            let buddy = off + (1 << j);
            // SAFETY: `is_free` reads only tags of whole blocks before the break.
            let ok = off.is_multiple_of(1 << (j + 1))
                && (buddy >= self.brk || unsafe { self.is_free(buddy, j) });
            if !ok {
                return false;
            }
            if buddy >= self.brk {
                extra += 1 << j;
            }
        }
        if extra > 0 && self.source.sbrk(extra).is_none() {
            return false;
        }
        let old_brk = self.brk;
        self.brk += extra;
        for j in k..want {
            let buddy = off + (1 << j);
            if buddy < old_brk {
                let b = self.block(buddy);
                // SAFETY: checked above to be a listed free block of order j.
                unsafe { self.lists[j as usize].remove(b) };
            }
        }
        true
    }
}

/// The order of the gap piece at `o < start`: as large as its alignment and
/// the room before `start` allow.
fn piece_order(o: usize, start: usize) -> u32 {
    o.trailing_zeros()
        .min(usize::BITS - 1 - (start - o).leading_zeros())
}

impl<S: Source> Heap for Buddy<S> {
    fn kind(&self) -> super::HeapKind {
        super::HeapKind::Buddy
    }

    fn allocate(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
        let (k, lead) = Self::order_for(size, align)?;
        // SAFETY: `take` returns a block of order k; the payload lies inside it.
        unsafe {
            let off = self.take(k)?;
            let ptr = self.base.add(off + lead);
            self.set_used(off, k, ptr);
            NonNull::new(ptr)
        }
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>) {
        // SAFETY: by the caller's contract `ptr` is live in this heap.
        unsafe {
            let (off, k) = self.block_of(ptr);
            self.release(off, k);
        }
    }

    unsafe fn reallocate(
        &mut self,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
    ) -> Option<NonNull<u8>> {
        // SAFETY: by the caller's contract `ptr` is live in this heap.
        unsafe {
            let (off, k) = self.block_of(ptr);
            let lead = ptr.as_ptr() as usize - self.base as usize - off;
            let need = size.checked_add(lead)?;
            let want = need
                .checked_next_power_of_two()?
                .trailing_zeros()
                .max(MIN_ORDER);
            if want <= k {
                for j in (want..k).rev() {
                    self.set_tag(off + (1 << j), tag(j, USED));
                    self.release(off + (1 << j), j);
                }
                self.set_used(off, want, ptr.as_ptr());
                return Some(ptr);
            }
            if (want as usize) < ORDERS && self.grow_in_place(off, k, want) {
                self.set_used(off, want, ptr.as_ptr());
                return Some(ptr);
            }
            let moved = self.allocate(size, align)?;
            let keep = ((1usize << k) - lead).min(size);
            ptr::copy_nonoverlapping(ptr.as_ptr(), moved.as_ptr(), keep);
            self.release(off, k);
            Some(moved)
        }
    }

    unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        // SAFETY: by the caller's contract `ptr` is live in this heap.
        let (off, k) = unsafe { self.block_of(ptr) };
        off + (1 << k) - (ptr.as_ptr() as usize - self.base as usize)
    }

    fn heap_size(&self) -> usize {
        self.brk
    }

    fn check(&self) -> Result<Stats, CheckError> {
        let mut st = Stats {
            heap_size: self.brk,
            ..Stats::default()
        };
        let mut off = 0;
        // SAFETY: each tag is read at a block start below the break.
        unsafe {
            while off < self.brk {
                let t = self.tag_at(off);
                let k = (t >> 3) as u32;
                ensure!(
                    (MIN_ORDER..ORDERS as u32).contains(&k)
                        && (t & STATE == FREE || t & STATE == USED),
                    "buddy: bad tag {t:#x} at offset {off}"
                );
                let size = 1usize << k;
                ensure!(
                    off % size == 0 && off + size <= self.brk,
                    "buddy: block at {off} misplaced"
                );
                if t & STATE == FREE {
                    ensure!(
                        !self.is_free(off ^ size, k),
                        "buddy: free buddies at {off} not merged"
                    );
                    st.free_blocks += 1;
                    st.free_bytes += size;
                    st.largest_free = st.largest_free.max(size);
                } else {
                    st.live_blocks += 1;
                    st.live_bytes += size - WORD;
                }
                off += size;
            }
        }
        let (mut count, mut bytes) = (0, 0);
        let mut visit = || -> Result<(), CheckError> {
            for (k, list) in self.lists.iter().enumerate() {
                // SAFETY: a listed block is range-checked before its tag is read;
                // the mark stops a walk that comes back to a block.
                unsafe {
                    list.visit(&mut |b| {
                        let o = (b.addr() as usize).wrapping_sub(self.base as usize);
                        ensure!(
                            o < self.brk && o.is_multiple_of(1 << MIN_ORDER),
                            "buddy: list {k} holds {:p}",
                            b.addr()
                        );
                        let t = self.tag_at(o);
                        ensure!(t & MARK == 0, "buddy: block {o} listed twice");
                        ensure!(
                            t == tag(k as u32, FREE),
                            "buddy: list {k} holds block {o} with tag {t:#x}"
                        );
                        self.base.add(o).cast::<usize>().write(t | MARK);
                        count += 1;
                        bytes += 1 << k;
                        Ok(())
                    })?;
                }
            }
            Ok(())
        };
        let visited = visit();
        // SAFETY: the walk above showed the tags tile the heap.
        unsafe {
            let mut off = 0;
            while off < self.brk {
                let t = self.tag_at(off) & !MARK;
                self.base.add(off).cast::<usize>().write(t);
                off += 1 << (t >> 3);
            }
        }
        visited?;
        ensure!(
            count == st.free_blocks && bytes == st.free_bytes,
            "buddy: lists hold {count} blocks of {bytes} bytes, the heap {} of {}",
            st.free_blocks,
            st.free_bytes
        );
        Ok(st)
    }
}
