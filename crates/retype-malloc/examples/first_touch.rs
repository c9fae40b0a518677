//! What the first touch of memory costs, by how the memory was had: a fresh mapping each round
//! (mapped, touched, unmapped, as an allocator that returns freed blocks to the OS does), one
//! mapping whose pages are given back each round (`MADV_DONTNEED`, as retype-malloc's purge
//! does) and touched again, and one mapping kept with its pages (as tcmalloc keeps what is
//! freed). Each with 4 KiB pages and with 2 MiB pages (`MADV_HUGEPAGE`). One byte is written in
//! every 4 KiB page, as `bench/src/large.c` does with `TOUCH 1`.
//!
//! On a VM whose balloon device reports free pages to the host (Linux's free page reporting:
//! free blocks of 2 MiB and more, idle a moment, go back to the host), a page carved from a
//! reported block waits for the host on its first touch. `IDLE` seconds of sleep before the
//! rounds let the guest report what earlier processes freed; back to back, the rounds reuse
//! memory freed a moment before, not yet reported. docs/malloc.md has the figures.
//!
//! `cargo run --release -p retype-malloc --example first_touch [MiB] [rounds]`, with `IDLE=10`
//! in the environment for the idle case.

use std::time::Instant;

const PAGE: usize = 4096;

/// Writes one byte in every 4 KiB page of `len` bytes at `p`.
unsafe fn touch(p: *mut u8, len: usize) {
    for off in (0..len).step_by(PAGE) {
        // SAFETY: the caller's mapping is readable and writable for `len` bytes.
        unsafe { p.add(off).write_volatile(1) };
    }
}

/// A fresh anonymous mapping of `len` bytes, advised for huge pages if `huge`.
fn map(len: usize, huge: bool) -> *mut u8 {
    // SAFETY: an anonymous private mapping; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(p != libc::MAP_FAILED, "mmap of {len} bytes failed");
    let advice = if huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    // SAFETY: advice on our own mapping.
    unsafe { libc::madvise(p, len, advice) };
    p.cast()
}

/// Milliseconds per round of `round`, run `rounds` times: the median and the first.
fn time(rounds: usize, mut round: impl FnMut()) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            round();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let first = ms[0];
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], first)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args
        .next()
        .map_or(64, |a| a.parse().expect("MiB: a number"));
    let rounds: usize = args
        .next()
        .map_or(20, |a| a.parse().expect("rounds: a number"));
    let idle: u64 = std::env::var("IDLE").map_or(0, |s| s.parse().expect("IDLE: seconds"));
    let len = mib << 20;
    println!("{mib} MiB a round, {rounds} rounds, idle {idle} s before each case; ms a round (median, first)");
    for huge in [false, true] {
        let pages = if huge { "2 MiB pages" } else { "4 KiB pages" };
        std::thread::sleep(std::time::Duration::from_secs(idle));
        let (med, first) = time(rounds, || {
            let p = map(len, huge);
            // SAFETY: our fresh mapping of `len` bytes, unmapped after.
            unsafe {
                touch(p, len);
                libc::munmap(p.cast(), len);
            }
        });
        println!("{pages}: mapped, touched, unmapped: {med:.1} ({first:.1})");
        std::thread::sleep(std::time::Duration::from_secs(idle));
        let p = map(len, huge);
        let (med, first) = time(rounds, || {
            // SAFETY: our mapping of `len` bytes; its pages go back, the range stays mapped.
            unsafe {
                touch(p, len);
                libc::madvise(p.cast(), len, libc::MADV_DONTNEED);
            }
        });
        println!("{pages}: one mapping, touched, pages given back: {med:.1} ({first:.1})");
        // SAFETY: our mapping; its pages are touched and kept between rounds.
        let (med, first) = time(rounds, || unsafe { touch(p, len) });
        println!("{pages}: one mapping kept, touched again: {med:.1} ({first:.1})");
        // SAFETY: our mapping, no longer used.
        unsafe { libc::munmap(p.cast(), len) };
    }
}
