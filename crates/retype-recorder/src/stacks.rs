//! The call stack of each malloc-family call: walked with framehop from the
//! hook's own frame through the program's, using each object's unwind tables
//! (`.eh_frame`, which compilers emit for C, C++ and Rust whether or not the
//! code keeps frame pointers) and frame pointers where an object has none;
//! the recorder's own frames are left out, and at most `RETYPE_STACK_DEPTH`
//! frames are kept (default 32; 0 records no stacks, the cheapest recording).
//!
//! Unwinding never allocates: framehop looks up each return address in a
//! per-thread rule cache (kept in the thread's buffer, made once per buffer
//! from the recorder's own arena) and reads the stack through a closure that
//! stays between the current stack pointer and the top of the thread's stack.
//! Each stack is then interned ([`stack_table`]): events carry its id.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::stack_table::MAX_DEPTH;

/// Frames kept per stack; 0: no stacks.
static DEPTH: AtomicUsize = AtomicUsize::new(0);
const DEFAULT_DEPTH: usize = 32;
const ENV_DEPTH: &[u8] = b"RETYPE_STACK_DEPTH\0";

/// Reads `RETYPE_STACK_DEPTH` (once per program image): a number of frames,
/// at most [`MAX_DEPTH`]; unset or not a number: 32.
pub fn configure() {
    let depth = crate::output::getenv(ENV_DEPTH)
        .and_then(crate::sys::parse_num)
        .map_or(DEFAULT_DEPTH, |d| (d as usize).min(MAX_DEPTH));
    DEPTH.store(if SUPPORTED { depth } else { 0 }, Ordering::Relaxed);
}

/// Whether stacks can be captured on this architecture.
const SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// The most frames a stack keeps (0: stacks are not recorded).
#[inline(always)]
pub fn depth() -> usize {
    DEPTH.load(Ordering::Relaxed)
}

#[cfg(target_arch = "x86_64")]
pub use unwind::{capture, ThreadStack};

#[cfg(not(target_arch = "x86_64"))]
pub use unsupported::{capture, ThreadStack};

#[cfg(target_arch = "x86_64")]
mod unwind {
    use std::mem::MaybeUninit;

    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};
    use framehop::{MustNotAllocateDuringUnwind, Unwinder};

    use super::{depth, MAX_DEPTH};
    use crate::{modules, stack_table};

    type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

    /// A thread's unwinding state, kept in its buffer (used by the owner
    /// only); all zeros is a valid state without a cache.
    pub struct ThreadStack {
        /// framehop's rule cache, made on the buffer's first stack.
        cache: *mut Cache,
        /// The top of the owning thread's stack: reads stay below it (0: unknown).
        top: u64,
        /// Stacks that could not be unwound to their end.
        failures: u32,
    }

    impl ThreadStack {
        /// The state of a buffer that a new thread (the caller) takes.
        pub fn begin(&mut self) {
            self.top = stack_top();
        }
    }

    extern "C" {
        /// The main thread's stack pointer when the program started (ld.so).
        static __libc_stack_end: *const libc::c_void;
    }

    /// The top of the calling thread's stack, or 0 if it cannot be told.
    fn stack_top() -> u64 {
        let sp = registers().1;
        // A thread made by pthread_create has its descriptor at the top of
        // its stack; the main thread's stack ends where the program began.
        // SAFETY: pthread_self has no preconditions; __libc_stack_end is set
        // by the loader before any code of ours runs.
        let candidates = [
            unsafe { libc::pthread_self() } as u64,
            unsafe { __libc_stack_end as u64 }.next_multiple_of(4096),
        ];
        candidates
            .into_iter()
            .find(|&top| top > sp && top - sp < 1 << 30)
            .unwrap_or(0)
    }

    /// The current instruction, stack and frame pointers.
    #[inline(always)]
    fn registers() -> (u64, u64, u64) {
        let (pc, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers, touches no memory.
        unsafe {
            core::arch::asm!(
                "lea {pc}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                pc = out(reg) pc,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags)
            )
        };
        (pc, sp, bp)
    }

    /// The id of the current call stack (its frames outside the recorder),
    /// or 0 if there is none to record.
    #[inline(never)]
    pub fn capture(t: &mut ThreadStack) -> u32 {
        let Some(unwinder) = modules::unwinder() else {
            return 0;
        };
        if t.cache.is_null() {
            t.cache = Box::into_raw(Box::new(Cache::new_in()));
        }
        // SAFETY: the cache is this thread's alone and never freed.
        let cache = unsafe { &mut *t.cache };
        let (pc, sp, bp) = registers();
        let top = t.top;
        let mut read = |at: u64| {
            if at >= sp && at.checked_add(8).is_some_and(|end| end <= top) {
                // SAFETY: [sp, top) is this thread's live stack, mapped.
                Ok(unsafe { (at as *const u64).read_unaligned() })
            } else {
                Err(())
            }
        };
        let own = modules::own();
        let depth = depth();
        let mut frames = [MaybeUninit::<u64>::uninit(); MAX_DEPTH];
        let (mut n, mut truncated, mut failed) = (0, false, false);
        let mut it = unwinder.iter_frames(pc, UnwindRegsX86_64::new(pc, sp, bp), cache, &mut read);
        loop {
            match it.next() {
                Ok(Some(f)) => {
                    let at = f.address();
                    if n == 0 && own.contains(&at) {
                        continue;
                    }
                    if n == depth {
                        truncated = true;
                        break;
                    }
                    frames[n].write(at);
                    n += 1;
                }
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            modules::unwinding_failed(&mut t.failures);
        }
        // SAFETY: frames[..n] were written above.
        let frames = unsafe { std::slice::from_raw_parts(frames.as_ptr().cast::<u64>(), n) };
        stack_table::intern(frames, truncated)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod unsupported {
    /// No stacks on this architecture ([`super::depth`] is 0).
    pub struct ThreadStack;

    impl ThreadStack {
        pub fn begin(&mut self) {}
    }

    pub fn capture(_: &mut ThreadStack) -> u32 {
        0
    }
}

/// Whether stacks are recorded (`RETYPE_STACK_DEPTH` is not 0).
#[inline(always)]
pub fn enabled() -> bool {
    depth() != 0
}
