//! The operating-system backend: anonymous mappings, huge-page advice, a coarse clock.
//!
//! Nothing here allocates, so every function may be called from inside malloc. Every call
//! that maps, unmaps, moves, advises or protects memory is counted (`stats`), so a real-time
//! program can check that it makes none after warm-up.

use core::ptr;

use crate::consts::OS_PAGE;
use crate::stats;

/// Maps `len` bytes of zeroed, private, anonymous memory; null on failure.
pub(crate) unsafe fn map(len: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choice aliases nothing.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return ptr::null_mut();
    }
    stats::add(&stats::MMAP_CALLS, 1);
    p.cast()
}

/// Unmaps a range obtained from [`map`] or [`map_aligned`].
pub(crate) unsafe fn unmap(p: *mut u8, len: usize) {
    // SAFETY: the caller owns the whole range and nothing refers to it any more.
    unsafe { libc::munmap(p.cast(), len) };
    stats::add(&stats::MUNMAP_CALLS, 1);
}

/// Maps `len` bytes starting at a multiple of `align` (a power of two ≥ the OS page size):
/// over-map by `align`, then give back the unaligned head and the tail.
pub(crate) unsafe fn map_aligned(len: usize, align: usize) -> *mut u8 {
    let Some(over) = len.checked_add(align) else {
        return ptr::null_mut();
    };
    // SAFETY: a fresh mapping owned by us.
    let raw = unsafe { map(over) };
    if raw.is_null() {
        return raw;
    }
    let start = (raw as usize + align - 1) & !(align - 1);
    let head = start - raw as usize;
    let tail = over - head - len;
    // SAFETY: head and tail are the parts of our own fresh mapping outside [start, start+len).
    unsafe {
        if head > 0 {
            unmap(raw, head);
        }
        if tail > 0 {
            unmap((start + len) as *mut u8, tail);
        }
    }
    start as *mut u8
}

/// Grows our mapping `[p, p+len)` to `new_len` bytes where it lies, if the address space
/// after it is free; false otherwise (nothing changed).
pub(crate) unsafe fn grow_in_place(p: *mut u8, len: usize, new_len: usize) -> bool {
    stats::add(&stats::MREMAP_CALLS, 1);
    // SAFETY: without MREMAP_MAYMOVE the kernel only extends our own mapping or fails.
    unsafe { libc::mremap(p.cast(), len, new_len, 0) != libc::MAP_FAILED }
}

/// Moves the pages of our mapping `[p, p+len)` (one kernel mapping) onto `[to, to+new_len)`,
/// ours too, growing it to `new_len` bytes, without copying them; false (nothing changed) on
/// failure.
pub(crate) unsafe fn move_to(p: *mut u8, len: usize, new_len: usize, to: *mut u8) -> bool {
    stats::add(&stats::MREMAP_CALLS, 1);
    let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
    // SAFETY: both ranges are ours; the target's old pages are replaced, the source goes.
    unsafe { libc::mremap(p.cast(), len, new_len, flags, to) != libc::MAP_FAILED }
}

/// Faults in the pages of our fresh mapping `[p, p+len)` now, by writing to each.
pub(crate) unsafe fn prefault(p: *mut u8, len: usize) {
    for at in (0..len).step_by(4096) {
        // SAFETY: `at` < `len`: inside the caller's mapping, which reads as zeros.
        unsafe { p.add(at).write_volatile(0) };
    }
}

/// Gives the pages `[p, p+len)` of our mapping back to the OS, keeping the range mapped
/// (it reads as zeros afterwards).
pub(crate) unsafe fn discard(p: *mut u8, len: usize) {
    // SAFETY: the caller owns the range and no longer needs its contents.
    unsafe { advise(p, len, libc::MADV_DONTNEED) };
}

