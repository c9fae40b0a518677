//! retype-malloc as this test program's `#[global_allocator]`: the test harness, std and the
//! tests below all allocate through it.

mod common;

use std::collections::HashMap;
use std::sync::mpsc;

#[global_allocator]
static GLOBAL: retype_malloc::RetypeMalloc = retype_malloc::RetypeMalloc;

#[repr(align(4096))]
struct PageAligned([u8; 4096]);

#[test]
fn collections_grow_shrink_and_keep_contents() {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..1_000_000u64 {
        v.push(i * 3);
    }
    assert_eq!(v.iter().sum::<u64>(), 3 * (999_999 * 1_000_000 / 2));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).map(|i| i * 3).collect::<Vec<_>>());
    let mut m = HashMap::new();
    for i in 0..200_000 {
        m.insert(format!("key-{i}"), vec![i as u8; i % 100]);
    }
    for i in (0..200_000).step_by(2) {
        m.remove(&format!("key-{i}"));
    }
    assert_eq!(m.len(), 100_000);
    assert!(m
        .iter()
        .all(|(k, v)| v.len() == k[4..].parse::<usize>().unwrap() % 100));
    retype_malloc::check_consistency();
}

#[test]
fn over_aligned_values() {
    let boxes: Vec<Box<PageAligned>> = (0..100)
        .map(|i| Box::new(PageAligned([i as u8; 4096])))
        .collect();
    for (i, b) in boxes.iter().enumerate() {
        assert_eq!(&**b as *const PageAligned as usize % 4096, 0);
        assert!(b.0.iter().all(|&x| x == i as u8));
    }
}

#[test]
fn eight_threads_exchange_strings() {
    let (tx, rx) = mpsc::channel::<Vec<String>>();
    let producers: Vec<_> = (0..8)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for round in 0..200 {
                    tx.send(
                        (0..100)
                            .map(|i| format!("{t}-{round}-{i}-{}", "x".repeat(i * 7 % 300)))
                            .collect(),
                    )
                    .unwrap();
                }
                retype_malloc::check_consistency();
            })
        })
        .collect();
    drop(tx);
    let mut total = 0;
    for batch in rx {
        for s in &batch {
            let i: usize = s.split('-').nth(2).unwrap().parse().unwrap();
            assert_eq!(s.matches('x').count(), i * 7 % 300);
        }
        total += batch.len();
    }
    producers.into_iter().for_each(|p| p.join().unwrap());
    assert_eq!(total, 8 * 200 * 100);
    retype_malloc::check_consistency();
}

/// Every test of this file again, in a child process with hardened mode on: there retype-malloc
/// serves the whole program, test harness included, with every measure.
#[test]
fn the_same_in_hardened_mode() {
    common::rerun_with(
        "the_same_in_hardened_mode",
        &[("RETYPE_MALLOC_HARDENED", "1")],
    );
}
