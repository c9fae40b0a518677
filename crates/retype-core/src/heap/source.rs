//! Where a heap's memory comes from: an `sbrk` that can only grow.

use alloc::alloc::{alloc, dealloc, Layout};
use core::ptr::NonNull;

/// The alignment of a source's first break; heaps rely on it.
pub const SOURCE_ALIGN: usize = 4096;

/// A contiguous region that grows at its end, like Unix `sbrk`.
///
/// The region starts at an address aligned to [`SOURCE_ALIGN`] and never
/// shrinks, so the bytes it has handed out are the heap's high-water mark.
pub trait Source {
    /// Extends the region by `increment` bytes and returns the old break (the
    /// start of the new bytes), or `None` if the region cannot grow that far.
    /// `sbrk(0)` returns the current break.
    fn sbrk(&mut self, increment: usize) -> Option<NonNull<u8>>;
}

/// A fixed buffer of `capacity` bytes handed out by [`Source::sbrk`], as
/// malloc-lab's `memlib.c` does. Pages the heap never touches stay unmapped
/// by the system allocator, so a large capacity costs nothing.
pub struct Arena {
    base: NonNull<u8>,
    capacity: usize,
    brk: usize,
}

// SAFETY: the arena owns its buffer; nothing else points into it.
unsafe impl Send for Arena {}

impl Arena {
    /// A buffer of `capacity` bytes; `None` if the system allocator refuses it.
    pub fn new(capacity: usize) -> Option<Arena> {
        let layout = Layout::from_size_align(capacity.max(1), SOURCE_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { alloc(layout) })?;
        Some(Arena {
            base,
            capacity,
            brk: 0,
        })
    }

    /// The buffer's first byte.
    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Bytes the buffer holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes handed out so far.
    pub fn used(&self) -> usize {
        self.brk
    }

    /// Takes every byte back, so the next heap starts on pages already touched
    /// (as malloc-lab's `mem_reset_brk`). No heap can still borrow the arena.
    pub fn reset(&mut self) {
        self.brk = 0;
    }
}

/// A heap may borrow its source, so one arena can serve heap after heap.
impl<S: Source + ?Sized> Source for &mut S {
    fn sbrk(&mut self, increment: usize) -> Option<NonNull<u8>> {
        (**self).sbrk(increment)
    }
}

impl Source for Arena {
    fn sbrk(&mut self, increment: usize) -> Option<NonNull<u8>> {
        if increment > self.capacity - self.brk {
            return None;
        }
        // SAFETY: brk <= capacity, so the result stays inside (or one past) the buffer.
        let old = unsafe { self.base.add(self.brk) };
        self.brk += increment;
        Some(old)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let layout =
            Layout::from_size_align(self.capacity.max(1), SOURCE_ALIGN).expect("checked in new");
        // SAFETY: base was allocated in `new` with this very layout.
        unsafe { dealloc(self.base.as_ptr(), layout) }
    }
}