/// Replaces `[p, p+len)`, part of our mapping, by fresh accessible pages that read as zeros
/// (the range's advice is lost): one call where opening it and giving its pages back take
/// two. A refusal is fatal, as `protect`'s is: the kernel may have unmapped the range first.
pub(crate) unsafe fn renew(p: *mut u8, len: usize) {
    // SAFETY: the caller owns the range and no longer needs its contents; MAP_FIXED replaces
    // it at once, so no other mapping can take its place meanwhile.
    let q = unsafe {
        libc::mmap(
            p.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    stats::add(&stats::MMAP_CALLS, 1);
    if q != p.cast() {
        fatal("mmap over a cached block's pages failed");
    }
}

/// Pages [`resident`] reads at most: a 4 MiB window, one byte each on the stack.
const WINDOW_PAGES: usize = 1024;

/// How many of the 4 KiB pages of a window of `[p, p+len)` (page-aligned) are resident, and
/// how many it holds (none if the range is not mapped): one `mincore` over at most
/// [`WINDOW_PAGES`] pages in its middle. (Not counted with the calls above: it changes no
/// mapping.)
pub(crate) unsafe fn resident(p: *mut u8, len: usize) -> (usize, usize) {
    let all = len / OS_PAGE;
    let pages = all.min(WINDOW_PAGES);
    let mut vec = [0u8; WINDOW_PAGES];
    // SAFETY: the window lies inside the caller's mapping; `vec` has a byte per page.
    let ok = unsafe {
        let start = p.add((all - pages) / 2 * OS_PAGE);
        libc::mincore(start.cast(), pages * OS_PAGE, vec.as_mut_ptr()) == 0
    };
    if !ok {
        return (0, 0);
    }
    (vec[..pages].iter().filter(|&&b| b & 1 != 0).count(), pages)
}

/// Makes the pages `[p, p+len)` of our mapping inaccessible (`open` false: a guard, any
/// access faults) or readable and writable again (`open` true).
pub(crate) unsafe fn protect(p: *mut u8, len: usize, open: bool) {
    let prot = if open {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    stats::add(&stats::MPROTECT_CALLS, 1);
    // SAFETY: the pages are part of the caller's mapping; nothing else refers to them.
    if unsafe { libc::mprotect(p.cast(), len, prot) } != 0 {
        fatal("mprotect failed");
    }
}

/// `madvise`, counted; failure (advice the kernel does not know) is ignored.
unsafe fn advise(p: *mut u8, len: usize, advice: libc::c_int) {
    stats::add(&stats::MADVISE_CALLS, 1);
    // SAFETY: the caller's range is its own mapping.
    unsafe { libc::madvise(p.cast(), len, advice) };
}

/// Asks the kernel to back `[p, p+len)` with transparent huge pages (THP in madvise mode).
pub(crate) unsafe fn advise_huge(p: *mut u8, len: usize) {
    // SAFETY: advice on our own mapping; failure (THP off) is harmless.
    unsafe { advise(p, len, libc::MADV_HUGEPAGE) };
}

/// Asks the kernel never to back `[p, p+len)` with huge pages (even in THP mode `always`),
/// for a range of which only a few 4 KiB pages are ever touched.
pub(crate) unsafe fn advise_small(p: *mut u8, len: usize) {
    // SAFETY: advice on our own mapping; failure (no THP) is harmless.
    unsafe { advise(p, len, libc::MADV_NOHUGEPAGE) };
}

/// Asks the kernel to back `[p, p+len)` with huge pages now, copying what is already there
/// (`MADV_COLLAPSE`, Linux 6.1+; harmless if unsupported).
pub(crate) unsafe fn collapse_huge(p: *mut u8, len: usize) {
    const MADV_COLLAPSE: libc::c_int = 25;
    // SAFETY: advice only; the contents of the range are preserved.
    unsafe { advise(p, len, MADV_COLLAPSE) };
}

/// `p`, with errno set to ENOMEM when it is null: C's malloc contract, kept by the slow
/// paths themselves so that malloc's fast path ends in a tail call to them.
#[inline]
pub fn enomem_if_null(p: *mut u8) -> *mut u8 {
    if p.is_null() {
        // SAFETY: errno is the calling thread's own.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
    }
    p
}

/// Milliseconds on a coarse monotonic clock (vDSO, no system call).
pub(crate) fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Writes all of `bytes` to `fd`, ignoring errors (used for diagnostics only).
pub(crate) fn write_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the slice is valid for reads of its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// A hardened-mode check failed: writes `retype-malloc: <what> of pointer <p>`, the block
/// size of its size class when known, to standard error and aborts, so that a core dump or a
/// debugger stops where the error was found.
#[cold]
pub(crate) fn die(what: &str, p: *const u8, block_size: Option<usize>) -> ! {
    let mut hex = *b"0x0000000000000000";
    for (i, d) in hex[2..].iter_mut().enumerate() {
        *d = b"0123456789abcdef"[(p as usize >> (60 - 4 * i)) & 15];
    }
    let mut line = retype_stackstr::StackStr::<256>::new();
    line.push(b"retype-malloc: ")
        .push(what.as_bytes())
        .push(b" of pointer ")
        .push(&hex);
    if let Some(size) = block_size {
        line.push(b" in size class ")
            .push_num(size as u64)
            .push(b" B");
    }
    line.push(b" (RETYPE_MALLOC_HARDENED); aborting\n");
    write_all(2, line.as_bytes());
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Writes `retype-malloc: internal inconsistency: <what>` to standard error and aborts. Not a
/// panic: unwinding out of malloc is undefined behaviour, and the panic message would allocate
/// from the very heap found broken.
#[cold]
pub(crate) fn fatal(what: &str) -> ! {
    write_all(2, b"retype-malloc: internal inconsistency: ");
    write_all(2, what.as_bytes());
    write_all(2, b"; aborting\n");
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Debug builds: runs the consistency check `check` and aborts (see [`fatal`]) if it fails.
/// Release builds: nothing; `check` is never called.
#[inline(always)]
pub(crate) fn debug_verify<T>(check: impl FnOnce() -> Result<T, &'static str>) {
    if cfg!(debug_assertions) {
        if let Err(what) = check() {
            fatal(what);
        }
    }
}
