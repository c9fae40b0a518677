//! The boundary-tag heap engine shared by every fit policy.
//!
//! [`FitHeap`] lays blocks out back to back from the source's first break up
//! to an epilogue (a zero-sized allocated header in the heap's last word). It
//! splits a free block that is larger than a request by at least a minimal
//! block, cutting small requests from the block's end and others from its
//! start; coalesces a freed block with free neighbours at once (so no two
//! free blocks are ever adjacent); grows the heap by what a request lacks
//! (extending a free block at the end; a small request adds some slack); and
//! reallocates in place when the block, its free successor or the end of the
//! heap can hold the new size.
//!
//! Which free block serves a request is the policy: a [`FreeIndex`] holds the
//! free blocks in their own link words and answers [`FreeIndex::find`].
//! Rule for the engine: a block leaves the index before its header changes and
//! joins it after its header and footer are written.

use core::ptr::{self, NonNull};

use super::block::{Block, GRANULE, WORD};
use super::{ensure, CheckError, Heap, Source, Stats, MIN_ALIGN};

/// The set of free blocks of a [`FitHeap`], organised by a placement policy.
pub trait FreeIndex: Default {
    /// Which heap this index makes.
    const KIND: super::HeapKind;
    /// Link words the index keeps in each free block after its header.
    const LINKS: usize;

    /// Adds a free block.
    ///
    /// # Safety
    /// `b` must be a free block of the heap, not in the index.
    unsafe fn insert(&mut self, b: Block);

    /// Removes a block.
    ///
    /// # Safety
    /// `b` must be in the index, with the header it had when inserted.
    unsafe fn remove(&mut self, b: Block);

    /// A free block of at least `size` bytes chosen by the policy, left in the index.
    ///
    /// # Safety
    /// The index must hold only free blocks of a well-formed heap.
    unsafe fn find(&mut self, size: usize) -> Option<Block>;

    /// Calls `f` once per indexed block, checking the index's own invariants.
    ///
    /// # Safety
    /// As for [`FreeIndex::find`]; `f` must reject a block seen twice, which
    /// bounds the walk of a corrupt structure.
    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError>;
}

/// Blocks up to this size are small: they are cut from the end of a free
/// block, larger ones from its start, so that small and large blocks form
/// separate runs and the holes freed large blocks leave coalesce (the
/// malloc-lab `binary` traces defeat a heap that interleaves them).
pub const SMALL_BLOCK: usize = 96;

/// When a small request grows the heap, it grows by 1/SLACK_DIVISOR of the
/// heap more, so later small requests have a free block to be cut from.
pub const SLACK_DIVISOR: usize = 32;

/// A boundary-tag heap whose placement policy is the free index `I`.
pub struct FitHeap<I, S> {
    index: I,
    source: S,
    base: *mut u8,
    /// The epilogue's header, the heap's last word.
    end: *mut u8,
}

// SAFETY: the heap's pointers point only into memory it owns through its
// source; moving the heap to another thread moves that ownership with it.
unsafe impl<I, S: Send> Send for FitHeap<I, S> {}

impl<I: FreeIndex, S: Source> FitHeap<I, S> {
    /// The smallest block: header, the index's links and a footer.
    pub const MIN_BLOCK: usize = ((I::LINKS + 2) * WORD).next_multiple_of(GRANULE);

    /// An empty heap over `source`: just the epilogue. `None` if the source
    /// cannot give one word.
    pub fn new(mut source: S) -> Option<Self> {
        let base = source.sbrk(WORD)?.as_ptr();
        // SAFETY: the source just gave us this word.
        unsafe { Block::at(base).set_epilogue(true) };
        Some(FitHeap {
            index: I::default(),
            source,
            base,
            end: base,
        })
    }

    /// The block size that holds `size` payload bytes.
    fn block_size(size: usize) -> Option<usize> {
        let b = size.checked_add(WORD + GRANULE - 1)? & !(GRANULE - 1);
        (b <= isize::MAX as usize / 2).then_some(b.max(Self::MIN_BLOCK))
    }

    /// Grows the source by `increment` bytes, moving the epilogue to the new end.
    fn extend(&mut self, increment: usize) -> Option<()> {
        let old = self.source.sbrk(increment)?.as_ptr();
        if old != self.end.wrapping_add(WORD) {
            return None; // a source that is not contiguous cannot extend the heap
        }
        self.end = self.end.wrapping_add(increment);
        // SAFETY: the new last word was just obtained from the source; the
        // caller writes the block before it, which fixes the flag.
        unsafe { Block::at(self.end).set_epilogue(false) };
        Some(())
    }

