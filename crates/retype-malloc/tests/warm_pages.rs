//! A heap emptied and filled again takes the pages it has touched before new ones: seed
//! 003's rounds (round k allocates 256·k blocks of 4 KiB and frees them all; from round 8 on
//! the same 2048 each round) fault in about 256 new pages per growing round, and none once
//! the rounds stop growing. Before, a segment kept alive by one empty page was filled from
//! its untouched slices while touched segments waited in the cache: every other round
//! faulted in twice the pages it added, and so did the first steady one. One test in its
//! own binary, so that no other test's pages are counted.

use retype_malloc as rm;

/// Minor page faults of this process so far.
fn faults() -> i64 {
    // SAFETY: getrusage writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u.ru_minflt
    }
}

#[test]
fn rounds_fault_in_only_the_pages_they_add() {
    let mut blocks = Vec::with_capacity(2048);
    let mut added = Vec::new();
    for k in 1..=12usize {
        let before = faults();
        for _ in 0..256 * k.min(8) {
            // SAFETY: plain allocation, written within its size.
            unsafe {
                let p = rm::malloc(4096);
                assert!(!p.is_null());
                p.write(1);
                blocks.push(p);
            }
        }
        for p in blocks.drain(..) {
            // SAFETY: each block is live and freed once.
            unsafe { rm::free(p) };
        }
        added.push(faults() - before);
    }
    // 256 new 4 KiB blocks a growing round: 256 pages, and a few for headers and the test.
    for (k, &f) in added.iter().enumerate().take(8) {
        assert!(
            f <= 256 + 48,
            "round {}: {f} page faults; all {added:?}",
            k + 1
        );
    }
    for (k, &f) in added.iter().enumerate().skip(8) {
        assert!(
            f <= 48,
            "round {} (steady): {f} page faults; all {added:?}",
            k + 1
        );
    }
}
