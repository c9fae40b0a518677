//! One thread of another process, stopped with ptrace at a point where it
//! may call into its C library, and the calls made in it: the thread's
//! registers are set to call a function with arguments on its own stack,
//! with a return address of 0, so that the return faults and stops it again
//! with the result in `rax`. Its registers are put back before it runs on;
//! a system call it was waiting in is restarted by the kernel as after any
//! signal, and a signal that came meanwhile is sent again.
//!
//! x86-64 only (the registers and the calling convention are that ABI's).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libc::{c_int, c_void, pid_t};

/// Below the stack pointer: the red zone a leaf function may use (128
/// bytes), and room to spare.
const RED_ZONE: u64 = 1024;
/// How long a call may take before it is given up as stuck.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times the thread is let run a moment and stopped again until it
/// stops at a safe point.
const SAFE_TRIES: u32 = 3000;

/// System calls a thread waits in without holding a lock of its C library
/// (sleeps, waits for input, for a child, for a signal, for a futex).
const WAITING: [u64; 20] = [
    0,   // read
    7,   // poll
    23,  // select
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    130, // rt_sigsuspend
    202, // futex
    230, // clock_nanosleep
    232, // epoll_wait
    247, // waitid
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
    288, // accept4
    441, // epoll_pwait2
];

/// A stopped thread of another process.
pub struct Tracee {
    tid: pid_t,
    mem: File,
    /// Its registers when it was stopped, put back when it runs on.
    saved: libc::user_regs_struct,
    /// The lowest address of the data written below its stack pointer.
    scratch: u64,
    /// Signals that came while it was stopped, sent again when it runs on.
    pending: Vec<c_int>,
    released: bool,
}

