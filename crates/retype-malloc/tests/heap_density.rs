//! Huge pages for segments wait for a heap that is big and dense: a heap of blocks touched
//! only in their first bytes stays on 4 KiB pages past the threshold (a 2 MiB page would be
//! resident for every few KiB used), and switches once it has grown by the threshold again
//! with blocks that are written whole. Settings are read once per process, so the check runs
//! in a child process with a threshold of 16 MiB.

mod common;
#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;

const MIB: usize = 1 << 20;

/// Allocates `bytes` in blocks of `size`, writing each whole (`dense`) or its first byte;
/// returns them, live.
fn fill(bytes: usize, size: usize, dense: bool) -> Vec<*mut u8> {
    (0..bytes / size)
        .map(|_| {
            // SAFETY: plain allocation, written within its size.
            unsafe {
                let p = rm::malloc(size);
                assert!(!p.is_null());
                p.write_bytes(1, if dense { size } else { 1 });
                p
            }
        })
        .collect()
}

fn asks_for_huge_pages(p: *mut u8) -> bool {
    smaps::vm_flags(p as usize).contains(&"hg".into())
}

#[test]
fn a_sparse_heap_gets_huge_pages_only_once_it_grows_dense() {
    if std::env::var_os("RETYPE_MALLOC_HUGEPAGES_MIN_MIB").is_none()
        || !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists()
    {
        return; // run by `in_a_child` below; or the kernel keeps no advice
    }
    let sparse = fill(48 * MIB, 24 << 10, false);
    let last = *sparse.last().unwrap();
    assert!(!asks_for_huge_pages(last), "a sparse heap of 48 MiB");
    let dense = fill(48 * MIB, 64, true);
    let last = *dense.last().unwrap();
    assert!(asks_for_huge_pages(last), "48 MiB more, written whole");
    for p in sparse.into_iter().chain(dense) {
        // SAFETY: each block is live and freed once.
        unsafe { rm::free(p) };
    }
}

#[test]
fn in_a_child() {
    if std::env::var_os("RETYPE_MALLOC_HUGEPAGES_MIN_MIB").is_none() {
        common::rerun_with("in_a_child", &[("RETYPE_MALLOC_HUGEPAGES_MIN_MIB", "16")]);
    }
}
