//! `RETYPE_MALLOC_ZERO_ON_MALLOC` (hardened mode) hands out a reused large block zeroed
//! without making its pages resident while the program's large blocks are sparse: its whole
//! pages are returned and read as zeros, so a program that touches a few bytes of big blocks
//! does not pay for all of them. Settings, and whether blocks are dense, are the process's, so
//! the check runs in a child process.

mod common;

use retype_malloc as rm;

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;

/// How many of the whole pages of `[p, p+len)` are resident.
fn resident(p: *mut u8, len: usize) -> usize {
    let start = (p as usize).next_multiple_of(PAGE);
    let pages = (p as usize + len - start) / PAGE;
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is a live block of ours; `vec` has a byte per page.
    let r = unsafe { libc::mincore(start as *mut libc::c_void, pages * PAGE, vec.as_mut_ptr()) };
    assert_eq!(r, 0);
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn a_reused_large_block_reads_as_zeros_with_its_pages_returned() {
    if std::env::var_os("RETYPE_MALLOC_ZERO_ON_MALLOC").is_none() {
        return; // run by `in_a_child` below
    }
    let size = 3 * MIB + 123;
    // SAFETY: plain allocations, written and read within their sizes, each freed once.
    unsafe {
        let p = rm::malloc(size);
        assert!(!p.is_null());
        // A few bytes at either end and in the middle: a sparse block.
        let spots = || {
            (0..64)
                .chain(size / 2..size / 2 + 64)
                .chain(size - 64..size)
        };
        for i in spots() {
            p.add(i).write(0xAA);
        }
        rm::free(p);
        // Until the purge delay the freed mapping is cached with its pages, and serves again.
        let q = rm::malloc(size);
        assert!(!q.is_null());
        let pages = size / PAGE;
        let touched = resident(q, size);
        assert!(
            touched <= 2,
            "{touched} of about {pages} pages resident in a fresh block: zeroed by writing"
        );
        for i in spots().chain((0..size).step_by(509)) {
            assert_eq!(q.add(i).read(), 0, "byte {i} of {size}");
        }
        rm::free(q);
    }
}

#[test]
fn in_a_child() {
    common::rerun_with(
        "in_a_child",
        &[
            ("RETYPE_MALLOC_ZERO_ON_MALLOC", "1"),
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
        ],
    );
}
