//! A program that empties its heap and fills it again round after round (seed 003's steady
//! rounds) makes no system call once warm: the cache keeps the empty segments with their
//! pages however small its fixed cap, since the heap was that big a moment ago, and a
//! segment keeps its huge-page advice in the cache, so it is not advised again (and its
//! memory still asks for huge pages). Settings are read once per process, so the check runs
//! in a child process with them set.

mod common;
#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;

/// One round: 64 MiB of 16 KiB blocks (32 segments' worth), written, then freed.
fn round() -> usize {
    let blocks: Vec<*mut u8> = (0..4096)
        .map(|_| {
            // SAFETY: plain allocation, written within its size.
            unsafe {
                let p = rm::malloc(16 << 10);
                assert!(!p.is_null());
                p.write_bytes(1, 64);
                p
            }
        })
        .collect();
    let first = blocks[0] as usize;
    for p in blocks {
        // SAFETY: each block is live and freed once.
        unsafe { rm::free(p) };
    }
    first
}

#[test]
fn a_heap_emptied_and_filled_again_makes_no_system_call() {
    if std::env::var_os("RETYPE_MALLOC_HUGEPAGES_MIN_MIB").is_none() {
        return; // run by `in_a_child` below
    }
    round(); // warm-up: the segments are mapped and advised
    let before = rm::system_calls();
    for r in 0..10 {
        let block = round();
        assert_eq!(rm::system_calls(), before, "round {r}");
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            assert!(
                smaps::vm_flags(block).contains(&"hg".into()),
                "round {r}: {block:#x}"
            );
        }
    }
}

#[test]
fn in_a_child() {
    if std::env::var_os("RETYPE_MALLOC_HUGEPAGES_MIN_MIB").is_none() {
        // Huge pages from the first segment; nothing purged or unmapped by time while the
        // rounds run; no fixed room in the cache at all.
        common::rerun_with(
            "in_a_child",
            &[
                ("RETYPE_MALLOC_HUGEPAGES_MIN_MIB", "0"),
                ("RETYPE_MALLOC_PURGE_DELAY", "3600000"),
                ("RETYPE_MALLOC_CACHE_MIB", "0"),
            ],
        );
    }
}
