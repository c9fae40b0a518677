//! In hardened mode a freed large block's mapping, inaccessible in the quarantine, is cached
//! so, sealed: a use after free faults while it waits there too, and the next block made of
//! it renews only its own pages (to read as zeros), one system call, its guard pages being in
//! place already. A sealed mapping cut for a shorter block, or taken by a block or segment
//! without guard pages, is opened where it is used. Settings are read once per process, so
//! the checks run in a child process, with a purge delay long enough that no freed page is
//! returned and a quarantine of one byte, which a freed large block leaves at the next large
//! free.

mod common;
#[path = "common/fork.rs"]
mod fork;

use retype_malloc as rm;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Frees the large block `p` and a short one after it, so that `p`'s mapping leaves the
/// quarantine for the cache (the short one's is too short to serve the blocks below).
unsafe fn retire(p: *mut u8) {
    // SAFETY: the caller's live block, freed once; the filler is ours.
    unsafe {
        rm::free(p);
        let filler = rm::malloc(200 * KIB);
        filler.write(1);
        rm::free(filler);
    }
}

/// Reads the byte at `p` in a child process: the signal it died of.
fn read_at(p: *const u8) -> i32 {
    // SAFETY: a volatile read, to see whether it faults.
    fork::signal_of(|| unsafe {
        p.read_volatile();
    })
}

#[test]
fn a_freed_guarded_block_waits_sealed_and_its_successor_opens_only_its_pages() {
    if std::env::var_os("RETYPE_MALLOC_PURGE_DELAY").is_none() {
        return; // run by `in_a_hardened_child`
    }
    // A whole number of pages: the block starts on its first page, after the guard page.
    let size = 600 * KIB;
    // SAFETY: plain allocations, written within their sizes, each freed once; the reads
    // outside live blocks are made in child processes, which fault.
    unsafe {
        rm::trim();
        let a = rm::malloc(size);
        a.write_bytes(7, size);
        retire(a);
        assert_eq!(read_at(a), libc::SIGSEGV, "a cached block is accessible");
        assert_eq!(read_at(a.add(size - 1)), libc::SIGSEGV);

        let calls = rm::system_calls();
        let b = rm::malloc(size);
        assert_eq!(b, a, "the freed block's mapping was not reused");
        // Its pages renewed, to read as zeros, by one call.
        let made = rm::system_calls() - calls;
        assert_eq!(made, 1, "system calls for a block made of a cached mapping");
        for i in [0, 4096, size / 2, size - 1] {
            assert_eq!(b.add(i).read(), 0, "byte {i} of a fresh block");
        }
        b.write_bytes(9, size);
        assert_eq!(read_at(b.sub(1)), libc::SIGSEGV, "no guard page before");
        assert_eq!(read_at(b.add(size)), libc::SIGSEGV, "no guard page after");
        assert_eq!(read_at(b.add(size - 1)), 0);
        retire(b);

        // A longer sealed mapping cut for a shorter block: both parts serve blocks.
        let big = rm::malloc(6 * MIB);
        big.write_bytes(1, 6 * MIB);
        retire(big);
        let short = rm::malloc(size);
        short.write_bytes(2, size);
        let rest = rm::malloc(3 * MIB);
        rest.write_bytes(3, 3 * MIB);
        // Unguarded users of sealed mappings: a block aligned past a page, segments.
        let aligned = rm::malloc_aligned(size, 64 * KIB);
        aligned.write_bytes(4, size);
        rm::free(aligned);
        let small: Vec<*mut u8> = (0..20_000).map(|_| rm::malloc(512)).collect();
        for &p in &small {
            p.write_bytes(5, 512);
        }
        for p in small {
            rm::free(p);
        }
        rm::free(short);
        rm::free(rest);
    }
}

#[test]
fn in_a_hardened_child() {
    common::rerun_with(
        "in_a_hardened_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_QUARANTINE_BYTES", "1"),
        ],
    );
}
