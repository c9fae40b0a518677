//! The text formats: wee_alloc, valgrind --trace-malloc, CSV, malloc-lab .rep,
//! and the summary that `retype trace info` prints.

mod common;

use std::collections::HashMap;

use common::event;
use proptest::prelude::*;
use retype_trace::requests::{from_events, to_events};
use retype_trace::summary::Summary;
use retype_trace::{csv, malloclab, valgrind, wee_alloc, Event, Op, Request, Requests, Trace};

#[test]
fn wee_alloc_frees_name_the_kth_alloc() {
    let t = wee_alloc::parse(
        "w.trace",
        "Alloc(552),\nAlloc(120),\nFree(0),\nAlloc(8),\nFree(2),\n",
    )
    .unwrap();
    let ops: Vec<Op> = t.events.iter().map(|e| e.op).collect();
    assert_eq!(
        ops,
        [Op::Malloc, Op::Malloc, Op::Free, Op::Malloc, Op::Free]
    );
    assert_eq!(t.events[2].ptr, t.events[0].ret);
    assert_eq!(t.events[4].ptr, t.events[3].ret);
    let s = Summary::of(&t);
    assert_eq!(s.peak_live_bytes, 672);
    assert_eq!((s.live_at_end_blocks, s.live_at_end_bytes), (1, 120));
}

#[test]
fn wee_alloc_errors_name_the_line() {
    for (text, line, what) in [
        ("Alloc(1),\nFree(1),\n", 2, "not yet allocated"),
        ("Alloc(1),\nFree(0),\nFree(0),\n", 3, "second time"),
        ("Alloc(1),\nRealloc(3),\n", 2, "unknown event"),
        ("Alloc(x),\n", 1, "not a non-negative integer"),
    ] {
        let e = wee_alloc::parse("w.trace", text).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(
            e.to_string().starts_with(&format!("w.trace:{line}: ")),
            "{e}"
        );
        assert!(e.to_string().contains(what), "{e}");
    }
}

const VALGRIND: &str = "\
==77== Memcheck, a memory error detector
--77-- malloc(10) = 0x4A40040
program output
--77-- realloc(0x4A40040,100) = 0x4A40090
--77-- calloc(3,8) = 0x4A40140
--77-- memalign(al 64, size 100) = 0x4A40200
--77-- realloc(0x0,998)malloc(998) = 0x52418E0
--77-- realloc(0x4A40200,0)free(0x4A40200)
--77--  = 0
--77-- free(0x4A40090)
--77-- free(0x0)
";

#[test]
fn valgrind_lines_become_events() {
    let t = valgrind::parse("v.vg", VALGRIND).unwrap();
    let got: Vec<(Op, u64, u64, u64, u64)> = t
        .events
        .iter()
        .map(|e| (e.op, e.ptr, e.size, e.align, e.ret))
        .collect();
    assert_eq!(
        got,
        [
            (Op::Malloc, 0, 10, 0, 0x4A40040),
            (Op::Realloc, 0x4A40040, 100, 0, 0x4A40090),
            (Op::Calloc, 0, 24, 0, 0x4A40140),
            (Op::Memalign, 0, 100, 64, 0x4A40200),
            (Op::Realloc, 0, 998, 0, 0x52418E0),
            (Op::Realloc, 0x4A40200, 0, 0, 0),
            (Op::Free, 0x4A40090, 0, 0, 0),
            (Op::Free, 0, 0, 0, 0),
        ]
    );
    assert!(t.events.iter().all(|e| e.thread == 77));
    let s = Summary::of(&t);
    assert_eq!(s.unknown_pointers, 0);
    assert_eq!(s.free_null, 1);
    assert_eq!(s.live_at_end_blocks, 2);
}

