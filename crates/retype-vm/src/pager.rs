//! The application's pager: a thread that reads userfaultfd fault messages
//! for pages of mapped frames that nobody has filled yet, asks the
//! application's closure for their contents, and installs them with
//! UFFDIO_COPY, which wakes the faulting thread (demand paging in user
//! space). The page goes into the memfd, so every mapping of the frame then
//! sees it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::VmError;
use crate::space::Space;
use crate::uffd::{self, Uffd};

/// A page the pager must fill. Like a Barrelfish pager it is told the
/// faulting virtual address: the application knows what it mapped there
/// (the pager thread does not take the space's lock, so a thread holding
/// it can still be paged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Window offset of the page.
    pub va: u64,
    /// A write fault (userfaultfd's WRITE flag).
    pub write: bool,
}

pub(crate) type PagerFn = Box<dyn FnMut(&PageRequest, &mut [u8]) + Send>;

/// The running pager thread; dropping it stops the thread.
pub(crate) struct Pager {
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

struct Job {
    uffd: Arc<Uffd>,
    base: usize,
    page: usize,
    wp: bool,
    stop: i32,
    f: PagerFn,
}

impl Pager {
    pub(crate) fn start(space: &Space, f: PagerFn) -> Result<Pager, VmError> {
        let uffd = space
            .uffd()
            .expect("a space made for a pager has a userfaultfd");
        // SAFETY: eventfd takes an initial value and flags.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(VmError::os("eventfd"));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let stop = unsafe { OwnedFd::from_raw_fd(fd) };
        let job = Job {
            uffd,
            base: space.base(),
            page: space.memory().backing().page() as usize,
            wp: space.tracks_dirty(),
            stop: stop.as_raw_fd(),
            f,
        };
        let thread = std::thread::Builder::new()
            .name("retype-vm pager".into())
            .spawn(move || job.run())
            .map_err(|err| VmError::Os {
                call: "spawn pager thread",
                err,
            })?;
        Ok(Pager {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(t) = self.thread.take() {
            t.join().expect("the pager thread does not panic");
        }
    }
}

impl Job {
    fn run(mut self) {
        let mut buf = vec![0u8; self.page];
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.uffd.raw(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue;
            }
            if fds[1].revents != 0 {
                return;
            }
            while let Some(m) = self.uffd.read() {
                if m.event == uffd::EVENT_PAGEFAULT {
                    self.serve(m.address as usize & !(self.page - 1), m.flags, &mut buf);
                }
            }
        }
    }

    fn serve(&mut self, addr: usize, flags: u64, buf: &mut [u8]) {
        let req = PageRequest {
            va: (addr - self.base) as u64,
            write: flags & uffd::FLAG_WRITE != 0,
        };
        buf.fill(0);
        // A panicking pager (reported by the panic hook) leaves the page as
        // zeros rather than the faulting thread waiting forever.
        let f = &mut self.f;
        if catch_unwind(AssertUnwindSafe(|| f(&req, buf))).is_err() {
            buf.fill(0);
        }
        // A failed copy (the range was unmapped meanwhile) leaves nothing
        // waiting: unmapping woke the faulting thread, which faults anew.
        let _ = self.uffd.copy(addr, buf, self.wp);
    }
}
