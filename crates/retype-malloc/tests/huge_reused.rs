//! A large block made of a cached mapping whose pages were kept does not count as dense: its
//! resident pages are what touched the mapping before (here the block it was cut from), not
//! this block. The program below touches a third of one block and none of the next, which
//! is cut from the first's mapping; afterwards a fresh block of 4 MiB still asks for no huge
//! pages. One test in its own binary, so the process has freed no dense block before it.

#[path = "common/smaps.rs"]
mod smaps;

use retype_malloc as rm;

const MIB: usize = 1 << 20;

#[test]
fn a_block_on_pages_kept_from_another_does_not_make_the_heap_dense() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return; // no THP: the kernel records no advice to read
    }
    // SAFETY: plain allocations, written within their sizes, each freed once.
    unsafe {
        // A block of 6 MiB on a 2 MiB boundary, its first 2 MiB written: a third, not dense.
        let a = rm::malloc(6 * MIB);
        assert!(!a.is_null());
        a.write_bytes(1, 2 * MIB);
        rm::free(a);
        // A block of 2 MiB, cut from the front of that mapping: its pages are the 2 MiB the
        // first block wrote, all resident, though this block touches none.
        let b = rm::malloc(2 * MIB);
        assert_eq!(b, a, "the second block reuses the first one's kept pages");
        rm::free(b);
        // A block of 4 MiB, written at three bytes: advised only if the heap counted as dense.
        let c = rm::malloc(4 * MIB);
        assert!(!c.is_null());
        for i in [0, 2 * MIB, 4 * MIB - 1] {
            c.add(i).write(1);
        }
        let flags = smaps::vm_flags(c as usize + 2 * MIB);
        assert!(
            !flags.contains(&"hg".into()),
            "a block touched at three bytes asks for huge pages: {flags:?}"
        );
        rm::free(c);
    }
}
