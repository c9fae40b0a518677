//! What the CHERI study sizes: the requests of a workload, as runs of equal
//! requests in request order (seed 004's patterns ask for millions of blocks
//! of one size). Only what a capability's bounds depend on is kept: each
//! malloc's and realloc's size and alignment; frees change no bounds.

use std::path::Path;

use retype_trace::{format, requests, Request};

/// `count` requests of `size` bytes aligned to `align`, one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub size: u64,
    pub align: u64,
    pub count: u64,
}

/// A workload of the study.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    /// Where the requests come from, in a few words.
    pub source: String,
    pub runs: Vec<Run>,
}

impl Workload {
    fn new(name: &str, source: &str) -> Workload {
        Workload {
            name: name.to_string(),
            source: source.to_string(),
            runs: Vec::new(),
        }
    }

    /// Appends `count` requests, joining them to the last run when equal.
    fn push(&mut self, size: u64, align: u64, count: u64) {
        match self.runs.last_mut() {
            Some(r) if r.size == size && r.align == align => r.count += count,
            _ => self.runs.push(Run { size, align, count }),
        }
    }

    /// Requests in all.
    pub fn requests(&self) -> u64 {
        self.runs.iter().map(|r| r.count).sum()
    }

    /// A malloc-lab `.rep` file, or any trace `retype trace` reads (a
    /// recording: threads serialized by timestamp).
    pub fn from_trace(path: &Path) -> anyhow::Result<Workload> {
        let (requests, _) = format::load_requests(path, None)?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut w = Workload::new(&name, &path.display().to_string());
        for r in requests.requests {
            match r {
                Request::Alloc { size, align, .. } => w.push(size, u64::from(align), 1),
                Request::Realloc { size, .. } => w.push(size, u64::from(requests::MALLOC_ALIGN), 1),
                Request::Free { .. } => {}
            }
        }
        Ok(w)
    }
}

/// A capability (a pointer) on the seed's machine: Morello's purecap ABI.
const POINTER: u64 = 16;
/// malloc's alignment there: a capability's.
const MALLOC_ALIGN: u64 = 16;

/// Seed 004's benchmarks as the seed ran them on Morello (pointers of 16
/// bytes), from their sources' allocation patterns (`bench/src` holds our
/// clean-room versions; docs/reproduction-004.md gives the parameters).
pub fn seed004_patterns() -> Vec<Workload> {
    let mut glibc = Workload::new(
        "glibc",
        "seed 004's GLIBC benchmark: 16, 32 and 64 B, each 4 passes of batches of 25/100/400/1600, 80,000 iterations",
    );
    const ITERATIONS: u64 = 80_000;
    for size in [16, 32, 64] {
        // A warm-up pass, the main thread, a second thread, the main thread again;
        // each batch size allocates ITERATIONS * 25 blocks.
        glibc.push(size, MALLOC_ALIGN, 4 * 4 * ITERATIONS * 25);
    }
    let mut memaccess = Workload::new(
        "memaccess",
        "seed 004's MemAccess: one allocation holding the list (1 GiB as ours; the seed's 8 GiB is a power of two too)",
    );
    memaccess.push(1 << 30, MALLOC_ALIGN, 1);
    let (points, dim, k, threads, iterations) = (10_000u64, 40u64, 100u64, 4u64, 10u64);
    let mut kmeans = Workload::new(
        "kmeans",
        "seed 004's Kmeans: 10,000 points of 40 doubles, 100 clusters, 4 threads, 10 iterations",
    );
    kmeans.push(points * POINTER, MALLOC_ALIGN, 1);
    kmeans.push(points * 4, MALLOC_ALIGN, 1);
    kmeans.push(k * dim * 8, MALLOC_ALIGN, 1);
    kmeans.push(dim * 8, MALLOC_ALIGN, points);
    for _ in 0..iterations * threads {
        kmeans.push(k * dim * 8, MALLOC_ALIGN, 1);
        kmeans.push(k * 8, MALLOC_ALIGN, 1);
    }
    let mut richards = Workload::new(
        "richards",
        "seed 004's Richards: a packet (a pointer and three ints: 28 B, 32 with padding) per worker release, about 1,000,000 in 2,000,000 iterations",
    );
    richards.push(2 * POINTER, MALLOC_ALIGN, 1_000_000);
    vec![glibc, memaccess, kmeans, richards]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_requests_join_one_run() {
        let mut w = Workload::new("w", "test");
        w.push(16, 16, 2);
        w.push(16, 16, 3);
        w.push(32, 16, 1);
        w.push(16, 8, 1);
        assert_eq!(w.runs.len(), 3);
        assert_eq!(w.runs[0].count, 5);
        assert_eq!(w.requests(), 7);
    }

    #[test]
    fn the_seed_patterns_hold_what_their_programs_allocate() {
        let p = seed004_patterns();
        let names: Vec<_> = p.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["glibc", "memaccess", "kmeans", "richards"]);
        assert_eq!(p[0].requests(), 3 * 16 * 2_000_000);
        // kmeans: three arrays, a block per point, two buffers per thread and iteration.
        assert_eq!(p[2].requests(), 3 + 10_000 + 2 * 4 * 10);
    }
}
