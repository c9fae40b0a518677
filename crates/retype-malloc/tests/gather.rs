//! A large block that no freed mapping is long enough for is made of several freed ones,
//! their pages moved, not faulted in again. Settings are read once per process, so the check
//! runs in a child process with a purge delay long enough that no freed page is returned.

mod common;

use retype_malloc as rm;

const KIB: usize = 1024;

/// How many of the pages of `[p, p+len)` are resident, and how many there are.
fn resident(p: *mut u8, len: usize) -> (usize, usize) {
    let start = (p as usize).next_multiple_of(4 * KIB);
    let pages = (p as usize + len - start) / (4 * KIB);
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is a live block of ours; `vec` has a byte per page.
    let r = unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            pages * 4 * KIB,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0);
    (vec.iter().filter(|&&b| b & 1 != 0).count(), pages)
}

#[test]
fn a_block_longer_than_every_freed_one_takes_the_pages_of_several() {
    if std::env::var_os("RETYPE_MALLOC_PURGE_DELAY").is_none() {
        return; // run by `in_a_child` below
    }
    let size = 600 * KIB;
    // SAFETY: plain allocations, written within their sizes, each freed once.
    unsafe {
        let (a, b) = (rm::malloc(size), rm::malloc(size));
        a.write_bytes(1, size);
        b.write_bytes(2, size);
        rm::free(a);
        rm::free(b);
        // Below 2 MiB (not on huge pages), longer than either, shorter than both.
        let c = rm::malloc(2 * size - 64 * KIB);
        let (touched, pages) = resident(c, 2 * size - 64 * KIB);
        // All resident but the pages of the two headers that were never written.
        let headers = 2 * rm::HEADER_SIZE / (4 * KIB);
        assert!(
            touched + headers >= pages,
            "{touched} of {pages} pages resident: the block is not made of the freed ones"
        );
        rm::free(c);
    }
}

#[test]
fn in_a_child() {
    common::rerun_with(
        "in_a_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_HARDENED", "0"),
            ("RETYPE_MALLOC_GUARD", "0"),
        ],
    );
}
