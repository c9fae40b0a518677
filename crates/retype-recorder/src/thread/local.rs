//! This thread's recorder state, in one thread-local. A preloaded library
//! reaches thread-locals of the general-dynamic model (Rust's, in a shared
//! object) through a `__tls_get_addr` call, about 13 instructions a hook; on
//! x86-64 the state is instead placed in the static TLS block (the
//! initial-exec model, as glibc's own thread-locals are), reached by two
//! instructions: the thread pointer plus an offset the loader wrote into the
//! GOT. Elsewhere it is a `thread_local!`. Either way a hook looks it up once
//! and passes the reference down.

use std::cell::Cell;

use super::buffer::ThreadBuf;
use crate::coarse::Clock;
use crate::sample::Gap;

/// All zeros is its initial state (the static TLS block starts zeroed).
#[repr(C)]
pub struct Local {
    /// This thread is inside the recorder (see [`Busy`]).
    busy: Cell<bool>,
    /// This thread's event buffer; null until its first event, and after its release.
    pub buf: Cell<*mut ThreadBuf>,
    /// This thread's rseq `rseq_cs` field (see [`crate::rseq::mark`]).
    pub rseq_cs: Cell<*mut u64>,
    /// This thread's countdown to its next sampled allocation.
    pub gap: Gap,
    /// This thread's coarse clock (an aggregate recording's).
    pub clock: Clock,
}

// The zero-filled thread-local (`.tbss`) that holds each thread's `Local`,
// named for the whole shared object (its other objects refer to it) and
// hidden from every other.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".globl retype_recorder_local",
    ".hidden retype_recorder_local",
    ".type retype_recorder_local, @object",
    ".size retype_recorder_local, {size}",
    ".balign {align}",
    "retype_recorder_local:",
    ".zero {size}",
    ".popsection",
    size = const std::mem::size_of::<Local>(),
    align = const std::mem::align_of::<Local>(),
);

/// The calling thread's state.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn local() -> &'static Local {
    let p: *const Local;
    // SAFETY: the thread pointer (`fs:0`) plus the block's offset from it,
    // which the loader stored in the GOT, is this thread's `Local`.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + retype_recorder_local@GOTTPOFF]",
            p = out(reg) p,
            options(pure, readonly, nostack),
        );
    }
    // SAFETY: all zeros is a valid `Local` (see its doc), the block lives as
    // long as its thread, and `&Local` is neither Send nor Sync (Cell), so
    // the reference never outlives the thread that took it.
    unsafe { &*p }
}

#[cfg(not(target_arch = "x86_64"))]
thread_local! {
    // SAFETY: all zeros is a valid `Local`, its initial state.
    static LOCAL: Local = const { unsafe { std::mem::zeroed() } };
}

/// The calling thread's state.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn local() -> &'static Local {
    // SAFETY: a const-initialised thread-local without destructor lives as long
    // as its thread, and `&Local` is neither Send nor Sync (Cell), so the
    // reference never outlives the thread that took it.
    LOCAL.with(|l| unsafe { &*(l as *const Local) })
}

/// This thread is inside the recorder while a `Busy` lives: calls it makes
/// then (the next allocator calling malloc itself, a libc function the
/// recorder uses) are forwarded without a record.
pub struct Busy(&'static Local);

impl Busy {
    /// `None` if this thread is already inside the recorder.
    pub fn enter() -> Option<Busy> {
        Busy::enter_on(local())
    }

    /// [`Busy::enter`] with the thread's state at hand.
    #[inline(always)]
    pub fn enter_on(l: &'static Local) -> Option<Busy> {
        // Lazily: a guard made and dropped on refusal would clear the mark.
        (!l.busy.replace(true)).then(|| Busy(l))
    }
}

impl Drop for Busy {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.busy.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a thread sees of its state: where it lies (twice), whether it
    /// started all zeros, and whether its marks stay its own.
    fn seen() -> (usize, usize, bool, bool) {
        let (a, b) = (local(), local());
        // SAFETY: `Local` is plain data of this size (Cells of integers and pointers).
        let bytes = unsafe {
            std::slice::from_raw_parts((a as *const Local).cast::<u8>(), size_of::<Local>())
        };
        let zeros = bytes.iter().all(|&x| x == 0);
        let first = Busy::enter();
        let kept = first.is_some() && Busy::enter().is_none();
        drop(first);
        (
            a as *const Local as usize,
            b as *const Local as usize,
            zeros,
            kept && Busy::enter().is_some(),
        )
    }

    #[test]
    fn each_thread_has_its_own_state_that_starts_all_zeros() {
        let threads: Vec<_> = (0..4).map(|_| std::thread::spawn(seen)).collect();
        for t in threads {
            let (a, b, zeros, marks) = t.join().unwrap();
            assert_eq!(a, b, "one place within a thread");
            assert!(zeros, "a new thread's state is all zeros");
            assert!(
                marks,
                "a thread inside the recorder is told so until it leaves"
            );
        }
        // Threads that lived at the same time cannot share their state.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(3));
        let spawned: Vec<_> = (0..3)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let place = local() as *const Local as usize;
                    barrier.wait();
                    place
                })
            })
            .collect();
        let together: Vec<_> = spawned.into_iter().map(|t| t.join().unwrap()).collect();
        let distinct: std::collections::HashSet<_> = together.iter().collect();
        assert_eq!(distinct.len(), 3, "{together:x?}");
    }
}
