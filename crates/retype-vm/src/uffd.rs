//! userfaultfd: the kernel's channel for handing page faults to user space.
//! One per space, registered over every mapped run: in MISSING mode when the
//! application has a pager (a first touch of a frame page nobody filled yet
//! waits for the pager's UFFDIO_COPY), in asynchronous write-protect mode for
//! dirty bits (the kernel un-protects on the first write and remembers it,
//! which PAGEMAP_SCAN reads and resets per range), and in MINOR mode over
//! the pages an application made inaccessible (see [`crate::space`]: their
//! entries are removed while their memory stays, so any access is a minor
//! fault, which this descriptor turns into a SIGBUS on the faulting thread).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::VmError;

const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;

/// `_IOC(dir, 0xAA, nr, size)` as Linux encodes it.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (0xAA << 8) | nr
}
const RW: u64 = 3;
const R: u64 = 2;

#[repr(C)]
#[derive(Default)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct Continue {
    range: Range,
    mode: u64,
    mapped: i64,
}

#[repr(C)]
#[derive(Default)]
struct WriteProtect {
    range: Range,
    mode: u64,
}

/// A fault message (`struct uffd_msg`, page-fault view).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct Msg {
    pub event: u8,
    _reserved: [u8; 7],
    pub flags: u64,
    pub address: u64,
    _feat: u64,
}

pub const EVENT_PAGEFAULT: u8 = 0x12;
/// Minor faults are on shmem's base pages only.
const PAGE: u64 = 4096;
/// The fault was a write.
pub const FLAG_WRITE: u64 = 1 << 0;

const UFFDIO_API: u64 = ioc(RW, 0x3F, size_of::<Api>());
const UFFDIO_REGISTER: u64 = ioc(RW, 0x00, size_of::<Register>());
const UFFDIO_WAKE: u64 = ioc(R, 0x02, size_of::<Range>());
const UFFDIO_COPY: u64 = ioc(RW, 0x03, size_of::<Copy>());
const UFFDIO_WRITEPROTECT: u64 = ioc(RW, 0x06, size_of::<WriteProtect>());
const UFFDIO_CONTINUE: u64 = ioc(RW, 0x07, size_of::<Continue>());

const FEATURE_MISSING_HUGETLBFS: u64 = 1 << 4;
const FEATURE_MISSING_SHMEM: u64 = 1 << 5;
const FEATURE_SIGBUS: u64 = 1 << 7;
const FEATURE_MINOR_SHMEM: u64 = 1 << 10;
const FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
const FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const FEATURE_WP_ASYNC: u64 = 1 << 15;

pub const MODE_MISSING: u64 = 1;
pub const MODE_WP: u64 = 2;
pub const MODE_MINOR: u64 = 4;
const COPY_MODE_WP: u64 = 1 << 1;

/// A userfaultfd with the features asked for.
#[derive(Debug)]
pub struct Uffd {
    fd: OwnedFd,
}

fn ioctl<T>(fd: RawFd, req: u64, arg: &mut T, call: &'static str) -> Result<(), VmError> {
    // SAFETY: `arg` is the repr(C) struct this request reads and writes.
    if unsafe { libc::ioctl(fd, req as _, arg as *mut T) } != 0 {
        return Err(VmError::os(call));
    }
    Ok(())
}

