//! A large block that no freed mapping is long enough for is made of several freed ones,
//! their pages moved, not faulted in again, once the program has freed a dense block; until
//! then (its blocks touched here and there) it is mapped afresh, without moving pages. The
//! same in secure and hardened modes, whose registry of our mappings follows the pages moved.
//! Settings are read once per process, and whether blocks are dense is too, so the check runs
//! in a child process with a purge delay long enough that no freed page is returned.

mod common;
#[path = "common/fork.rs"]
mod fork;

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

/// Gathering while another thread maps and frees large blocks: every free is checked against
/// the registry of our mappings (secure and hardened modes), which must never lose a mapping
/// made in a range that a gathered piece has just left (an invalid free would abort).
#[test]
fn gathering_beside_a_thread_that_maps_keeps_every_mapping_known() {
    if !racing() {
        return; // run by `race_in_a_secure_child` and `race_in_a_hardened_child`
    }
    // SAFETY: plain allocations, written within their sizes, each freed once.
    unsafe {
        let dense = rm::malloc(4 << 20);
        dense.write_bytes(3, 4 << 20);
        rm::free(dense);
    }
    let mapper = std::thread::spawn(|| {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            let size = 200 * KIB + next(&mut seed) as usize % (4 << 20);
            // SAFETY: as above.
            unsafe {
                let q = rm::malloc(size);
                q.write(1);
                rm::free(q);
            }
        }
    });
    // Dense blocks of varied sizes in slots replaced at random (as `bench/src/large.c`), so
    // that many are made of shorter freed ones.
    let mut slots = [0usize; 8];
    let mut seed = 7u64;
    for _ in 0..1500 {
        let size = 600 * KIB + next(&mut seed) as usize % (6 << 20);
        let k = (seed >> 20) as usize % slots.len();
        // SAFETY: as above; each slot holds a live block or null.
        unsafe {
            let p = rm::malloc(size);
            p.write_bytes(5, size);
            rm::free(slots[k] as *mut u8);
            slots[k] = p as usize;
        }
    }
    mapper.join().unwrap();
    for p in slots {
        // SAFETY: each slot's block is live.
        unsafe { rm::free(p as *mut u8) };
    }
}

/// The next number of a linear congruential sequence from `seed` (its high bits).
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Marks the child processes of the test with two threads: whether blocks are dense, and the
/// count of system calls, are the process's, which the other test reads.
const RACE: &str = "RETYPE_MALLOC_TEST_GATHER_RACE";

fn racing() -> bool {
    std::env::var_os(RACE).is_some()
}

/// Whether this run puts guard pages around large blocks (see `in_a_child` and the others).
fn guarded() -> bool {
    let on = |name| std::env::var(name).as_deref() == Ok("1");
    on("RETYPE_MALLOC_SECURE") || on("RETYPE_MALLOC_HARDENED")
}

#[test]
fn a_block_longer_than_every_freed_one_takes_the_pages_of_several() {
    if std::env::var_os("RETYPE_MALLOC_PURGE_DELAY").is_none() || racing() {
        return; // run by `in_a_child` and the others below
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
        // Map and trim its ends, and make its two guard pages in secure and hardened mode.
        let guards = if guarded() { 2 } else { 0 };
        assert!(
            rm::system_calls() - calls <= 3 + guards,
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
        if guarded() {
            // `a`'s pages now serve `c`, and its mapping is gone: freeing `a` again is a free
            // of a pointer we do not map, refused by name (abort), not a fault on its header.
            assert_eq!(fork::signal_of(|| rm::free(a)), libc::SIGABRT);
        }
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

/// The same in secure mode, whose large blocks lie between guard pages and whose frees are
/// checked against the registry of our mappings, which must follow the pages moved.
#[test]
fn in_a_secure_child() {
    common::rerun_with(
        "in_a_secure_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_SECURE", "1"),
        ],
    );
}

/// The same in hardened mode (guard pages, canaries, quarantine).
#[test]
fn in_a_hardened_child() {
    common::rerun_with(
        "in_a_hardened_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_HARDENED", "1"),
        ],
    );
}

/// `gathering_beside_a_thread_that_maps_keeps_every_mapping_known` in secure mode.
#[test]
fn race_in_a_secure_child() {
    common::rerun_with(
        "race_in_a_secure_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_SECURE", "1"),
            (RACE, "1"),
        ],
    );
}

/// The same in hardened mode.
#[test]
fn race_in_a_hardened_child() {
    common::rerun_with(
        "race_in_a_hardened_child",
        &[
            ("RETYPE_MALLOC_PURGE_DELAY", "100000"),
            ("RETYPE_MALLOC_HARDENED", "1"),
            (RACE, "1"),
        ],
    );
}
