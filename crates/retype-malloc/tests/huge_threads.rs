//! Huge pages for segments wait for a heap big for its number of threads: each thread heap
//! fills its newest segment by degrees, and a huge page makes all 2 MiB of it resident, so
//! with many threads they start only once the heap holds eight segments per thread heap (see
//! `segment::SEGMENTS_PER_HEAP`). Checked as the kernel records the advice (VmFlags `hg`) in
//! /proc/self/smaps, in child processes (settings are read once per process) with a
//! threshold of 8 MiB (4 segments): one thread passes its threshold (8 segments) and gets
//! huge pages, eight threads holding five segments each (40, under their 64) get none; and
//! once one thread's twelve switched huge pages on, eight threads that come later and hold
//! three segments each (36 in all, under the 72 of nine heaps) get none either (a main thread
//! that fills its heap before it starts its workers, as larson's does).

mod common;
#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;
use std::sync::Barrier;

const SEGMENT: usize = 2 << 20;
const BLOCK: usize = 16 << 10;

/// Allocates `segments` segments' worth of 16 KiB blocks, each written whole (a dense heap),
/// and returns their addresses.
fn fill(segments: usize) -> Vec<usize> {
    (0..segments * SEGMENT / BLOCK)
        .map(|_| {
            // SAFETY: plain allocation, written within its size.
            unsafe {
                let p = rm::malloc(BLOCK);
                assert!(!p.is_null());
                p.write_bytes(1, BLOCK);
                p as usize
            }
        })
        .collect()
}

/// Whether the block at `addr` lies in memory advised for huge pages.
fn advised(addr: usize) -> bool {
    smaps::vm_flags(addr).contains(&"hg".into())
}

#[test]
fn huge_pages_wait_for_eight_segments_per_thread_heap() {
    let Ok(threads) = std::env::var("RETYPE_TEST_THREADS") else {
        return; // run by `in_a_child` below
    };
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return; // no THP: the kernel records no advice to read
    }
    let (threads, late) = match threads.strip_suffix(" late") {
        Some(n) => (n.parse().unwrap(), true),
        None => (threads.parse().unwrap(), false),
    };
    let first = late.then(|| fill(12));
    if let Some(first) = &first {
        assert!(
            advised(*first.last().unwrap()),
            "one heap of twelve segments"
        );
    }
    let (segments, want) = match threads {
        1 => (12, true),
        _ if late => (3, false),
        _ => (5, false),
    };
    let (all_made, all_filled) = (Barrier::new(threads), Barrier::new(threads));
    let blocks: Vec<Vec<usize>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // Every heap is made before any fills: the threshold counts the heaps made,
                    // and a thread that started first would otherwise fill its segments while
                    // fewer heaps exist (1 run in 6 of "8 late" on a loaded 2-core machine).
                    // SAFETY: a plain allocation, freed at once.
                    unsafe { rm::free(rm::malloc(16)) };
                    all_made.wait();
                    let blocks = fill(segments);
                    // Every heap is made and filled before any is looked at.
                    all_filled.wait();
                    blocks
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let last = *blocks[0].last().unwrap();
    assert_eq!(
        advised(last),
        want,
        "{threads} threads, {segments} segments each"
    );
    for p in blocks.into_iter().chain(first).flatten() {
        // SAFETY: each block is live and freed once.
        unsafe { rm::free(p as *mut u8) };
    }
}

#[test]
fn in_a_child() {
    if std::env::var_os("RETYPE_TEST_THREADS").is_none() {
        for threads in ["1", "8", "8 late"] {
            common::rerun_with(
                "in_a_child",
                &[
                    ("RETYPE_TEST_THREADS", threads),
                    ("RETYPE_MALLOC_HUGEPAGES_MIN_MIB", "8"),
                ],
            );
        }
    }
}
