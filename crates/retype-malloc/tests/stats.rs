//! The statistics report (`RETYPE_MALLOC_STATS`): peak live bytes against the bytes mapped at
//! their peak, and where those were. Settings are read once per process, so the checks run
//! in a child process with the variable set.

mod common;

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;

use retype_malloc as rm;

const MIB: usize = 1 << 20;

/// The report's value on the line that starts (after its indentation) with `name`.
fn value(report: &str, name: &str) -> usize {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no line {name:?} in\n{report}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn report() -> String {
    let mut file = tempfile();
    rm::print_stats(file.as_raw_fd());
    file.rewind().unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    text
}

/// An anonymous file to write the report to and read it back.
fn tempfile() -> std::fs::File {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("stats-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}

/// Holds 40 MiB of 1 KiB blocks and 24 MiB in three large blocks at once, frees them, and
/// reads the report: the peak live bytes are those 64 MiB (the harness allocates through its
/// own allocator, not this one), up to one count batch (64 KiB) still held by the thread,
/// and the bytes mapped at their peak hold at least the live bytes.
#[test]
fn the_report_gives_peak_live_bytes_and_where_mapped_bytes_were() {
    if std::env::var_os("RETYPE_MALLOC_STATS").is_none() {
        return; // run by `counted_in_a_child` below
    }
    let small: Vec<*mut u8> = (0..40 * 1024)
        .map(|_| {
            // SAFETY: plain allocation.
            let p = unsafe { rm::malloc(1024) };
            assert!(!p.is_null());
            p
        })
        .collect();
    let large: Vec<*mut u8> = (0..3)
        .map(|_| {
            // SAFETY: plain allocation.
            let p = unsafe { rm::malloc(8 * MIB) };
            assert!(!p.is_null());
            p
        })
        .collect();
    for p in small.into_iter().chain(large) {
        // SAFETY: each block is live and freed once.
        unsafe { rm::free(p) };
    }
    let text = report();
    let live = value(&text, "live bytes, peak");
    assert!(
        (64 * MIB - 64 * 1024..=64 * MIB).contains(&live),
        "peak live {live}\n{text}"
    );
    let small_at_peak = value(&text, "live small and medium blocks");
    let large_at_peak = value(&text, "live large blocks (bytes asked for)");
    assert_eq!(large_at_peak, 24 * MIB, "{text}");
    assert!(small_at_peak >= 40 * MIB - 64 * 1024, "{text}");
    let parts: usize = [
        "live small and medium blocks",
        "free blocks in pages of thread heaps",
        "free slices and headers of segments in use",
        "empty segments cached, pages kept",
        "freed large blocks cached, pages kept",
        "reserve not in use",
        "live large blocks (bytes asked for)",
        "large mappings beyond the bytes asked for",
    ]
    .iter()
    .map(|name| value(&text, name))
    .sum();
    assert_eq!(parts, value(&text, "bytes mapped, peak"), "{text}");
    assert!(text.contains("kernel VmHWM:"), "{text}");
    let figures = rm::stats();
    assert_eq!(figures.live_peak, Some(live), "{figures:?}");
    assert!(
        figures.small_live.is_some_and(|n| n < 64 * 1024),
        "{figures:?}"
    );
}

#[test]
fn counted_in_a_child() {
    if std::env::var_os("RETYPE_MALLOC_STATS").is_none() {
        common::rerun_with(
            "counted_in_a_child",
            &[("RETYPE_MALLOC_STATS", "/dev/null")],
        );
    }
}
