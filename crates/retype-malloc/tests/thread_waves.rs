//! Threads that come and go leave no memory behind them: many threads churn blocks of random
//! sizes, hand some to each other through a shared list (so most of those are freed by a
//! thread that did not allocate them, often after their owner exited), and exit in waves,
//! each checking its heap (`check_consistency`) after every round and before it exits.
//! Once a thread exits after the purge delay (which reclaims the heaps that waited in the pool
//! for that long), the bytes the thread heaps hold are at most the pages the blocks still
//! live can pin: a bound in those blocks alone, the same whether 16 or 64 threads ran. Only
//! this test allocates with this allocator (the harness and the list use the system's).

use std::sync::{Barrier, Mutex};

use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use retype_malloc::{self as rm, size_class, HeapState, Stats, SLICE_SIZE};

/// Whether this run quarantines freed blocks (hardened mode, or the quarantine alone).
fn quarantined() -> bool {
    let var = |name| std::env::var(name).ok();
    let bytes = var("RETYPE_MALLOC_QUARANTINE_BYTES");
    match bytes.as_deref() {
        Some(b) => b != "0",
        None => var("RETYPE_MALLOC_HARDENED").as_deref() == Some("1"),
    }
}

/// Threads exit in this many waves: those of wave `w` run `(w + 1) * ROUNDS` rounds.
const WAVES: usize = 4;
const ROUNDS: usize = 40;
/// Blocks a thread allocates per round.
const BATCH: usize = 32;
/// The most blocks the shared list holds: those left in it at the end stay live.
const HANDED_MAX: usize = 128;

/// A live block: its address, its size, and the byte written at its first and last byte.
#[derive(Clone, Copy)]
struct Block {
    addr: usize,
    size: usize,
    tag: u8,
}

/// A seeded generator (proptest's), so each thread's sizes differ and a seed replays a run.
struct Rng(TestRng);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    fn next(&mut self) -> u64 {
        self.0.random()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }

    /// Mostly small blocks, some of a few KiB, a few medium ones up to the largest class.
    fn size(&mut self) -> usize {
        match self.below(20) {
            0 => 16 * 1024 + self.below(size_class::MEDIUM_MAX - 16 * 1024),
            1..=5 => 1024 + self.below(15 * 1024),
            _ => 1 + self.below(1024),
        }
    }
}

fn alloc(rng: &mut Rng) -> Block {
    let size = rng.size();
    let tag = rng.next() as u8;
    // SAFETY: a fresh block of `size` bytes, written within its bounds.
    let p = unsafe { rm::malloc(size) };
    assert!(!p.is_null());
    // SAFETY: as above.
    unsafe {
        p.write(tag);
        p.add(size - 1).write(tag);
    }
    Block {
        addr: p as usize,
        size,
        tag,
    }
}

/// Frees `b` after checking that no other block overwrote its first and last bytes.
fn free(b: Block) {
    let p = b.addr as *mut u8;
    // SAFETY: `b` is live, allocated by `alloc`, and freed once.
    unsafe {
        assert_eq!((p.read(), p.add(b.size - 1).read()), (b.tag, b.tag));
        rm::free(p);
    }
}

/// One thread of wave `wave`: rounds of mallocs, a quarter of the blocks handed to the
/// shared list (while it has room), blocks taken from it and freed, half of its own freed.
/// Every thread waits at `start` after its first round, so all have a heap at once.
fn worker(id: usize, wave: usize, handed: &Mutex<Vec<Block>>, start: &Barrier) {
    let mut rng = Rng::new(id as u64);
    let mut own: Vec<Block> = Vec::new();
    for round in 0..(wave + 1) * ROUNDS {
        if round == 1 {
            start.wait();
        }
        for _ in 0..BATCH {
            let b = alloc(&mut rng);
            let mut list = handed.lock().unwrap();
            if rng.below(4) == 0 && list.len() < HANDED_MAX {
                list.push(b);
            } else {
                own.push(b);
            }
        }
        let taken: Vec<Block> = {
            let mut list = handed.lock().unwrap();
            let n = list.len().min(8);
            (0..n)
                .map(|_| {
                    let i = rng.below(list.len());
                    list.swap_remove(i)
                })
                .collect()
        };
        taken.into_iter().for_each(free);
        for _ in 0..own.len() / 2 {
            let i = rng.below(own.len());
            free(own.swap_remove(i));
        }
        rm::check_consistency();
    }
    own.into_iter().for_each(free);
    rm::check_consistency();
}

