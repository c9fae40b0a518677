//! Boundary tags (Knuth, TAOCP 2.5), with the footer kept only in free blocks.
//!
//! A block starts with a one-word header: its size (a multiple of the word)
//! and two flags, "this block is allocated" and "the block before it is
//! allocated". The payload follows the header. A free block repeats its size
//! in its last word (the footer), so the block after it can find its start
//! when it coalesces backwards; an allocated block needs no footer because the
//! "previous allocated" flag of its successor already says it is not free.
//! The words right after a free block's header hold the links of whatever
//! structure indexes the free blocks.

use core::ptr;

/// A machine word: the size of a header, a footer and a link.
pub const WORD: usize = core::mem::size_of::<usize>();

/// Block sizes are multiples of this, which leaves three flag bits in a header.
pub const GRANULE: usize = 8;

const ALLOCATED: usize = 1;
const PREV_ALLOCATED: usize = 2;
/// Set on free blocks while a heap check visits its free structure.
const MARK: usize = 4;
const FLAGS: usize = ALLOCATED | PREV_ALLOCATED | MARK;

/// The address of a block's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Block(*mut u8);

impl Block {
    /// The block whose header is at `addr`.
    pub fn at(addr: *mut u8) -> Block {
        Block(addr)
    }

    /// The block whose payload starts at `payload`.
    pub fn of_payload(payload: *mut u8) -> Block {
        Block(payload.wrapping_sub(WORD))
    }

    pub fn addr(self) -> *mut u8 {
        self.0
    }

    pub fn payload(self) -> *mut u8 {
        self.0.wrapping_add(WORD)
    }

    fn header(self) -> *mut usize {
        self.0.cast()
    }

    /// # Safety
    /// The block's header must be readable.
    pub unsafe fn size(self) -> usize {
        // SAFETY: by the caller's contract.
        unsafe { self.header().read() & !FLAGS }
    }

    /// # Safety
    /// The block's header must be readable.
    pub unsafe fn is_allocated(self) -> bool {
        // SAFETY: by the caller's contract.
        unsafe { self.header().read() & ALLOCATED != 0 }
    }

    /// # Safety
    /// The block's header must be readable.
    pub unsafe fn prev_allocated(self) -> bool {
        // SAFETY: by the caller's contract.
        unsafe { self.header().read() & PREV_ALLOCATED != 0 }
    }

    /// The block that follows this one in memory.
    ///
    /// # Safety
    /// The block's header must be readable and its size right.
    pub unsafe fn next(self) -> Block {
        // SAFETY: by the caller's contract.
        Block(unsafe { self.0.add(self.size()) })
    }

    /// The block before this one, found through its footer.
    ///
    /// # Safety
    /// The previous block must be free (`!self.prev_allocated()`).
    pub unsafe fn prev(self) -> Block {
        // SAFETY: a free block's footer is the word before our header.
        unsafe {
            let size = self.0.sub(WORD).cast::<usize>().read();
            Block(self.0.sub(size))
        }
    }

    /// The size stored in a free block's footer.
    ///
    /// # Safety
    /// The block must be a free block of a well-formed heap.
    pub unsafe fn footer(self) -> usize {
        // SAFETY: by the caller's contract the footer is the block's last word.
        unsafe { self.0.add(self.size() - WORD).cast::<usize>().read() }
    }

    /// Pointer to link word `i` of a free block (the words after the header).
    pub fn link(self, i: usize) -> *mut *mut u8 {
        self.0.wrapping_add(WORD * (1 + i)).cast()
    }

    /// Writes the header of an allocated block of `size` bytes and tells the
    /// next block that its predecessor is allocated.
    ///
    /// # Safety
    /// `size` bytes from the block plus the next block's header must be heap memory.
    pub unsafe fn set_allocated(self, size: usize, prev_allocated: bool) {
        // SAFETY: by the caller's contract.
        unsafe {
            self.header().write(size | ALLOCATED | flag(prev_allocated));
            let next = self.next().header();
            next.write(next.read() | PREV_ALLOCATED);
        }
    }

    /// Writes header and footer of a free block of `size` bytes and tells the
    /// next block that its predecessor is free.
    ///
    /// # Safety
    /// As for [`Block::set_allocated`].
    pub unsafe fn set_free(self, size: usize, prev_allocated: bool) {
        // SAFETY: by the caller's contract.
        unsafe {
            self.header().write(size | flag(prev_allocated));
            self.0.add(size - WORD).cast::<usize>().write(size);
            let next = self.next().header();
            next.write(next.read() & !PREV_ALLOCATED);
        }
    }

    /// Writes the end-of-heap sentinel: an allocated block of size 0.
    ///
    /// # Safety
    /// The word at the block must be heap memory.
    pub unsafe fn set_epilogue(self, prev_allocated: bool) {
        // SAFETY: by the caller's contract.
        unsafe { self.header().write(ALLOCATED | flag(prev_allocated)) }
    }

    /// Sets the check mark; returns whether it was already set.
    ///
    /// # Safety
    /// The block's header must be writable.
    pub unsafe fn mark(self) -> bool {
        // SAFETY: by the caller's contract.
        unsafe {
            let h = self.header().read();
            self.header().write(h | MARK);
            h & MARK != 0
        }
    }

    /// # Safety
    /// The block's header must be writable.
    pub unsafe fn unmark(self) {
        // SAFETY: by the caller's contract.
        unsafe { self.header().write(self.header().read() & !MARK) }
    }

    /// # Safety
    /// The block's header must be readable.
    pub unsafe fn is_marked(self) -> bool {
        // SAFETY: by the caller's contract.
        unsafe { self.header().read() & MARK != 0 }
    }
}

fn flag(prev_allocated: bool) -> usize {
    if prev_allocated {
        PREV_ALLOCATED
    } else {
        0
    }
}

/// Reads link word `i` of a free block as a block (`None` for null).
///
/// # Safety
/// `b` must be a free block with at least `i + 1` link words.
pub unsafe fn get_link(b: Block, i: usize) -> Option<Block> {
    // SAFETY: by the caller's contract.
    let p = unsafe { b.link(i).read() };
    (!p.is_null()).then_some(Block(p))
}

/// Writes link word `i` of a free block.
///
/// # Safety
/// As for [`get_link`].
pub unsafe fn set_link(b: Block, i: usize, to: Option<Block>) {
    // SAFETY: by the caller's contract.
    unsafe { b.link(i).write(to.map_or(ptr::null_mut(), |t| t.0)) }
}
