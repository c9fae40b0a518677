//! The transfer cache, as tcmalloc's: a thread's full batch of frees into another heap's page
//! (see `remote`) goes onto a shared stack of its class, from which any heap that would
//! otherwise claim a page of the class takes a batch (see `heap::refill`). The blocks stay
//! counted as used by their page meanwhile, so no page changes owner and their later free is a
//! remote free to the page's owner as any other.
//!
//! Why: where threads free what others allocated, each freed block waits for its page's owner
//! to collect it, and an owner that does not run (blocked, or descheduled on few cores)
//! collects nothing; meanwhile the threads that run claim new pages. `xmalloc 8 64 500` (16
//! threads on 2 cores) held 40 MiB carved at its peak for 8 MiB live: each producer's heap
//! kept what its largest burst claimed, its blocks freed and waiting on its remote lists while
//! the other producers ran. With the cache the blocks go to whichever producer runs.
//!
//! Bounded: at most [`LIMIT`] bytes wait in all stacks together (a full cache sends batches
//! to their owners as before); they go back to their owners at `malloc_trim` (see [`drain`]).

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::lock::SpinLock;
use crate::page::Block;
use crate::size_class::{self, CLASSES};

/// Bytes of blocks the stacks hold together at most: `xmalloc 8 64 500` peaked at 39.3 and
/// 36.5 MiB with 2 MiB (one class in use), 17.7-18.6 with 4 and 14.4-15.4 with 8.
pub(crate) const LIMIT: usize = 8 << 20;

/// Bytes in all stacks.
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// A class's stack of batches: `top` is the first block of the newest batch, whose second
/// word links to the next batch's first block, with the batch's length in its top 16 bits.
/// `top` is read without the lock to see that the stack is empty.
struct Stack {
    top: AtomicPtr<Block>,
    lock: SpinLock<()>,
}

static STACKS: [Stack; CLASSES] = [const {
    Stack {
        top: AtomicPtr::new(ptr::null_mut()),
        lock: SpinLock::new(()),
    }
}; CLASSES];

/// Bits of a user-space address: the length of a batch goes above them.
const ADDRESS_BITS: u32 = 48;

/// Pushes the batch of `len` blocks of `class` starting at `first`, linked and ending in a
/// null link; false (the batch untouched) if the cache is full.
pub(crate) unsafe fn push(class: usize, first: *mut Block, len: u32) -> bool {
    let bytes = len as usize * size_class::block_size(class);
    if BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes > LIMIT {
        BYTES.fetch_sub(bytes, Ordering::Relaxed);
        return false;
    }
    let s = &STACKS[class];
    let _held = s.lock.lock();
    let top = s.top.load(Ordering::Relaxed);
    // SAFETY: blocks are at least two words; the caller gives the batch up.
    unsafe { *first.cast::<usize>().add(1) = top as usize | (len as usize) << ADDRESS_BITS };
    s.top.store(first, Ordering::Relaxed);
    true
}

/// Takes the newest batch of `class`: its first block (the batch linked, ending in a null
/// link) and length.
pub(crate) fn pop(class: usize) -> Option<(*mut Block, u32)> {
    let s = &STACKS[class];
    if s.top.load(Ordering::Relaxed).is_null() {
        return None;
    }
    let _held = s.lock.lock();
    let first = s.top.load(Ordering::Relaxed);
    if first.is_null() {
        return None;
    }
    // SAFETY: the first block of a batch pushed above, its second word the link.
    let w = unsafe { *first.cast::<usize>().add(1) };
    s.top.store(
        (w & ((1 << ADDRESS_BITS) - 1)) as *mut Block,
        Ordering::Relaxed,
    );
    let len = (w >> ADDRESS_BITS) as u32;
    BYTES.fetch_sub(
        len as usize * size_class::block_size(class),
        Ordering::Relaxed,
    );
    Some((first, len))
}

/// Takes every stack's lock (before a fork, see `global`).
pub(crate) fn acquire_all() {
    STACKS.iter().for_each(|s| s.lock.acquire());
}

/// Releases the locks [`acquire_all`] took (after a fork, in the parent and the child).
pub(crate) fn release_all() {
    STACKS.iter().for_each(|s| s.lock.release());
}

/// Empties every stack, calling `each` on every batch (its first block and length).
pub(crate) fn drain(mut each: impl FnMut(*mut Block, u32)) {
    if BYTES.load(Ordering::Relaxed) == 0 {
        return;
    }
    for class in 0..CLASSES {
        while let Some((first, len)) = pop(class) {
            each(first, len);
        }
    }
}