/// The most bytes a page holding a block of `size` bytes spans.
fn page_bytes(size: usize) -> usize {
    size_class::span_of(size_class::class_of(size), u32::MAX) * SLICE_SIZE
}

/// Runs `threads` workers to their exit and returns the statistics then, with the blocks
/// still live (those left in the shared list).
fn run(threads: usize) -> (Stats, Vec<Block>) {
    let handed = Mutex::new(Vec::new());
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let (handed, start) = (&handed, &start);
        let workers: Vec<_> = (0..threads)
            .map(|id| s.spawn(move || worker(id, id % WAVES, handed, start)))
            .collect();
        // Joined one by one: the scope's own wait ends before a thread's exit hooks, which
        // give up its heap, have run.
        workers.into_iter().for_each(|w| w.join().unwrap());
    });
    // The default purge delay, and a margin for a loaded machine; then one more thread.
    std::thread::sleep(std::time::Duration::from_millis(100 + 100));
    std::thread::spawn(|| free(alloc(&mut Rng::new(u64::MAX))))
        .join()
        .unwrap();
    (rm::stats(), handed.into_inner().unwrap())
}

#[test]
fn heaps_of_exited_threads_hold_only_what_live_blocks_pin() {
    for threads in [16, 64] {
        let (s, live) = run(threads);
        // A heap each, made or adopted: never more than the most threads alive at once, this
        // one included (given a heap when it freed the first round's last blocks).
        let heaps = s.heaps.len();
        assert!(
            threads <= heaps && heaps <= 64 + 1,
            "{threads} threads, {heaps} heaps"
        );
        assert!(
            s.heaps
                .iter()
                .all(|h| h.state == HeapState::Abandoned || h.state == HeapState::Own),
            "every thread exited: {:?}",
            s.heaps
        );
        let total = s.heap_total();
        let held = total.held;
        // glibc's fields, as `mallinfo2` gives them, say the same after heaps were reclaimed.
        let m = s.mallinfo();
        assert_eq!(
            (m.uordblks, m.arena + m.hblkhd),
            (total.in_use, s.mapped),
            "{m:?}"
        );
        assert_eq!(m.arena, m.uordblks + m.fordblks, "{m:?}");
        let bound: usize = live.iter().map(|b| page_bytes(b.size)).sum();
        eprintln!(
            "{threads} threads: {} heaps hold {held} bytes; {} blocks live ({} bytes) may pin {bound}",
            s.heaps.len(),
            live.len(),
            live.iter().map(|b| b.size).sum::<usize>()
        );
        assert!(
            held <= bound,
            "{threads} threads: heaps hold {held} bytes, more than the {bound} that {} live blocks can pin",
            live.len()
        );
        // The last blocks freed by this thread, which is given a heap at its first free (one
        // of the pool's, perhaps): `malloc_trim` takes their pages back from the heaps they
        // lie in, its own or the pool's. Where freed blocks are quarantined (hardened mode),
        // by a thread that exits instead: this thread's quarantine would hold them, and pin
        // their pages, into the next round; an exiting thread's lets them go.
        if quarantined() {
            std::thread::spawn(move || live.into_iter().for_each(free))
                .join()
                .unwrap();
        } else {
            live.into_iter().for_each(free);
        }
        rm::trim();
        let after = rm::stats().heap_total();
        assert_eq!(after.held, 0, "{threads} threads, after trim: {after:?}");
    }
}
