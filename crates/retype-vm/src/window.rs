//! The reserved window of virtual address space that the application's page
//! tables describe. It is always fully mapped: what the tables do not map is
//! an inaccessible anonymous reservation (never a hole another `mmap` of the
//! process could take), what they map is the memfd at the frame's offset.

#[cfg(test)]
use std::cell::Cell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

use retype_core::caps::Rights;

use crate::error::VmError;

/// A reserved range of the process's address space.
#[derive(Debug)]
pub struct Window {
    base: usize,
    len: usize,
}

/// The protection that page-table flags ask for. x86 cannot make a page
/// writable but not readable, so WRITE (and EXECUTE) imply READ on Linux.
pub fn prot(flags: Rights) -> libc::c_int {
    let mut p = libc::PROT_NONE;
    if flags.contains(Rights::READ) {
        p |= libc::PROT_READ;
    }
    if flags.contains(Rights::WRITE) {
        p |= libc::PROT_WRITE;
    }
    if flags.contains(Rights::EXECUTE) {
        p |= libc::PROT_EXEC;
    }
    p
}

const RESERVE: libc::c_int = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;

impl Window {
    /// Reserves `len` bytes aligned to `align` (a power of two), inaccessible.
    pub fn reserve(len: usize, align: usize) -> Result<Window, VmError> {
        let span = len + align;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks.
        let p = unsafe { libc::mmap(ptr::null_mut(), span, libc::PROT_NONE, RESERVE, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap (reserve)"));
        }
        let start = p as usize;
        let base = start.next_multiple_of(align);
        let trim = |at: usize, n: usize| {
            if n > 0 {
                // SAFETY: the range is part of the reservation just made and
                // outside the window we keep.
                unsafe { libc::munmap(at as *mut libc::c_void, n) };
            }
        };
        trim(start, base - start);
        trim(base + len, start + span - (base + len));
        Ok(Window { base, len })
    }

    pub fn base(&self) -> usize {
        self.base
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the address lies in the window.
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.len
    }

    fn at(&self, va: u64, len: u64) -> *mut libc::c_void {
        assert!(
            va.checked_add(len).is_some_and(|e| e <= self.len as u64),
            "range {va:#x}+{len:#x} outside the window"
        );
        (self.base + va as usize) as *mut libc::c_void
    }

    /// Maps `len` bytes of `fd` from `offset` at window offset `va`.
    pub fn map(
        &self,
        va: u64,
        len: u64,
        fd: BorrowedFd<'_>,
        offset: u64,
        flags: Rights,
    ) -> Result<(), VmError> {
        injected("mmap")?;
        let at = self.at(va, len);
        let fixed = libc::MAP_SHARED | libc::MAP_FIXED;
        let fd = fd.as_raw_fd();
        let off = offset as libc::off_t;
        // SAFETY: MAP_FIXED inside our own reservation replaces only window
        // pages, which no Rust reference points into.
        let p = unsafe { libc::mmap(at, len as usize, prot(flags), fixed, fd, off) };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap"));
        }
        Ok(())
    }

    /// Keeps `[va, va + len)` on base pages whatever the transparent huge
    /// page settings say (shmem THP would otherwise give 2 MiB pages to a
    /// mapping that asked for 4 KiB ones).
    pub fn base_pages_only(&self, va: u64, len: u64) -> Result<(), VmError> {
        no_huge_pages(self.at(va, len) as usize, len as usize)
    }

    /// Makes `[va, va + len)` unmapped again: an inaccessible reservation.
    pub fn clear(&self, va: u64, len: u64) -> Result<(), VmError> {
        injected("mmap (clear)")?;
        let at = self.at(va, len);
        let flags = RESERVE | libc::MAP_FIXED;
        // SAFETY: as in `map`, only window pages are replaced.
        let p = unsafe { libc::mmap(at, len as usize, libc::PROT_NONE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap (clear)"));
        }
        Ok(())
    }

    /// Removes the entries of mapped window pages, keeping their memory and
    /// protection (`MADV_DONTNEED` on a shared mapping): the next access is
    /// a page fault.
    pub fn drop_entries(&self, va: u64, len: u64) -> Result<(), VmError> {
        injected("madvise (drop entries)")?;
        let at = self.at(va, len);
        // SAFETY: window pages of a shared mapping: their contents stay in the memfd.
        if unsafe { libc::madvise(at, len as usize, libc::MADV_DONTNEED) } != 0 {
            return Err(VmError::os("madvise (drop entries)"));
        }
        Ok(())
    }

    /// Changes the protection of mapped window pages.
    pub fn protect(&self, va: u64, len: u64, flags: Rights) -> Result<(), VmError> {
        injected("mprotect")?;
        let at = self.at(va, len);
        // SAFETY: changes the protection of window pages only.
        if unsafe { libc::mprotect(at, len as usize, prot(flags)) } != 0 {
            return Err(VmError::os("mprotect"));
        }
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: window system calls of this thread left before one fails (0: none).
    static FAIL_IN: Cell<u32> = const { Cell::new(0) };
}

/// Tests: makes the `n`-th window system call of this thread from now fail
/// with ENOMEM, as the kernel does when the process has too many mappings.
#[cfg(test)]
pub(crate) fn fail_in(n: u32) {
    FAIL_IN.set(n);
}

/// Whether this system call is the one a test asked to fail.
#[cfg(test)]
fn injected(call: &'static str) -> Result<(), VmError> {
    let n = FAIL_IN.get();
    FAIL_IN.set(n.saturating_sub(1));
    if n == 1 {
        let err = std::io::Error::from_raw_os_error(libc::ENOMEM);
        return Err(VmError::Os { call, err });
    }
    Ok(())
}

#[cfg(not(test))]
fn injected(_: &'static str) -> Result<(), VmError> {
    Ok(())
}

/// `madvise(MADV_NOHUGEPAGE)` over the mapping at `at`.
pub(crate) fn no_huge_pages(at: usize, len: usize) -> Result<(), VmError> {
    // SAFETY: changes only the huge-page policy of pages, never their contents.
    if unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE) } != 0 {
        return Err(VmError::os("madvise"));
    }
    Ok(())
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the whole reservation is ours and nothing borrows it now.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
