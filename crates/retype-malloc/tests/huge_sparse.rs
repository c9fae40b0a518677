//! Blocks of 2 MiB and more that the program touches only here and there are not advised
//! for huge pages (each touched byte would cost a 2 MiB page), until dense ones are freed;
//! blocks of 32 MiB and more are advised from the first. One test in its own binary, so the
//! process has freed no dense block before it.

#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;

const MIB: usize = 1 << 20;

/// Allocates `size` bytes, writes them all (`dense`) or three bytes of them, and returns
/// whether the block asks for huge pages; frees it.
fn block(size: usize, dense: bool) -> bool {
    // SAFETY: plain allocation, written within its size, freed once.
    unsafe {
        let p = rm::malloc(size);
        assert!(!p.is_null());
        assert!((p as usize).is_multiple_of(2 * MIB), "{size} B at {p:?}");
        if dense {
            p.write_bytes(1, size);
        } else {
            for i in [0, size / 2, size - 1] {
                p.add(i).write(1);
            }
        }
        let huge = smaps::vm_flags(p as usize + size / 2).contains(&"hg".into());
        rm::free(p);
        huge
    }
}

#[test]
fn sparse_blocks_ask_for_huge_pages_only_after_a_dense_one() {
    let huge_large = std::env::var("RETYPE_MALLOC_HUGEPAGES_LARGE").as_deref() != Ok("0");
    if !huge_large || !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return; // nothing is advised, or the kernel keeps no advice
    }
    for round in 0..20 {
        assert!(!block(8 * MIB + 123, false), "sparse block, round {round}");
    }
    assert!(
        block(40 * MIB, false),
        "a block of 32 MiB or more is advised at once"
    );
    // Its mapping, cached, keeps its advice: let a smaller block not be cut from it.
    rm::trim();
    assert!(!block(8 * MIB, false), "still no dense block freed");
    assert!(
        !block(8 * MIB, true),
        "advised before a dense block was freed"
    );
    // Past the first 16 frees looked at, one in 61 looks: a run of them is noticed.
    for _ in 0..61 {
        block(8 * MIB, true);
    }
    assert!(
        block(8 * MIB, false),
        "dense blocks were freed: advised from now on"
    );
}
