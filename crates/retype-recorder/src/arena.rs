//! The recorder's own heap, its Rust global allocator: what its code
//! allocates (the unwinder's list of loaded objects, each thread buffer's
//! unwind cache) comes from pages it maps itself, never from the program's
//! allocator. So the hooks never allocate through malloc, and nothing the
//! recorder keeps appears in the trace or changes the heap being measured.
//!
//! The recorder allocates little and rarely (a cache per thread buffer, and
//! buffers are reused; a module list per change of the loaded objects), so
//! small blocks are carved from 1 MiB chunks by a bump pointer and never
//! reused; blocks of 64 KiB or more are mappings of their own, unmapped when
//! freed.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes mapped at a time for small blocks.
const CHUNK: usize = 1 << 20;
/// Blocks this large get a mapping of their own.
const LARGE: usize = 64 << 10;
const PAGE: usize = 4096;

pub struct Arena;

#[global_allocator]
static ARENA: Arena = Arena;

/// Held while the bump pointer moves (allocations are rare: a spin lock).
static LOCK: AtomicBool = AtomicBool::new(false);
/// The free part of the current chunk: `[TOP, END)`.
static TOP: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);

fn map(bytes: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block handed out is fresh memory of at least the layout's
// size and alignment, owned by no other block.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > PAGE {
            return null_mut();
        }
        if layout.size() >= LARGE {
            return map(layout.size().next_multiple_of(PAGE));
        }
        while LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        let mut top = TOP.load(Ordering::Relaxed).next_multiple_of(layout.align());
        if top == 0 || top + layout.size() > END.load(Ordering::Relaxed) {
            let chunk = map(CHUNK) as usize;
            if chunk == 0 {
                LOCK.store(false, Ordering::Release);
                return null_mut();
            }
            END.store(chunk + CHUNK, Ordering::Relaxed);
            top = chunk;
        }
        TOP.store(top + layout.size(), Ordering::Relaxed);
        LOCK.store(false, Ordering::Release);
        top as *mut u8
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if layout.size() >= LARGE {
            // SAFETY: large blocks are whole mappings of this rounded size.
            unsafe { libc::munmap(p.cast(), layout.size().next_multiple_of(PAGE)) };
        }
    }
}

/// In a fork child: a thread that held the lock does not exist there, and it
/// may have left the bump pointer half moved: the next block takes a new chunk.
pub fn after_fork_child() {
    TOP.store(0, Ordering::Relaxed);
    END.store(0, Ordering::Relaxed);
    LOCK.store(false, Ordering::Release);
}