    /// Takes a free block of at least `size` bytes out of the index, or makes
    /// one by growing the heap, by `slack` bytes more than it lacks.
    unsafe fn take(&mut self, size: usize, slack: usize) -> Option<Block> {
        // SAFETY: the index holds free blocks of this heap.
        if let Some(b) = unsafe { self.index.find(size) } {
            // SAFETY: `find` returned an indexed block.
            unsafe { self.index.remove(b) };
            return Some(b);
        }
        let epilogue = Block::at(self.end);
        // SAFETY: the epilogue and, when it says so, the free block before it are heap blocks.
        unsafe {
            let (block, have) = if epilogue.prev_allocated() {
                (epilogue, 0)
            } else {
                let last = epilogue.prev();
                (last, last.size())
            };
            // A policy may pass over a last block that fits (TLSF rounds requests up).
            if have >= size {
                self.index.remove(block);
                return Some(block);
            }
            let prev_allocated = block.prev_allocated();
            let size = size + slack;
            self.extend(size - have)?;
            if have > 0 {
                self.index.remove(block);
            }
            block.set_free(size, prev_allocated);
            Some(block)
        }
    }

    /// Splits a leading free block off `b` (free, not indexed) so that the
    /// payload of what remains is aligned to `align`; returns the remainder.
    unsafe fn align_front(&mut self, b: Block, align: usize) -> Block {
        let payload = b.payload() as usize;
        let mut aligned = payload.next_multiple_of(align);
        if aligned != payload && aligned - payload < Self::MIN_BLOCK {
            aligned = (payload + Self::MIN_BLOCK).next_multiple_of(align);
        }
        let lead = aligned - payload;
        if lead == 0 {
            return b;
        }
        // SAFETY: the caller reserved MIN_BLOCK + align bytes of slack in `b`.
        unsafe {
            let size = b.size();
            let prev_allocated = b.prev_allocated();
            let rest = Block::at(b.addr().add(lead));
            rest.set_free(size - lead, false);
            b.set_free(lead, prev_allocated);
            self.index.insert(b);
            rest
        }
    }

    /// Allocates a block of `size` bytes in the free, unindexed block `b`, at
    /// its start or, with `at_end`, at its end, returning the rest to the index
    /// when it can form a block. Returns the allocated block.
    unsafe fn place(&mut self, b: Block, size: usize, at_end: bool) -> Block {
        // SAFETY: `b` is a free heap block of at least `size` bytes; each
        // header is written before the block after it is told its state.
        unsafe {
            let have = b.size();
            let prev_allocated = b.prev_allocated();
            let rest = have - size;
            if rest < Self::MIN_BLOCK {
                b.set_allocated(have, prev_allocated);
                b
            } else if at_end {
                let a = Block::at(b.addr().add(rest));
                b.set_free(rest, prev_allocated);
                a.set_allocated(size, false);
                self.index.insert(b);
                a
            } else {
                b.set_allocated(size, prev_allocated);
                let tail = b.next();
                tail.set_free(rest, true);
                self.index.insert(tail);
                b
            }
        }
    }

    /// Frees the allocated block `b`, coalescing it with free neighbours.
    unsafe fn release(&mut self, b: Block) {
        // SAFETY: `b` is an allocated block; its neighbours are heap blocks.
        unsafe {
            let mut start = b;
            let mut size = b.size();
            let next = b.next();
            if !next.is_allocated() {
                self.index.remove(next);
                size += next.size();
            }
            if !b.prev_allocated() {
                start = b.prev();
                self.index.remove(start);
                size += start.size();
            }
            // No two free blocks touch, so whatever precedes `start` is allocated.
            start.set_free(size, true);
            self.index.insert(start);
        }
    }

    /// Shrinks the allocated block `b` to `size` bytes, freeing the tail if it
    /// can form a block.
    unsafe fn shrink(&mut self, b: Block, size: usize) {
        // SAFETY: `b` is an allocated block of at least `size` bytes.
        unsafe {
            let have = b.size();
            if have - size >= Self::MIN_BLOCK {
                b.set_allocated(size, b.prev_allocated());
                let tail = b.next();
                tail.set_allocated(have - size, true);
                self.release(tail);
            }
        }
    }

    /// Walks every block; with `check_index`, also checks that the index holds
    /// exactly the free blocks.
    fn walk(&self, check_index: bool) -> Result<Stats, CheckError> {
        let mut st = Stats {
            heap_size: self.heap_size(),
            ..Stats::default()
        };
        let mut b = Block::at(self.base);
        let mut prev_allocated = true;
        // SAFETY: each header is read only after checking it lies before the epilogue.
        unsafe {
            while b.addr() < self.end {
                let size = b.size();
                ensure!(
                    size.is_multiple_of(GRANULE)
                        && size >= Self::MIN_BLOCK
                        && size <= self.end as usize - b.addr() as usize,
                    "block {:p}: bad size {size}",
                    b.addr()
                );
                ensure!(
                    b.prev_allocated() == prev_allocated,
                    "block {:p}: wrong previous-allocated flag",
                    b.addr()
                );
                ensure!(!b.is_marked(), "block {:p}: stale check mark", b.addr());
                if b.is_allocated() {
                    st.live_blocks += 1;
                    st.live_bytes += size - WORD;
                } else {
                    ensure!(
                        prev_allocated,
                        "block {:p}: two free blocks touch",
                        b.addr()
                    );
                    ensure!(
                        b.footer() == size,
                        "block {:p}: footer differs from header",
                        b.addr()
                    );
                    st.free_blocks += 1;
                    st.free_bytes += size;
                    st.largest_free = st.largest_free.max(size);
                }
                prev_allocated = b.is_allocated();
                b = b.next();
            }
            let epilogue = Block::at(self.end);
            ensure!(b == epilogue, "the last block overruns the epilogue");
            ensure!(
                epilogue.is_allocated()
                    && epilogue.size() == 0
                    && epilogue.prev_allocated() == prev_allocated,
                "bad epilogue"
            );
        }
        if check_index {
            self.check_index(&st)?;
        }
        Ok(st)
    }