impl Uffd {
    /// A userfaultfd for the MISSING mode (a pager) and/or asynchronous
    /// write protection (dirty bits) and/or inaccessible pages (`hide`:
    /// minor faults on shmem raise SIGBUS; never with a pager, whose faults
    /// must wait for it), or why this machine refuses it. Where
    /// only UFFD_USER_MODE_ONLY is permitted (unprivileged, with
    /// vm.unprivileged_userfaultfd = 0), a system call that touches a missing
    /// page fails with EFAULT instead of waiting for the pager.
    pub fn open(missing: bool, wp: bool, hide: bool) -> Result<Uffd, VmError> {
        assert!(!(missing && hide), "a pager's faults cannot raise SIGBUS");
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: the userfaultfd system call takes flags and returns a descriptor.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as RawFd;
        if fd < 0 {
            // SAFETY: as above; user-mode-only is allowed unprivileged.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) }
                as RawFd;
        }
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            let sysctl = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
                .unwrap_or_default();
            return Err(VmError::Unsupported(format!(
                "userfaultfd: {err} (vm.unprivileged_userfaultfd = {})",
                sysctl.trim()
            )));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut features = 0;
        if missing {
            features |= FEATURE_MISSING_SHMEM | FEATURE_MISSING_HUGETLBFS;
        }
        if wp {
            features |= FEATURE_WP_HUGETLBFS_SHMEM | FEATURE_WP_UNPOPULATED | FEATURE_WP_ASYNC;
        }
        if hide {
            features |= FEATURE_SIGBUS | FEATURE_MINOR_SHMEM;
        }
        let mut api = Api {
            api: UFFD_API,
            features,
            ..Api::default()
        };
        ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api, "UFFDIO_API").map_err(|e| {
            VmError::Unsupported(format!(
                "userfaultfd features {features:#x} (MISSING on shmem, asynchronous write protection, minor faults as SIGBUS): {e}"
            ))
        })?;
        Ok(Uffd { fd })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Registers `[start, start + len)` in `mode`.
    pub fn register(&self, start: usize, len: u64, mode: u64) -> Result<(), VmError> {
        let mut r = Register {
            range: Range {
                start: start as u64,
                len,
            },
            mode,
            ioctls: 0,
        };
        ioctl(self.raw(), UFFDIO_REGISTER, &mut r, "UFFDIO_REGISTER")
    }

    /// Write-protects `[start, start + len)`: the next write is remembered.
    pub fn write_protect(&self, start: usize, len: u64) -> Result<(), VmError> {
        let mut w = WriteProtect {
            range: Range {
                start: start as u64,
                len,
            },
            mode: 1,
        };
        ioctl(
            self.raw(),
            UFFDIO_WRITEPROTECT,
            &mut w,
            "UFFDIO_WRITEPROTECT",
        )
    }

    /// Maps again the pages of `[start, start + len)` whose entries were
    /// removed (their memory is still in the memfd), with the mapping's
    /// protection; pages already mapped are left as they are.
    pub fn continue_pages(&self, start: usize, len: u64) -> Result<(), VmError> {
        let mut done = 0;
        while done < len {
            let mut c = Continue {
                range: Range {
                    start: start as u64 + done,
                    len: len - done,
                },
                ..Continue::default()
            };
            match ioctl(self.raw(), UFFDIO_CONTINUE, &mut c, "UFFDIO_CONTINUE") {
                Ok(()) => return Ok(()),
                // The page at the stop was mapped already: skip it.
                Err(VmError::Os { err, .. }) if err.raw_os_error() == Some(libc::EEXIST) => {
                    done += c.mapped.max(0) as u64 + PAGE;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Fills the missing page at `dst` with `src` and wakes the faulting
    /// thread; `wp` keeps it write-protected (clean). A page another fault
    /// filled first (EEXIST) just wakes the waiters.
    pub fn copy(&self, dst: usize, src: &[u8], wp: bool) -> Result<(), VmError> {
        let mut c = Copy {
            dst: dst as u64,
            src: src.as_ptr() as u64,
            len: src.len() as u64,
            mode: if wp { COPY_MODE_WP } else { 0 },
            copy: 0,
        };
        match ioctl(self.raw(), UFFDIO_COPY, &mut c, "UFFDIO_COPY") {
            Err(VmError::Os { err, .. }) if err.raw_os_error() == Some(libc::EEXIST) => {
                let mut r = Range {
                    start: dst as u64,
                    len: src.len() as u64,
                };
                ioctl(self.raw(), UFFDIO_WAKE, &mut r, "UFFDIO_WAKE")
            }
            other => other,
        }
    }

    /// The next fault message, if one is waiting.
    pub fn read(&self) -> Option<Msg> {
        let mut m = Msg::default();
        // SAFETY: reads at most one message into a buffer of its size.
        let n = unsafe { libc::read(self.raw(), (&mut m as *mut Msg).cast(), size_of::<Msg>()) };
        (n == size_of::<Msg>() as isize).then_some(m)
    }
}
