//! Appel and Li's benchmarks (ASPLOS 1991, their `vmpup` program; seed 001
//! Figure 3.2) on 100 pages of 4 KiB, in nanoseconds per trap:
//!
//! - trap: a write to a protected page traps, the handler returns without
//!   changing anything (the write traps again), `traps` times;
//! - prot1+trap+unprot: one page is writable; writing another (in a random
//!   order) traps, and the handler protects the writable page and
//!   unprotects the trapping one;
//! - protN+trap+unprot: protect all 100 pages with one call, then write each
//!   in a random order; each traps and the handler unprotects it;
//! - appel1 and appel2, the two procedures of Appel and Li's paper as Dune
//!   and Barrelfish ran them beside the three above: the pages are made
//!   read-only (not inaccessible), and written in the same random order.
//!   appel1: each write traps and the handler makes the page writable and
//!   some other page (the one 100 pages on) read-only; the pages are made
//!   read-only again between rounds, untimed. appel2: one call makes the
//!   100 pages read-only, then each write traps and the handler makes the
//!   page writable (that call is timed, as in protN).
//!
//! Ours: the pages are a Frame mapped through a page table, the handler is
//! the space's fault handler and protects through `modify_flags` on the
//! Mapping capability. Linux: a memfd mapped with `mmap`, a plain SIGSEGV
//! handler calling `mprotect`. The Linux rounds replace the process's SIGSEGV
//! handler while they run: run this alone, not beside other spaces' faults.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};
use retype_core::rng::SplitMix64;

use super::median;
use retype_vm::memory::{Backing, Memory};
use retype_vm::Options;
use retype_vm::Resolution;
use retype_vm::Vm;
use retype_vm::VmError;

/// Pages, as in Appel and Li's program (each side maps twice as many: appel1
/// protects the page `PAGES` on from the one that trapped).
pub const PAGES: usize = 100;
const P: usize = PAGE as usize;

/// Traps the handler lets pass before it acts (negative: trap only).
static COUNT: AtomicI64 = AtomicI64::new(0);
/// The page the handler protects before unprotecting the trapping one (0: none).
static PROTECT: AtomicUsize = AtomicUsize::new(0);
/// appel1: the handler also makes the page `PAGES` on from the trapping one read-only.
static SHADOW: AtomicBool = AtomicBool::new(false);

/// Nanoseconds per trap: (ours, Linux).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppelRow {
    pub rounds: u32,
    pub traps: u32,
    pub trap: (f64, f64),
    pub prot1: (f64, f64),
    pub prot_n: (f64, f64),
    pub appel1: (f64, f64),
    pub appel2: (f64, f64),
}

impl AppelRow {
    /// One JSON object (the keys are the interface).
    pub fn json(&self) -> String {
        let op = |name: &str, (ours, linux): (f64, f64)| {
            format!("\"{name}_ns\":{ours:.1},\"linux_{name}_ns\":{linux:.1}")
        };
        format!(
            "{{\"bench\":\"appel-li\",\"pages\":{PAGES},\"rounds\":{},\"traps\":{},{},{},{},{},{}}}",
            self.rounds,
            self.traps,
            op("trap", self.trap),
            op("prot1_trap_unprot", self.prot1),
            op("protn_trap_unprot", self.prot_n),
            op("appel1", self.appel1),
            op("appel2", self.appel2)
        )
    }
}

/// What a page allows.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    Nothing,
    Read,
    ReadWrite,
}

impl Access {
    fn rights(self) -> Rights {
        match self {
            Access::Nothing => Rights::NONE,
            Access::Read => Rights::READ,
            Access::ReadWrite => Rights::RW,
        }
    }

    fn prot(self) -> libc::c_int {
        match self {
            Access::Nothing => libc::PROT_NONE,
            Access::Read => libc::PROT_READ,
            Access::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        }
    }
}

/// One side: where its pages are and how it sets the access of `n` pages
/// from page `first` outside the handler.
trait Side {
    fn base(&self) -> usize;
    fn protect(&mut self, first: usize, n: usize, access: Access) -> Result<(), VmError>;
}

fn touch(addr: usize) {
    // SAFETY: a page of the benchmark's mapping; a protected page traps to
    // the side's handler, which unprotects it before the write runs again.
    unsafe { (addr as *mut u8).write_volatile(10) }
}

