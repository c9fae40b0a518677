//! A large block that no freed mapping is long enough for is made of several freed ones,
//! their pages moved, not faulted in again, once the program has freed a dense block; until
//! then (its blocks touched here and there) it is mapped afresh, without moving pages.
//! Settings are read once per process, and whether blocks are dense is too, so the check runs
//! in a child process with a purge delay long enough that no freed page is returned.

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
    // Below 2 MiB (not on huge pages), longer than either block, shorter than both.
    let longer = 2 * size - 64 * KIB;
    // SAFETY: plain allocations, written within their sizes, each freed once.
    unsafe {
        // Sparse blocks: the longer one is a fresh mapping (map, trim its ends), no moves.
        let (a, b) = (rm::malloc(size), rm::malloc(size));
        a.write(1);
        b.write(2);
        rm::free(a);
        rm::free(b);
        let calls = rm::system_calls();
        let c = rm::malloc(longer);
        assert!(
            rm::system_calls() - calls <= 3,
            "pages moved for a sparse program"
        );
        rm::free(c);
        // A dense block of 2 MiB or more, freed, shows the program's blocks dense.
        let dense = rm::malloc(4 << 20);
        dense.write_bytes(3, 4 << 20);
        rm::free(dense);
        rm::trim(); // its mapping, cached, would serve the block below

        let (a, b) = (rm::malloc(size), rm::malloc(size));
        a.write_bytes(1, size);
        b.write_bytes(2, size);
        rm::free(a);
        rm::free(b);
        let c = rm::malloc(longer);
        let (touched, pages) = resident(c, longer);
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
