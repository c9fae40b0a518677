//! Physical memory: one memfd whose offsets are the physical addresses that
//! RAM capabilities cover. Mapping a frame maps its offsets; the contents
//! live in the memfd, so unmapping and mapping again loses nothing.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error::VmError;

const MFD_HUGETLB: libc::c_uint = 0x4;
const MFD_HUGE_SHIFT: u32 = 26;

/// Which pages back the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A shmem memfd: 4 KiB pages.
    Small,
    /// A hugetlb memfd of 2 MiB pages (needs `vm.nr_hugepages`).
    Huge2M,
    /// A hugetlb memfd of 1 GiB pages (needs 1 GiB pages reserved).
    Huge1G,
}

impl Backing {
    /// The page size, the only one a mapping of this memory may use.
    pub fn page(self) -> u64 {
        match self {
            Backing::Small => 4 << 10,
            Backing::Huge2M => 2 << 20,
            Backing::Huge1G => 1 << 30,
        }
    }

    fn memfd_flags(self) -> libc::c_uint {
        let huge = |bits: u32| MFD_HUGETLB | (bits << MFD_HUGE_SHIFT);
        libc::MFD_CLOEXEC
            | match self {
                Backing::Small => 0,
                Backing::Huge2M => huge(21),
                Backing::Huge1G => huge(30),
            }
    }

    /// Huge pages free for `bytes` of this backing, or why not.
    pub fn available(self, bytes: u64) -> Result<(), String> {
        if self == Backing::Small {
            return Ok(());
        }
        let kib = self.page() >> 10;
        let path = format!("/sys/kernel/mm/hugepages/hugepages-{kib}kB/free_hugepages");
        let free: u64 = std::fs::read_to_string(&path)
            .map_err(|e| format!("{path}: {e} (no {kib} KiB pages on this machine)"))?
            .trim()
            .parse()
            .map_err(|e| format!("{path}: {e}"))?;
        let need = bytes.div_ceil(self.page());
        if free < need {
            return Err(format!(
                "{free} free {kib} KiB huge pages, {need} needed (reserve them: /sys/kernel/mm/hugepages/hugepages-{kib}kB/nr_hugepages)"
            ));
        }
        Ok(())
    }
}

/// The memfd that holds the physical memory.
#[derive(Debug)]
pub struct Memory {
    fd: OwnedFd,
    size: u64,
    backing: Backing,
    /// A bit per page known to be in the memfd's page cache (allocated by
    /// [`Memory::populate`]; empty until the first call). Pages never leave
    /// it: nothing here punches holes.
    cached: Vec<u64>,
}

impl Memory {
    /// `size` bytes (a multiple of the page size) of zeroed memory.
    pub fn new(size: u64, backing: Backing) -> Result<Memory, VmError> {
        if size == 0 || !size.is_multiple_of(backing.page()) {
            return Err(VmError::PageSize {
                asked: size,
                backing: backing.page(),
            });
        }
        backing.available(size).map_err(VmError::Unsupported)?;
        let name: &CStr = c"retype-vm";
        // SAFETY: a valid C string and flags; the result is checked.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), backing.memfd_flags()) };
        if fd < 0 {
            return Err(VmError::os("memfd_create"));
        }
        // SAFETY: memfd_create returned a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a descriptor we own and a non-negative length.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
            return Err(VmError::os("ftruncate"));
        }
        Ok(Memory {
            fd,
            size,
            backing,
            cached: Vec::new(),
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn backing(&self) -> Backing {
        self.backing
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Makes sure the pages of `[phys, phys + len)` are in the page cache
    /// (`fallocate` of the runs not known to be), so that an access to them
    /// through a mapping whose entries were removed is a minor fault, never
    /// a fresh page the kernel would map without asking.
    pub(crate) fn populate(&mut self, phys: u64, len: u64) -> Result<(), VmError> {
        let page = self.backing.page();
        if self.cached.is_empty() {
            self.cached = vec![0; (self.size / page).div_ceil(64) as usize];
        }
        let known = |c: &[u64], p: u64| c[(p / 64) as usize] & (1 << (p % 64)) != 0;
        let (first, end) = (phys / page, (phys + len).div_ceil(page));
        let mut p = first;
        while p < end {
            if known(&self.cached, p) {
                p += 1;
                continue;
            }
            let run = p;
            while p < end && !known(&self.cached, p) {
                p += 1;
            }
            let (at, n) = (
                (run * page) as libc::off_t,
                ((p - run) * page) as libc::off_t,
            );
            // SAFETY: allocates pages of our own memfd; contents are kept.
            if unsafe { libc::fallocate(self.fd.as_raw_fd(), 0, at, n) } != 0 {
                return Err(VmError::os("fallocate"));
            }
            (run..p).for_each(|q| self.cached[(q / 64) as usize] |= 1 << (q % 64));
        }
        Ok(())
    }

    /// Writes `bytes` at physical address `phys`, as a device or loader
    /// would: through the memory, not through any mapping.
    pub fn write(&self, phys: u64, bytes: &[u8]) -> Result<(), VmError> {
        // SAFETY: the buffer is valid for its length; pwrite reports errors.
        let n = unsafe {
            libc::pwrite(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                phys as libc::off_t,
            )
        };
        if n != bytes.len() as isize {
            return Err(VmError::os("pwrite"));
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at physical address `phys`.
    pub fn read(&self, phys: u64, buf: &mut [u8]) -> Result<(), VmError> {
        // SAFETY: the buffer is valid and writable for its length.
        let n = unsafe {
            libc::pread(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                phys as libc::off_t,
            )
        };
        if n != buf.len() as isize {
            return Err(VmError::os("pread"));
        }
        Ok(())
    }
}