fn per_trap(t: Instant, traps: usize) -> f64 {
    t.elapsed().as_nanos() as f64 / traps as f64
}

/// The five benchmarks on one side: ns per trap (trap, prot1, protN, appel1,
/// appel2).
fn run(s: &mut dyn Side, perm: &[usize], rounds: u32, traps: u32) -> Result<[f64; 5], VmError> {
    let page = |j: usize| s.base() + j * P;
    let pages: Vec<usize> = perm.iter().map(|&j| page(j)).collect();
    let traps_in = |rounds: u32| rounds as usize * PAGES;
    COUNT.store(0, SeqCst);
    PROTECT.store(0, SeqCst);
    let t = Instant::now();
    for _ in 0..rounds {
        s.protect(0, PAGES, Access::Nothing)?;
        pages.iter().for_each(|&a| touch(a));
    }
    let prot_n = per_trap(t, traps_in(rounds));

    let last = *pages.last().expect("pages");
    s.protect(0, PAGES, Access::Nothing)?;
    s.protect(perm[PAGES - 1], 1, Access::ReadWrite)?;
    PROTECT.store(last, SeqCst);
    let t = Instant::now();
    for _ in 0..rounds {
        for &a in &pages {
            touch(a);
            PROTECT.store(a, SeqCst);
        }
    }
    let prot1 = per_trap(t, traps_in(rounds));
    PROTECT.store(0, SeqCst);

    SHADOW.store(true, SeqCst);
    let mut spent = Duration::ZERO;
    for _ in 0..rounds {
        s.protect(0, PAGES, Access::Read)?;
        s.protect(PAGES, PAGES, Access::ReadWrite)?;
        let t = Instant::now();
        pages.iter().for_each(|&a| touch(a));
        spent += t.elapsed();
    }
    SHADOW.store(false, SeqCst);
    let appel1 = spent.as_nanos() as f64 / traps_in(rounds) as f64;

    let t = Instant::now();
    for _ in 0..rounds {
        s.protect(0, PAGES, Access::Read)?;
        pages.iter().for_each(|&a| touch(a));
    }
    let appel2 = per_trap(t, traps_in(rounds));

    COUNT.store(-(traps as i64), SeqCst);
    s.protect(0, PAGES, Access::Nothing)?;
    let first = pages[0];
    let t = Instant::now();
    while COUNT.load(SeqCst) < 0 {
        touch(first);
    }
    let trap = per_trap(t, traps as usize);
    Ok([trap, prot1, prot_n, appel1, appel2])
}

/// Whether the handler acts on this trap (after the trap-only ones).
fn acts() -> bool {
    COUNT.fetch_add(1, SeqCst) + 1 >= 0
}

struct Ours {
    vm: Vm,
    mapping: CapRef,
}

impl Ours {
    fn new() -> Result<Ours, VmError> {
        let vm = Vm::new(Options {
            ram: 4 << 20,
            dirty_bits: false,
            ..Options::default()
        })?;
        let b = vm.boot();
        let slot = |i| CapRef::l1(b.cspace, i);
        let (pt, frame, m) = (slot(4), slot(5), slot(7));
        {
            let mut s = vm.lock();
            s.retype(b.ram, CapType::X86Ptable, 2 << 20, PAGE, 1, pt)?;
            s.retype(b.ram, CapType::Frame, 0, 2 * PAGES as u64 * PAGE, 1, frame)?;
            let root = s.root();
            s.map(root, pt, 0, 0, 1, Rights::RW, slot(6))?;
            s.map(pt, frame, 0, 0, 2 * PAGES as u64, Rights::RW, m)?;
        }
        let base = vm.base();
        vm.on_fault(move |s, f| {
            if acts() {
                let page = f.va / PAGE;
                let p = PROTECT.load(SeqCst);
                let mut set =
                    |page: u64, access: Access| s.modify_flags(m, page, 1, access.rights()).is_ok();
                let ok = (p == 0 || set(((p - base) / P) as u64, Access::Nothing))
                    && (!SHADOW.load(SeqCst) || set(page + PAGES as u64, Access::Read))
                    && set(page, Access::ReadWrite);
                if !ok {
                    return Resolution::Fail;
                }
            }
            Resolution::Retry
        });
        Ok(Ours { vm, mapping: m })
    }
}

