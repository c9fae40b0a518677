//! Large blocks of 2 MiB and more start on a 2 MiB boundary and are advised for huge pages
//! once the program's large blocks have shown to be dense, from the first one at 32 MiB
//! (`RETYPE_MALLOC_HUGEPAGES_LARGE`). Whether the kernel then grants huge
//! pages depends on its THP mode and on fragmentation, so only what the allocator decides is
//! checked: the alignment, and the advice as the kernel records it (VmFlags `hg`, huge pages
//! asked for; `nh`, refused) in /proc/self/smaps.

mod common;
#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;

const MIB: usize = 1 << 20;
const HUGE: usize = 2 * MIB;

/// Whether this run has large-block huge pages on (the default) or off.
fn huge_on() -> bool {
    !matches!(
        std::env::var("RETYPE_MALLOC_HUGEPAGES_LARGE").as_deref(),
        Ok("0")
    )
}

#[test]
fn blocks_of_two_mib_and_more_start_on_huge_page_boundaries_and_ask_for_huge_pages() {
    let advice_known = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
    // A dense block freed first: blocks below 32 MiB are advised once the program has shown
    // that its large blocks are (see tests/huge_sparse.rs for the other case).
    // SAFETY: plain allocation, written within its size, freed once.
    unsafe {
        let p = rm::malloc(4 * MIB);
        assert!(!p.is_null());
        p.write_bytes(1, 4 * MIB);
        rm::free(p);
    }
    for size in [HUGE, HUGE + 1, 5 * MIB + 123, 33 * MIB] {
        // Twice: the second block may be the first one's mapping, taken from the cache.
        for _ in 0..2 {
            // SAFETY: plain allocation, written within its size, freed once.
            unsafe {
                let p = rm::malloc(size);
                assert!(!p.is_null());
                p.write_bytes(7, size);
                let addr = p as usize;
                assert_eq!(
                    addr.is_multiple_of(HUGE),
                    huge_on(),
                    "{size} B at {addr:#x}"
                );
                if advice_known {
                    let block = smaps::vm_flags(addr + size - 1);
                    assert_eq!(block.contains(&"hg".into()), huge_on(), "{block:?}");
                    if huge_on() {
                        // The header's 2 MiB before the block: a few 4 KiB pages only.
                        let header = smaps::vm_flags(addr - 1);
                        assert!(header.contains(&"nh".into()), "header {header:?}");
                    }
                }
                rm::free(p);
            }
        }
    }
}

#[test]
fn smaller_large_blocks_are_neither_aligned_nor_advised() {
    for size in [200 * 1024, MIB, HUGE - 4096] {
        // SAFETY: plain allocation, freed once.
        unsafe {
            let p = rm::malloc(size);
            assert!(!p.is_null());
            assert_ne!(p as usize % HUGE, 0, "{size} B");
            rm::free(p);
        }
    }
}

/// The tests above with `RETYPE_MALLOC_HUGEPAGES_LARGE=0`: no alignment, no advice.
#[test]
fn the_switch_turns_both_off() {
    if huge_on() {
        common::rerun_with(
            "the_switch_turns_both_off",
            &[("RETYPE_MALLOC_HUGEPAGES_LARGE", "0")],
        );
    }
}