#[test]
fn valgrind_errors_name_the_line() {
    let e =
        valgrind::parse("v.vg", "--1-- malloc(10) = 0x10\n--1-- mystery(3) = 0x20\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.to_string().contains("unknown call"), "{e}");
    let e = valgrind::parse("v.vg", "--1-- realloc(0x10,0)free(0x10)\n").unwrap_err();
    assert_eq!(e.line, 1);
}

/// A valid malloc-lab request stream: allocs of free ids, reallocs and frees of live ones.
fn malloclab_ops() -> impl Strategy<Value = Vec<Request>> {
    prop::collection::vec((0u8..3, 0u32..8, 1u64..5000), 0..150).prop_map(|steps| {
        let mut live = std::collections::BTreeSet::new();
        let mut ops = Vec::new();
        for (kind, id, size) in steps {
            let op = match (kind, live.contains(&id)) {
                (_, false) => {
                    live.insert(id);
                    Request::Alloc {
                        id,
                        size,
                        align: retype_trace::requests::MALLOC_ALIGN,
                    }
                }
                (0, true) => Request::Realloc { id, size },
                _ => {
                    live.remove(&id);
                    Request::Free { id }
                }
            };
            ops.push(op);
        }
        ops
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn csv_round_trip(events in prop::collection::vec(event(), 0..100)) {
        // CSV has no column for the descheduled flag.
        let events = events.into_iter().map(|e| Event { descheduled: false, ..e }).collect();
        let t = Trace { events, ..Trace::default() };
        let mut out = Vec::new();
        csv::write(&t, &mut out).unwrap();
        let back = csv::parse("t.csv", std::str::from_utf8(&out).unwrap()).unwrap();
        prop_assert_eq!(back.events, t.events);
    }

    /// .rep → trace → .rep keeps every request, its size, and which block it names.
    #[test]
    fn rep_round_trip(ops in malloclab_ops()) {
        let mut text = Vec::new();
        malloclab::write(&mut text, 0, 1, &ops).unwrap();
        let parsed = malloclab::parse("gen.rep", &text).unwrap();
        let back = from_events(&to_events(&parsed, "gen.rep")).0.requests;
        prop_assert_eq!(back.len(), parsed.requests.len());
        let mut rename: HashMap<u32, u32> = HashMap::new();
        for (a, b) in parsed.requests.iter().zip(&back) {
            match (*a, *b) {
                (Request::Alloc { id, size, .. }, Request::Alloc { id: id2, size: s2, .. }) => {
                    prop_assert_eq!(size, s2);
                    rename.insert(id, id2);
                }
                (Request::Realloc { id, size }, Request::Realloc { id: id2, size: s2 }) => {
                    prop_assert_eq!(size, s2);
                    prop_assert_eq!(rename[&id], id2);
                }
                (Request::Free { id }, Request::Free { id: id2 }) => prop_assert_eq!(rename[&id], id2),
                (a, b) => prop_assert!(false, "{:?} became {:?}", a, b),
            }
        }
    }

    /// The peak of live bytes against a direct model over a malloc-lab stream.
    #[test]
    fn peak_live_bytes_matches_a_model(ops in malloclab_ops()) {
        let mut live: HashMap<u32, u64> = HashMap::new();
        let (mut peak, mut bytes) = (0u64, 0u64);
        for op in &ops {
            match *op {
                Request::Alloc { id, size, .. } => { live.insert(id, size); bytes += size; }
                Request::Realloc { id, size } => { bytes = bytes - live[&id] + size; live.insert(id, size); }
                Request::Free { id } => bytes -= live.remove(&id).unwrap(),
            }
            peak = peak.max(bytes);
        }
        let requests = Requests::numbered(ops.clone());
        prop_assert_eq!(requests.peak_live(), peak);
        let t = to_events(&requests, "model");
        let s = Summary::of(&t);
        prop_assert_eq!(s.peak_live_bytes, peak);
        prop_assert_eq!(s.live_at_end_bytes, bytes);
        prop_assert_eq!(s.live_at_end_blocks, live.len() as u64);
        prop_assert_eq!(s.unknown_pointers, 0);
    }
}

#[test]
fn exporting_to_rep_drops_what_it_cannot_say() {
    let ev = |op, ptr, size, ret| ev(0, op, ptr, size, ret);
    let t = Trace {
        events: vec![
            ev(Op::Malloc, 0, 10, 0x100),
            ev(Op::Free, 0, 0, 0),
            ev(Op::Malloc, 0, 1 << 40, 0),
            ev(Op::Free, 0x999, 0, 0),
            ev(Op::Realloc, 0x100, 20, 0x200),
            ev(Op::Free, 0x200, 0, 0),
        ],
        ..Trace::default()
    };
    let (requests, dropped) = from_events(&t);
    assert_eq!(
        requests.requests,
        [
            Request::Alloc {
                id: 0,
                size: 10,
                align: retype_trace::requests::MALLOC_ALIGN
            },
            Request::Realloc { id: 0, size: 20 },
            Request::Free { id: 0 },
        ]
    );
    assert_eq!(
        (dropped.free_null, dropped.failed, dropped.unknown_pointers),
        (1, 1, 1)
    );
}

#[test]
fn summary_of_a_small_trace() {
    let t = Trace {
        events: vec![
            ev(0, Op::Malloc, 0, 100, 0x10),
            ev(10, Op::Calloc, 0, 50, 0x20),
            ev(20, Op::Realloc, 0x10, 300, 0x10),
            ev(30, Op::Realloc, 0x20, 60, 0x80),
            ev(40, Op::Free, 0x10, 0, 0),
            ev(50, Op::Free, 0x80, 0, 0),
        ],
        ..Trace::default()
    };
    let s = Summary::of(&t);
    assert_eq!(s.peak_live_bytes, 360);
    assert_eq!(s.peak_event, 3);
    assert_eq!(s.peak_time_ns, 30);
    assert_eq!((s.reallocs_in_place, s.reallocs_moved), (1, 1));
    assert_eq!(s.lifetimes_ns.total(), 2);
    assert_eq!(s.bytes_requested, 510);
    assert_eq!(s.live_at_end_bytes, 0);
}

/// An event of the single thread 0 at `time_ns`.
fn ev(time_ns: u64, op: Op, ptr: u64, size: u64, ret: u64) -> Event {
    Event {
        time_ns,
        op,
        ptr,
        size,
        ret,
        ..Event::default()
    }
}