impl Side for Ours {
    fn base(&self) -> usize {
        self.vm.base()
    }

    fn protect(&mut self, first: usize, n: usize, access: Access) -> Result<(), VmError> {
        self.vm
            .lock()
            .modify_flags(self.mapping, first as u64, n as u64, access.rights())
    }
}

struct Linux {
    _memory: Memory,
    at: usize,
}

fn mprotect(addr: usize, len: usize, access: Access) -> libc::c_int {
    // SAFETY: changes the protection of the benchmark's own pages.
    unsafe { libc::mprotect(addr as *mut libc::c_void, len, access.prot()) }
}

extern "C" fn linux_handler(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if acts() {
        // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
        let addr = unsafe { (*info).si_addr() } as usize & !(P - 1);
        let p = PROTECT.load(SeqCst);
        if p != 0 {
            mprotect(p, P, Access::Nothing);
        }
        if SHADOW.load(SeqCst) {
            mprotect(addr + PAGES * P, P, Access::Read);
        }
        mprotect(addr, P, Access::ReadWrite);
    }
}

impl Linux {
    fn new() -> Result<Linux, VmError> {
        let memory = Memory::new(2 * PAGES as u64 * PAGE, Backing::Small)?;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let fd = memory.fd().as_raw_fd();
        let len = 2 * PAGES * P;
        // SAFETY: a fresh shared mapping where the kernel chooses.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap"));
        }
        Ok(Linux {
            _memory: memory,
            at: p as usize,
        })
    }

    /// Runs `f` with `linux_handler` as the SIGSEGV handler.
    fn with_handler<T>(f: impl FnOnce() -> T) -> T {
        // SAFETY: zeroed sigactions are valid values to fill in.
        let (mut sa, mut old): (libc::sigaction, libc::sigaction) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        sa.sa_sigaction = linux_handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        // SAFETY: installs the benchmark's handler, keeping the one before.
        unsafe { libc::sigaction(libc::SIGSEGV, &sa, &mut old) };
        let r = f();
        // SAFETY: puts the previous handler back.
        unsafe { libc::sigaction(libc::SIGSEGV, &old, std::ptr::null_mut()) };
        r
    }
}

impl Side for Linux {
    fn base(&self) -> usize {
        self.at
    }

    fn protect(&mut self, first: usize, n: usize, access: Access) -> Result<(), VmError> {
        if mprotect(self.at + first * P, n * P, access) != 0 {
            return Err(VmError::os("mprotect"));
        }
        Ok(())
    }
}

impl Drop for Linux {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, which nothing borrows now.
        unsafe { libc::munmap(self.at as *mut libc::c_void, 2 * PAGES * P) };
    }
}

/// `reps` repetitions of the five benchmarks, ours then Linux in each
/// (`rounds` passes over the pages, `traps` trap-only faults).
pub fn appel_li(rounds: u32, traps: u32, reps: u32) -> Result<AppelRow, VmError> {
    if rounds == 0 || traps == 0 || reps == 0 {
        return Err(VmError::Unsupported(
            "rounds, traps and reps must be positive".into(),
        ));
    }
    let mut rng = SplitMix64::new(1991);
    let mut perm: Vec<usize> = (0..PAGES).collect();
    for i in (1..PAGES).rev() {
        perm.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut ours = Ours::new()?;
    let mut linux = Linux::new()?;
    for side in [&mut ours as &mut dyn Side, &mut linux] {
        (0..2 * PAGES).for_each(|j| touch(side.base() + j * P));
    }
    let mut t: [Vec<f64>; 10] = Default::default();
    for _ in 0..reps {
        let o = run(&mut ours, &perm, rounds, traps)?;
        let l = Linux::with_handler(|| run(&mut linux, &perm, rounds, traps))?;
        for k in 0..5 {
            t[k].push(o[k]);
            t[5 + k].push(l[k]);
        }
    }
    let m = t.map(|mut v| median(&mut v));
    Ok(AppelRow {
        rounds,
        traps,
        trap: (m[0], m[5]),
        prot1: (m[1], m[6]),
        prot_n: (m[2], m[7]),
        appel1: (m[3], m[8]),
        appel2: (m[4], m[9]),
    })
}