    /// Checks that the index visits each free block once and nothing else.
    fn check_index(&self, st: &Stats) -> Result<(), CheckError> {
        let (base, end) = (self.base as usize, self.end as usize);
        let (mut count, mut bytes) = (0, 0);
        // SAFETY: a visited block is range-checked before its header is read;
        // the mark bit stops a walk that comes back to a block.
        let visited = unsafe {
            self.index.visit(&mut |f| {
                let a = f.addr() as usize;
                ensure!(
                    a >= base && a < end && a.is_multiple_of(GRANULE),
                    "index holds {:p}, not a block",
                    f.addr()
                );
                ensure!(
                    !f.is_allocated(),
                    "index holds allocated block {:p}",
                    f.addr()
                );
                ensure!(!f.mark(), "index holds block {:p} twice", f.addr());
                count += 1;
                bytes += f.size();
                Ok(())
            })
        };
        // SAFETY: the walk succeeded, so every block header is well formed.
        unsafe {
            let mut b = Block::at(self.base);
            while b.addr() < self.end {
                b.unmark();
                b = b.next();
            }
        }
        visited?;
        ensure!(
            count == st.free_blocks && bytes == st.free_bytes,
            "index holds {count} blocks of {bytes} bytes, the heap {} of {}",
            st.free_blocks,
            st.free_bytes
        );
        Ok(())
    }
}

impl<I: FreeIndex, S: Source> Heap for FitHeap<I, S> {
    fn kind(&self) -> super::HeapKind {
        I::KIND
    }

    fn allocate(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
        if !align.is_power_of_two() {
            return None;
        }
        let size = Self::block_size(size)?;
        // SAFETY: `take` returns a free unindexed block of the requested size,
        // which `align_front` and `place` may cut.
        unsafe {
            if align > MIN_ALIGN {
                let b = self.take(size.checked_add(align + Self::MIN_BLOCK)?, 0)?;
                let b = self.align_front(b, align);
                return NonNull::new(self.place(b, size, false).payload());
            }
            let small = size <= SMALL_BLOCK;
            let slack = if small {
                (self.heap_size() / SLACK_DIVISOR) & !(GRANULE - 1)
            } else {
                0
            };
            let b = self.take(size, slack)?;
            NonNull::new(self.place(b, size, small).payload())
        }
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>) {
        // SAFETY: by the caller's contract `ptr` is a live payload of this heap.
        unsafe { self.release(Block::of_payload(ptr.as_ptr())) }
    }

    unsafe fn reallocate(
        &mut self,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
    ) -> Option<NonNull<u8>> {
        let need = Self::block_size(size)?;
        let b = Block::of_payload(ptr.as_ptr());
        // SAFETY: `b` is a live block of this heap; its neighbours are heap blocks.
        unsafe {
            let have = b.size();
            if need <= have {
                self.shrink(b, need);
                return Some(ptr);
            }
            let next = b.next();
            let next_free = if next.is_allocated() { 0 } else { next.size() };
            if have + next_free >= need {
                self.index.remove(next);
                b.set_allocated(have + next_free, b.prev_allocated());
                self.shrink(b, need);
                return Some(ptr);
            }
            let after = if next_free > 0 { next.next() } else { next };
            if after.addr() == self.end && self.extend(need - have - next_free).is_some() {
                if next_free > 0 {
                    self.index.remove(next);
                }
                b.set_allocated(need, b.prev_allocated());
                return Some(ptr);
            }
            let moved = self.allocate(size, align)?;
            ptr::copy_nonoverlapping(ptr.as_ptr(), moved.as_ptr(), (have - WORD).min(size));
            self.release(b);
            Some(moved)
        }
    }

    unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        // SAFETY: by the caller's contract `ptr` is a live payload of this heap.
        unsafe { Block::of_payload(ptr.as_ptr()).size() - WORD }
    }

    fn heap_size(&self) -> usize {
        self.end as usize + WORD - self.base as usize
    }

    fn check(&self) -> Result<Stats, CheckError> {
        self.walk(true)
    }
}
