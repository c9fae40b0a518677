//! A write barrier on raw Linux, the counterpart of Table 3.4's "Linux
//! (prot)": an anonymous private mapping on base pages (THP off, as the
//! thesis ran Linux), made read-only with one `mprotect` when marking
//! starts; a SIGSEGV handler records the first write to each page and makes
//! that page writable with `mprotect`. No retype-vm: the system calls a
//! Boehm collector makes on Linux.
//!
//! The handler is installed once for the process and never removed. A fault
//! outside the region goes on to the handler that was there before
//! (retype-vm's, Rust's, or the default action), as retype-vm's own handler
//! passes on faults outside its windows, so either may be installed first.
//! One region exists at a time (a second waits for the first to go).

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};

use retype_core::caps::types::PAGE;
use retype_vm::VmError;

const P: usize = PAGE as usize;

/// The live region, for the handler to find without locks.
static BASE: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
/// One flag per page of the region: written since it was protected.
static WRITTEN: AtomicPtr<AtomicBool> = AtomicPtr::new(ptr::null_mut());
/// The SIGSEGV handler installed before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();
/// Held by the live region.
static ONE: Mutex<()> = Mutex::new(());

/// `bytes` of memory whose writes are tracked by protection traps.
pub struct TrapRegion {
    at: usize,
    len: usize,
    written: Box<[AtomicBool]>,
    _one: MutexGuard<'static, ()>,
}

fn mprotect(addr: usize, len: usize, prot: libc::c_int) -> libc::c_int {
    // SAFETY: changes the protection of the region's own pages.
    unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) }
}

impl TrapRegion {
    /// A zeroed, writable region of `bytes` (a whole number of pages).
    pub fn new(bytes: u64) -> Result<TrapRegion, VmError> {
        if bytes == 0 || !bytes.is_multiple_of(PAGE) {
            return Err(VmError::Unsupported(format!(
                "a trap region of {bytes} bytes (whole pages only)"
            )));
        }
        INSTALL.call_once(install);
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let len = bytes as usize;
        // SAFETY: a fresh private anonymous mapping where the kernel chooses.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap"));
        }
        // Base pages, as the thesis's Linux runs had THP off. Failure (THP
        // not built in) leaves them base pages anyway.
        // SAFETY: advice on the mapping just made.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        let written: Box<[AtomicBool]> = (0..len / P).map(|_| AtomicBool::new(false)).collect();
        WRITTEN.store(written.as_ptr() as *mut AtomicBool, SeqCst);
        BASE.store(p as usize, SeqCst);
        LEN.store(len, SeqCst);
        Ok(TrapRegion {
            at: p as usize,
            len,
            written,
            _one: one,
        })
    }

    pub fn base(&self) -> usize {
        self.at
    }

    /// Forgets what was written and makes the region read-only: the next
    /// write to each page traps once.
    pub fn protect(&self) -> Result<(), VmError> {
        self.written.iter().for_each(|w| w.store(false, SeqCst));
        if mprotect(self.at, self.len, libc::PROT_READ) != 0 {
            return Err(VmError::os("mprotect"));
        }
        Ok(())
    }

    /// Makes the whole region writable again; the pages written since
    /// [`TrapRegion::protect`].
    pub fn unprotect(&self) -> Result<Vec<usize>, VmError> {
        if mprotect(self.at, self.len, libc::PROT_READ | libc::PROT_WRITE) != 0 {
            return Err(VmError::os("mprotect"));
        }
        Ok((0..self.written.len())
            .filter(|&p| self.written[p].load(SeqCst))
            .collect())
    }
}

impl Drop for TrapRegion {
    fn drop(&mut self) {
        LEN.store(0, SeqCst);
        WRITTEN.store(ptr::null_mut(), SeqCst);
        // SAFETY: the mapping made in `new`; nothing refers to it now.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}

fn install() {
    // SAFETY: a zeroed sigaction is a valid value to fill in.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_segv as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: sa_mask is a valid sigset to empty.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs our handler and saves the previous one.
    let rc = unsafe { libc::sigaction(libc::SIGSEGV, &sa, &mut old) };
    assert_eq!(rc, 0, "sigaction(SIGSEGV)");
    PREVIOUS.set(old).expect("installed once");
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (base, len) = (BASE.load(SeqCst), LEN.load(SeqCst));
    let written = WRITTEN.load(SeqCst);
    if addr >= base && addr - base < len && !written.is_null() {
        let page = (addr - base) / P;
        // SAFETY: `written` has one flag per page of the live region, and
        // the region (which owns the flags) clears LEN before it goes.
        unsafe { (*written.add(page)).store(true, SeqCst) };
        if mprotect(base + page * P, P, libc::PROT_READ | libc::PROT_WRITE) == 0 {
            return;
        }
    }
    chain(sig, info, ctx);
}

/// Hands the signal to the previous handler (retype-vm's rule).
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let old = PREVIOUS.get().expect("installed before any fault");
    retype_vm::signal::pass_on(old, sig, info, ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(r: &TrapRegion, page: usize) {
        // SAFETY: a page of the region; a protected one traps to `on_segv`,
        // which makes it writable before the write runs again.
        unsafe { ((r.base() + page * P) as *mut u64).write_volatile(page as u64 + 1) }
    }

    fn read(r: &TrapRegion, page: usize) -> u64 {
        // SAFETY: a page of the region, readable protected or not.
        unsafe { ((r.base() + page * P) as *const u64).read_volatile() }
    }

    /// Exactly the pages written while protected are reported, each write
    /// lands, and a second protection starts afresh.
    #[test]
    fn the_pages_written_while_protected_are_the_ones_reported() {
        let r = TrapRegion::new(64 * PAGE).unwrap();
        r.protect().unwrap();
        for p in [3, 17, 17, 40, 63] {
            write(&r, p);
        }
        assert_eq!(r.unprotect().unwrap(), [3, 17, 40, 63]);
        assert_eq!((read(&r, 17), read(&r, 0)), (18, 0));
        write(&r, 5);
        r.protect().unwrap();
        write(&r, 9);
        assert_eq!(r.unprotect().unwrap(), [9]);
    }
}
