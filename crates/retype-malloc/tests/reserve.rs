//! `RETYPE_MALLOC_RESERVE`: with a reserve mapped and faulted in at start-up, a loop of
//! mallocs and frees within it makes no system call that maps, unmaps, moves or advises
//! memory once it has run once (warm-up). Settings are read once per process, so the check
//! runs in a child process with the variable set.

mod common;

use retype_malloc as rm;

/// One round: small, medium and large blocks (up to 5.7 MiB, some past 2 MiB), about 50 MiB
/// in all, allocated and then freed, the large ones in between the others; the same
/// sequence every time for a `seed`.
fn round(seed: u64) {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut blocks = Vec::with_capacity(4096);
    for i in 0..4000 {
        let size = match i % 400 {
            0 => 256 * 1024 + (i as usize % 7) * 800 * 1024,
            1..=40 => 1024 + next() as usize % (120 * 1024),
            _ => 8 + next() as usize % 1000,
        };
        // SAFETY: plain allocation, written within its size.
        unsafe {
            let p = rm::malloc(size);
            assert!(!p.is_null());
            p.write_bytes(1, size.min(64));
            blocks.push(p);
        }
    }
    for p in blocks {
        // SAFETY: each block is live and freed once.
        unsafe { rm::free(p) };
    }
}

#[test]
fn after_warm_up_mallocs_and_frees_within_the_reserve_make_no_system_call() {
    if std::env::var_os("RETYPE_MALLOC_RESERVE").is_none() {
        return; // run by `with_a_reserve_in_a_child` below
    }
    round(1); // warm-up: the thread's heap, the first use of each piece of the reserve
    let before = rm::system_calls();
    for r in 0..20 {
        round(1);
        assert_eq!(rm::system_calls(), before, "round {r}");
    }
}

#[test]
fn with_a_reserve_in_a_child() {
    if std::env::var_os("RETYPE_MALLOC_RESERVE").is_none() {
        // A purge delay of 0 unmaps at once whatever is freed outside the reserve: without a
        // reserve big enough, the rounds would make system calls.
        common::rerun_with(
            "with_a_reserve_in_a_child",
            &[
                ("RETYPE_MALLOC_RESERVE", "96M"),
                ("RETYPE_MALLOC_PURGE_DELAY", "0"),
            ],
        );
    }
}