/// `ptrace(req, tid, addr, data)`, its error as an io::Error.
fn ptrace(req: libc::c_uint, tid: pid_t, addr: usize, data: usize) -> io::Result<()> {
    // SAFETY: the requests used here take integers or point to our own memory.
    let rc = unsafe { libc::ptrace(req, tid, addr as *mut c_void, data as *mut c_void) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// How a wait ended.
enum Stop {
    /// Stopped for the ptrace interrupt (or another ptrace event).
    Event,
    /// Stopped as signal `sig` was being delivered.
    Signal(c_int),
}

impl Tracee {
    /// Seizes thread `tid` and stops it at a safe point: waiting in a system
    /// call of [`WAITING`], or running outside `unsafe_code` (the address
    /// ranges of the C library and the loader, which may hold the locks a
    /// call would take). The error of the seize is returned as it is, for the
    /// caller to explain.
    pub fn seize(tid: pid_t, unsafe_code: &[(u64, u64)]) -> Result<Tracee> {
        ptrace(libc::PTRACE_SEIZE, tid, 0, 0)?;
        let mem = File::options()
            .read(true)
            .write(true)
            .open(format!("/proc/{tid}/mem"));
        let mut t = Tracee {
            tid,
            mem: match mem {
                Ok(m) => m,
                Err(e) => {
                    let _ = ptrace(libc::PTRACE_DETACH, tid, 0, 0);
                    return Err(e).context(format!("cannot open /proc/{tid}/mem"));
                }
            },
            // SAFETY: an all-zero register set is valid; it is read below.
            saved: unsafe { std::mem::zeroed() },
            scratch: 0,
            pending: Vec::new(),
            released: false,
        };
        for _ in 0..SAFE_TRIES {
            ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0)?;
            t.wait_event()?;
            let regs = t.regs()?;
            let in_syscall = regs.orig_rax as i64 >= 0;
            let in_unsafe = unsafe_code
                .iter()
                .any(|&(lo, hi)| (lo..hi).contains(&regs.rip));
            if (in_syscall && WAITING.contains(&regs.orig_rax)) || (!in_syscall && !in_unsafe) {
                t.saved = regs;
                t.scratch = regs.rsp - RED_ZONE;
                return Ok(t);
            }
            ptrace(libc::PTRACE_CONT, tid, 0, 0)?;
            std::thread::sleep(Duration::from_micros(500));
        }
        t.release()?;
        bail!(
            "thread {tid} never stopped outside its C library in {SAFE_TRIES} tries \
             (loading a library there could deadlock); try again"
        )
    }

    /// Waits for the interrupt's stop, noting signals that come first.
    fn wait_event(&mut self) -> Result<()> {
        loop {
            match self.wait(Duration::from_secs(5))? {
                Stop::Event => return Ok(()),
                Stop::Signal(sig) => {
                    self.pending.push(sig);
                    ptrace(libc::PTRACE_CONT, self.tid, 0, 0)?;
                }
            }
        }
    }

    /// Waits until the thread stops (at most `limit`).
    fn wait(&self, limit: Duration) -> Result<Stop> {
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer.
            let rc = unsafe { libc::waitpid(self.tid, &mut status, libc::__WALL | libc::WNOHANG) };
            if rc < 0 {
                return Err(io::Error::last_os_error()).context("waitpid");
            }
            if rc == self.tid {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    bail!("process {} ended while retype held it", self.tid);
                }
                if libc::WIFSTOPPED(status) {
                    return Ok(if status >> 16 != 0 {
                        Stop::Event
                    } else {
                        Stop::Signal(libc::WSTOPSIG(status))
                    });
                }
            }
            if start.elapsed() > limit {
                bail!(
                    "thread {} did not stop within {} s (it may be stuck)",
                    self.tid,
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn regs(&self) -> Result<libc::user_regs_struct> {
        // SAFETY: an all-zero register set is valid; PTRACE_GETREGS fills it.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        ptrace(libc::PTRACE_GETREGS, self.tid, 0, &raw mut r as usize).context("PTRACE_GETREGS")?;
        Ok(r)
    }

    fn set_regs(&self, r: &libc::user_regs_struct) -> Result<()> {
        ptrace(libc::PTRACE_SETREGS, self.tid, 0, r as *const _ as usize).context("PTRACE_SETREGS")
    }

    /// Copies `bytes` below the thread's stack pointer; returns their address.
    pub fn put(&mut self, bytes: &[u8]) -> Result<u64> {
        self.scratch = (self.scratch - bytes.len() as u64) & !15;
        self.mem
            .write_all_at(bytes, self.scratch)
            .context("cannot write into the process's memory")?;
        Ok(self.scratch)
    }

    /// Reads `len` bytes at `addr` of the process.
    pub fn get(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.mem
            .read_exact_at(&mut buf, addr)
            .context("cannot read the process's memory")?;
        Ok(buf)
    }

    /// Calls `func(args...)` in the thread; returns what it returned (`rax`).
    pub fn call(&mut self, func: u64, args: &[u64]) -> Result<u64> {
        let mut r = self.saved;
        // The return address (0), with the stack aligned as at a call.
        let sp = (self.scratch & !15) - 8;
        self.mem
            .write_all_at(&0u64.to_le_bytes(), sp)
            .context("cannot write into the process's stack")?;
        r.rsp = sp;
        r.rip = func;
        r.rax = 0;
        // Not in a system call: the kernel restarts none when it runs on.
        r.orig_rax = u64::MAX;
        let regs = [
            &mut r.rdi, &mut r.rsi, &mut r.rdx, &mut r.rcx, &mut r.r8, &mut r.r9,
        ];
        for (reg, &a) in regs.into_iter().zip(args) {
            *reg = a;
        }
        self.set_regs(&r)?;
        ptrace(libc::PTRACE_CONT, self.tid, 0, 0)?;
        loop {
            match self.wait(CALL_TIMEOUT)? {
                Stop::Signal(libc::SIGSEGV) => {
                    let now = self.regs()?;
                    if now.rip == 0 {
                        return Ok(now.rax);
                    }
                    bail!("the call crashed in process {} at {:#x}", self.tid, now.rip);
                }
                Stop::Signal(sig) => self.pending.push(sig),
                Stop::Event => {}
            }
            ptrace(libc::PTRACE_CONT, self.tid, 0, 0)?;
        }
    }

    /// Puts the registers back and lets the thread run on.
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.set_regs(&self.saved)?;
        ptrace(libc::PTRACE_DETACH, self.tid, 0, 0).context("PTRACE_DETACH")?;
        for &sig in &self.pending {
            // SAFETY: tgkill sends a signal; the thread is the one we held.
            unsafe { libc::syscall(libc::SYS_tgkill, self.tid, self.tid, sig) };
        }
        Ok(())
    }
}

impl Drop for Tracee {
    /// A thread left on an error runs on with its registers as they were.
    fn drop(&mut self) {
        if !self.released && self.saved.rsp != 0 {
            let _ = self.set_regs(&self.saved);
        }
        if !self.released {
            let _ = ptrace(libc::PTRACE_DETACH, self.tid, 0, 0);
        }
    }
}
