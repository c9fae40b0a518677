//! Whether the thread was descheduled during a call, read from the restartable-sequences
//! (rseq) area that glibc registers with the kernel for every thread.
//!
//! Before the call the hook points the area's `rseq_cs` at a critical-section descriptor
//! whose code never runs. Whenever the kernel switches the thread out (preempted, blocked,
//! moved to another CPU, or a signal delivered), on its way back to the thread it finds the
//! thread outside that section and clears `rseq_cs`. So a mark still there after the call
//! means the thread ran the whole call: its latency is the allocator's own time (interrupts
//! and a hypervisor's steal aside). One store before the call, a load and a store after it,
//! and no system call.
//!
//! Without rseq (glibc before 2.35, the tunable `glibc.pthread.rseq=0`, a thread whose
//! registration failed, or another architecture) nothing is marked and every call reads as
//! not descheduled; the trace's `descheduling` metadata says which (`rseq` or `none`). A
//! program whose allocator uses rseq itself replaces the mark with its own descriptor; such
//! a call reads as not descheduled too, so the flag never hides a call that ran throughout.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering};

/// Offsets in glibc's `struct rseq` (`cpu_id_start` u32, `cpu_id` u32, `rseq_cs` u64).
const CPU_ID: isize = 4;
const CS: isize = 8;

/// The area's offset from the thread pointer (`__rseq_offset`), when rseq is in use.
static OFFSET: AtomicIsize = AtomicIsize::new(0);
static ENABLED: AtomicBool = AtomicBool::new(false);

/// `struct rseq_cs`: version and flags (0), start_ip, post_commit_offset, abort_ip; written
/// once by [`init`] (code addresses are known only at run time).
#[repr(C, align(32))]
struct Descriptor {
    version_flags: AtomicU64,
    start_ip: AtomicU64,
    post_commit_offset: AtomicU64,
    abort_ip: AtomicU64,
}

static DESCRIPTOR: Descriptor = Descriptor {
    version_flags: AtomicU64::new(0),
    start_ip: AtomicU64::new(0),
    post_commit_offset: AtomicU64::new(0),
    abort_ip: AtomicU64::new(0),
};

/// The section the descriptor names: one `nop` that never runs, then the signature the
/// kernel checks before any abort address (glibc's x86-64 `RSEQ_SIG`), then the abort
/// address, a trap: the kernel would jump there only from inside the section.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
extern "C" fn section() {
    core::arch::naked_asm!("nop", ".long 0x53053053", "ud2")
}

/// Finds glibc's rseq area and fills in the descriptor, before recording starts.
pub fn init() {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: dlsym with NUL-terminated names; glibc's symbols, when present, are a
        // `ptrdiff_t` and an `unsigned int` that never change after start-up.
        let (offset, size) = unsafe {
            let o = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
            let s = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
            if o.is_null() || s.is_null() {
                return;
            }
            (*o.cast::<isize>(), *s.cast::<u32>())
        };
        // The area holds `rseq_cs` only if glibc registered it (size 0: not registered).
        if size < 16 {
            return;
        }
        let start = section as *const () as u64;
        DESCRIPTOR.start_ip.store(start, Ordering::Relaxed);
        DESCRIPTOR.post_commit_offset.store(1, Ordering::Relaxed);
        DESCRIPTOR.abort_ip.store(start + 5, Ordering::Relaxed);
        OFFSET.store(offset, Ordering::Relaxed);
        ENABLED.store(true, Ordering::Release);
    }
}

/// The trace's `descheduling` metadata: how calls are told descheduled.
pub fn method() -> &'static [u8] {
    if ENABLED.load(Ordering::Acquire) {
        b"rseq"
    } else {
        b"none"
    }
}

/// This thread's `rseq_cs` field, if its area is registered.
#[cfg(not(target_arch = "x86_64"))]
fn field() -> Option<*mut u64> {
    None
}

/// This thread's `rseq_cs` field, if its area is registered.
#[cfg(target_arch = "x86_64")]
fn field() -> Option<*mut u64> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let tp: usize;
    // SAFETY: on x86-64 Linux the word at fs:0 is the thread pointer (the TCB's self
    // pointer), from which glibc's `__rseq_offset` locates the area.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    let area = tp.wrapping_add_signed(OFFSET.load(Ordering::Relaxed)) as *mut u8;
    // SAFETY: the area lies in this thread's TLS for its whole life; `cpu_id` is negative
    // (as u32, 2^31 and up) until registered or if registration failed.
    let cpu = unsafe { area.offset(CPU_ID).cast::<u32>().read_volatile() };
    (cpu < 1 << 31).then(|| area.wrapping_offset(CS).cast::<u64>())
}

/// What a thread's `slot` holds once it was looked up and the thread has no rseq area.
const NONE: *mut u64 = core::ptr::without_provenance_mut(1);

/// Marks this thread before a call; hand the result to [`descheduled`] after it. `slot`
/// is the thread's own cache of its `rseq_cs` field (null: not looked up yet).
#[inline(always)]
pub fn mark(slot: &Cell<*mut u64>) -> Option<*mut u64> {
    let mut cs = slot.get();
    if cs.is_null() {
        cs = field().unwrap_or(NONE);
        slot.set(cs);
    }
    if cs == NONE {
        return None;
    }
    // SAFETY: `rseq_cs` belongs to this thread; the descriptor is valid for the kernel
    // (version 0, abort address outside the section and after the signature).
    unsafe { cs.write_volatile(&DESCRIPTOR as *const Descriptor as u64) };
    Some(cs)
}

/// Whether the kernel cleared the mark since [`mark`]: the thread was switched out. Clears
/// the mark.
#[inline(always)]
pub fn descheduled(mark: Option<*mut u64>) -> bool {
    let Some(cs) = mark else {
        return false;
    };
    // SAFETY: as in `mark`; clearing `rseq_cs` outside any critical section is what the
    // kernel itself does.
    unsafe {
        let now = cs.read_volatile();
        cs.write_volatile(0);
        now == 0
    }
}
