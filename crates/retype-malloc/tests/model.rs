//! Property tests of the allocator against a model: random sequences of aligned mallocs,
//! reallocs and frees; every live block must be aligned, at least as large as asked, disjoint
//! from every other live block, and keep its contents (also across realloc). After every
//! operation the thread's heap must pass `check_consistency` (queues, segments, free lists).

#![deny(clippy::undocumented_unsafe_blocks)]

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use retype_malloc as rm;

#[derive(Debug, Clone)]
enum Op {
    Alloc { size: usize, align_log: u32 },
    Realloc { pick: usize, size: usize },
    Free { pick: usize },
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..1100,
        3 => 1000usize..140_000,
        1 => 100_000usize..3_000_000,
    ]
}

/// Three medium classes only: their pages fill and empty in turn, so emptied pages are kept,
/// reused, and given back when the heap keeps too many of them.
fn few_classes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(8 * 1024), Just(60 * 1024), Just(120 * 1024)]
}

fn op<S: Strategy<Value = usize> + 'static>(size: fn() -> S) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (size(), prop_oneof![4 => Just(0u32), 1 => 5u32..23]).prop_map(|(size, align_log)| Op::Alloc { size, align_log }),
        2 => (any::<usize>(), size()).prop_map(|(pick, size)| Op::Realloc { pick, size: size.max(1) }),
        3 => any::<usize>().prop_map(|pick| Op::Free { pick }),
    ]
}

/// A live block in the model: where, how big, and the byte it is filled with.
#[derive(Clone, Copy)]
struct Live {
    size: usize,
    fill: u8,
}

struct Model {
    live: BTreeMap<usize, Live>,
    next_fill: u8,
}

impl Model {
    fn check_contents(&self, p: usize, b: Live) {
        // SAFETY: `p` is a live block of at least `b.size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, b.size) };
        let sample = bytes.iter().step_by(1 + b.size / 64);
        assert!(
            sample.clone().all(|&x| x == b.fill),
            "block {p:#x} lost its contents"
        );
        if let Some(&last) = bytes.last() {
            assert_eq!(last, b.fill, "last byte of block {p:#x}");
        }
    }

    /// Adds a fresh block after checking it against every live one.
    fn insert(&mut self, p: usize, size: usize, align: usize) {
        assert_ne!(p, 0, "allocation of {size} bytes failed");
        assert_eq!(
            p % align.max(rm::MIN_ALIGN),
            0,
            "block {p:#x} not aligned to {align}"
        );
        // SAFETY: `p` is live.
        let usable = unsafe { rm::usable_size(p as *mut u8) };
        assert!(usable >= size, "usable {usable} < {size}");
        assert!(
            usable > 0,
            "block {p:#x} of {size} bytes has no byte of its own"
        );
        if let Some((&q, b)) = self.live.range(..=p).next_back() {
            assert!(q + b.size <= p, "block {p:#x} overlaps {q:#x}+{}", b.size);
        }
        if let Some((&q, _)) = self.live.range(p..).next() {
            assert!(p + usable <= q, "block {p:#x}+{usable} overlaps {q:#x}");
        }
        self.next_fill = self.next_fill.wrapping_add(1);
        let fill = self.next_fill;
        // SAFETY: the block has `usable` bytes; filling all of them checks that usable_size is exact.
        unsafe { std::ptr::write_bytes(p as *mut u8, fill, usable) };
        self.live.insert(p, Live { size: usable, fill });
    }

    fn pick(&self, i: usize) -> Option<(usize, Live)> {
        (!self.live.is_empty()).then(|| {
            let (&p, &b) = self.live.iter().nth(i % self.live.len()).unwrap();
            (p, b)
        })
    }
}

fn run(ops: Vec<Op>) {
    let mut m = Model {
        live: BTreeMap::new(),
        next_fill: 0,
    };
    for op in ops {
        rm::check_consistency();
        match op {
            Op::Alloc { size, align_log } => {
                let align = 1usize << align_log;
                // SAFETY: `align` is a power of two.
                let p = unsafe { rm::malloc_aligned(size, align) } as usize;
                m.insert(p, size, align);
            }
            Op::Realloc { pick, size } => {
                let Some((p, b)) = m.pick(pick) else { continue };
                m.check_contents(p, b);
                m.live.remove(&p);
                // SAFETY: `p` is live; `size` ≥ 1.
                let q = unsafe { rm::realloc(p as *mut u8, size) } as usize;
                let kept = Live {
                    size: b.size.min(size),
                    fill: b.fill,
                };
                m.check_contents(q, kept);
                m.insert(q, size, 1);
            }
            Op::Free { pick } => {
                let Some((p, b)) = m.pick(pick) else { continue };
                m.check_contents(p, b);
                m.live.remove(&p);
                // SAFETY: `p` is live and forgotten by the model.
                unsafe { rm::free(p as *mut u8) };
            }
        }
    }
    rm::check_consistency();
    for (&p, &b) in &m.live {
        m.check_contents(p, b);
        // SAFETY: every remaining block is live.
        unsafe { rm::free(p as *mut u8) };
    }
    rm::check_consistency();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn blocks_are_aligned_disjoint_and_keep_their_contents(ops in prop::collection::vec(op(size), 1..300)) {
        run(ops);
    }

    #[test]
    fn pages_emptied_in_turn_keep_the_heap_consistent(ops in prop::collection::vec(op(few_classes), 1..600)) {
        run(ops);
    }
}

