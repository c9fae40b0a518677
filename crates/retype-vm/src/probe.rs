//! Testing whether an address can be read or written without faulting:
//! the kernel does the access for us and reports EFAULT instead of raising
//! SIGSEGV. A read probe `write`s 8 bytes from the address into a pipe, a
//! write probe `read`s 8 bytes from the pipe into it (the kernel's copy
//! honours the page protection just as the CPU does). No signal handler,
//! no longjmp, no Rust reference to the probed memory.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pipe to probe through (one per thread that probes).
pub struct Probe {
    r: OwnedFd,
    w: OwnedFd,
}

impl Probe {
    pub fn new() -> std::io::Result<Probe> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors that nothing else owns.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Probe { r, w })
    }

    /// The 8 bytes at `addr` (8-aligned), or None if reading them faults.
    pub fn read(&self, addr: usize) -> Option<u64> {
        // SAFETY: the kernel checks `addr` and returns EFAULT if unreadable.
        let n = unsafe { libc::write(self.w.as_raw_fd(), addr as *const libc::c_void, 8) };
        if n != 8 {
            assert_eq!(errno(), libc::EFAULT, "probe write");
            return None;
        }
        Some(self.take())
    }

    /// Writes `value` at `addr` (8-aligned); false if writing faults (and
    /// then nothing was written).
    pub fn write(&self, addr: usize, value: u64) -> bool {
        // SAFETY: writes 8 bytes from a local into our pipe.
        let n = unsafe { libc::write(self.w.as_raw_fd(), (&value as *const u64).cast(), 8) };
        assert_eq!(n, 8, "probe pipe write");
        // SAFETY: the kernel checks `addr` and returns EFAULT if unwritable,
        // leaving the bytes in the pipe.
        let n = unsafe { libc::read(self.r.as_raw_fd(), addr as *mut libc::c_void, 8) };
        if n != 8 {
            assert_eq!(errno(), libc::EFAULT, "probe read");
            self.take();
            return false;
        }
        true
    }

    fn take(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a local.
        let n = unsafe { libc::read(self.r.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        assert_eq!(n, 8, "probe pipe read");
        v
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