/// Blocks allocated on one thread and freed on another (the remote-free path), in both
/// directions, with contents checked on arrival.
#[test]
fn cross_thread_frees_keep_blocks_intact() {
    use std::sync::mpsc;
    let (to_b, from_a) = mpsc::channel::<Vec<(usize, usize)>>();
    let (to_a, from_b) = mpsc::channel::<Vec<(usize, usize)>>();
    let make = |seed: usize| -> Vec<(usize, usize)> {
        (0..2000)
            .map(|i| {
                let size = (i * 7919 + seed) % 5000 + 1;
                // SAFETY: plain allocation, filled over its size.
                let p = unsafe { rm::malloc(size) };
                assert!(!p.is_null());
                // SAFETY: the block has `size` bytes.
                unsafe { std::ptr::write_bytes(p, (size % 251) as u8, size) };
                (p as usize, size)
            })
            .collect()
    };
    let check_free = |batch: Vec<(usize, usize)>| {
        for (p, size) in batch {
            // SAFETY: blocks from the other thread, live until freed here.
            let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, size) };
            assert!(bytes.iter().all(|&x| x == (size % 251) as u8));
            // SAFETY: the block is live and freed once.
            unsafe { rm::free(p as *mut u8) };
        }
    };
    let b = std::thread::spawn(move || {
        for round in 0..50 {
            to_a.send(make(round * 13)).unwrap();
            check_free(from_a.recv().unwrap());
            rm::check_consistency();
        }
    });
    for round in 0..50 {
        to_b.send(make(round * 17)).unwrap();
        check_free(from_b.recv().unwrap());
        rm::check_consistency();
    }
    b.join().unwrap();
}

/// `malloc_aligned(0, align)` must return a pointer inside its own block. From a small block,
/// an aligned run of zero bytes at the very end of the block would be the start of the next
/// block, whose bytes `insert` then overwrites (found as a corrupt free list by the consistency
/// check, or as an overlap); from a large mapping, it would be the mapping's end.
#[test]
fn aligned_empty_blocks_stay_inside_their_blocks() {
    let mut m = Model {
        live: BTreeMap::new(),
        next_fill: 0,
    };
    for align_log in (5..=9).chain(14..=15).chain(21..=22) {
        for _ in 0..64 {
            let align = 1usize << align_log;
            // SAFETY: `align` is a power of two.
            let p = unsafe { rm::malloc_aligned(0, align) } as usize;
            m.insert(p, 0, align);
            rm::check_consistency();
        }
    }
    for &p in m.live.keys() {
        // SAFETY: every block is live.
        unsafe { rm::free(p as *mut u8) };
    }
    rm::check_consistency();
}

/// Every test of this file again, in a child process with hardened mode's measures on
/// (settings are read once per process, at its first allocation). Zero-size blocks stay
/// ordinary there: the model gives every block a byte of its own; the preload tests cover
/// inaccessible zero-size blocks.
#[test]
fn the_model_holds_in_hardened_mode() {
    common::rerun_with(
        "the_model_holds_in_hardened_mode",
        &[
            ("RETYPE_MALLOC_HARDENED", "1"),
            ("RETYPE_MALLOC_ZERO_FAULT", "0"),
        ],
    );
}

/// Every test of this file again, in a child process with a reserve
/// (`RETYPE_MALLOC_RESERVE`), whose pieces are cut, reused and never moved, and with the
/// purge delay at 0, so what lies outside it is unmapped at once.
#[test]
fn the_model_holds_with_a_reserve() {
    common::rerun_with(
        "the_model_holds_with_a_reserve",
        &[
            ("RETYPE_MALLOC_RESERVE", "64M"),
            ("RETYPE_MALLOC_PURGE_DELAY", "0"),
        ],
    );
}
