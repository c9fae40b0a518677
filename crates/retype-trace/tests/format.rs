//! The binary format: round trips, and the reader on random, cut and
//! corrupted bytes (a cut trace reads up to its last whole record; anything
//! else malformed is an error naming an offset; nothing panics).

mod common;

use common::{event, num};
use proptest::prelude::*;
use retype_trace::codec::{self, get_varint, put_varint, unzigzag, zigzag};
use retype_trace::error::TraceErrorKind;
use retype_trace::{
    CutShort, Event, MapOp, Mapping, Module, Op, Reader, RssSample, Stack, ThreadSummary, Trace,
};

/// The bytes of `e` as the format spells them, one varint at a time with
/// `put_varint`: the reference for the encoder (which writes into a fixed room
/// with its own varint loop).
fn reference_event_bytes(e: &Event, prev_time: u64, prev_addr: u64) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let mut n = 1;
    buf[0] = e.op as u8
        | if e.stack != 0 { codec::STACK_FLAG } else { 0 }
        | if e.descheduled {
            codec::DESCHEDULED_FLAG
        } else {
            0
        };
    let mut put = |v: u64| put_varint(&mut buf, &mut n, v).unwrap();
    put(zigzag(e.time_ns.wrapping_sub(prev_time)));
    put(e.latency_ns);
    let mut addr = prev_addr;
    if e.op.has_ptr() {
        put(zigzag(e.ptr.wrapping_sub(addr)));
        addr = e.ptr;
    }
    if e.op.has_align() {
        put(e.align);
    }
    if e.op.allocates() {
        put(e.size);
        put(zigzag(e.ret.wrapping_sub(addr)));
    }
    if e.stack != 0 {
        put(u64::from(e.stack));
    }
    buf[..n].to_vec()
}

fn thread_summary() -> impl Strategy<Value = ThreadSummary> {
    (any::<u32>(), num(), num(), num(), num(), num(), num()).prop_map(
        |(thread, start_ns, end_ns, user_ns, system_ns, v, iv)| ThreadSummary {
            thread,
            start_ns,
            end_ns,
            user_ns,
            system_ns,
            voluntary_switches: v,
            involuntary_switches: iv,
        },
    )
}

fn module() -> impl Strategy<Value = Module> {
    (
        "[ -~]{0,20}",
        num(),
        num(),
        num(),
        prop::collection::vec(any::<u8>(), 0..24),
    )
        .prop_map(|(path, base, a, b, build_id)| Module {
            path,
            base,
            start: a.min(b),
            end: a.max(b),
            build_id,
            segment: 0,
        })
}

fn stack() -> impl Strategy<Value = Stack> {
    (prop::collection::vec(num(), 0..40), any::<bool>()).prop_map(|(frames, truncated)| Stack {
        frames,
        truncated,
        segment: 0,
    })
}

fn rss_sample() -> impl Strategy<Value = RssSample> {
    (num(), num()).prop_map(|(time_ns, rss_bytes)| RssSample {
        time_ns,
        rss_bytes,
        segment: 0,
    })
}

fn mapping() -> impl Strategy<Value = Mapping> {
    (
        (1u64..=4, any::<u32>(), num(), num(), num()),
        (num(), num(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |((op, thread, time_ns, addr, len), (old_addr, old_len, prot, flags))| Mapping {
                op: MapOp::from_code(op).unwrap(),
                thread,
                time_ns,
                addr,
                len,
                old_addr,
                old_len,
                prot,
                flags,
                stack: 0,
                segment: 0,
            },
        )
}

/// A trace as `Trace::read` gives it back: modules and stacks belong to
/// segments that have events, in segment order, and each event names no
/// stack or one of its own segment's.
fn trace() -> impl Strategy<Value = Trace> {
    (
        prop::collection::vec(("[a-z]{0,8}", "\\PC{0,12}"), 0..3),
        prop::collection::vec(
            (event(), any::<prop::sample::Index>(), any::<bool>()),
            0..200,
        ),
        prop::collection::vec(thread_summary(), 0..3),
        prop::collection::vec(1usize..200, 0..3),
        prop::collection::vec((module(), any::<prop::sample::Index>()), 0..4),
        prop::collection::vec((stack(), any::<prop::sample::Index>()), 0..6),
        prop::collection::vec((rss_sample(), any::<prop::sample::Index>()), 0..5),
        prop::collection::vec(
            (
                mapping(),
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
            ),
            0..5,
        ),
    )
        .prop_map(
            |(meta, events, threads, mut segments, modules, stacks, rss, mappings)| {
                // Segment starts lie strictly inside the events.
                segments.retain(|&s| s < events.len());
                segments.sort_unstable();
                segments.dedup();
                let count = if events.is_empty() {
                    0
                } else {
                    segments.len() + 1
                };
                let place = |i: &prop::sample::Index| i.index(count.max(1)) as u32;
                let mut modules: Vec<Module> = modules
                    .into_iter()
                    .filter(|_| count > 0)
                    .map(|(m, i)| Module {
                        segment: place(&i),
                        ..m
                    })
                    .collect();
                modules.sort_by_key(|m| m.segment);
                let mut stacks: Vec<Stack> = stacks
                    .into_iter()
                    .filter(|_| count > 0)
                    .map(|(s, i)| Stack {
                        segment: place(&i),
                        ..s
                    })
                    .collect();
                stacks.sort_by_key(|s| s.segment);
                let events = events
                    .into_iter()
                    .enumerate()
                    .map(|(k, (e, pick, with))| {
                        let segment = segments.iter().filter(|&&b| b <= k).count() as u32;
                        let own: Vec<u32> = (1..=stacks.len() as u32)
                            .filter(|&id| stacks[id as usize - 1].segment == segment)
                            .collect();
                        let stack = if with && !own.is_empty() {
                            own[pick.index(own.len())]
                        } else {
                            0
                        };
                        Event { stack, ..e }
                    })
                    .collect();
                let mut rss: Vec<RssSample> = rss
                    .into_iter()
                    .map(|(r, i)| RssSample {
                        segment: place(&i),
                        ..r
                    })
                    .collect();
                rss.sort_by_key(|r| r.segment);
                let mut mappings: Vec<Mapping> = mappings
                    .into_iter()
                    .map(|(m, i, pick)| {
                        let segment = place(&i);
                        let own: Vec<u32> = (1..=stacks.len() as u32)
                            .filter(|&id| stacks[id as usize - 1].segment == segment)
                            .collect();
                        let stack = if own.is_empty() {
                            0
                        } else {
                            own[pick.index(own.len())]
                        };
                        Mapping {
                            segment,
                            stack,
                            ..m
                        }
                    })
                    .collect();
                mappings.sort_by_key(|m| m.segment);
                Trace {
                    meta,
                    events,
                    threads,
                    segments,
                    modules,
                    stacks,
                    rss,
                    mappings,
                    cut_short: None,
                    counters: Vec::new(),
                    snapshots: Vec::new(),
                }
            },
        )
}

fn bytes_of(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    t.write(&mut out).unwrap();
    out
}

/// The records of a whole file as the format frames them (tag, then the
/// payload's length): each one's end offset, tag, and events.
fn framing(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut records = Vec::new();
    let mut at = codec::HEADER_LEN;
    while at < bytes.len() {
        let tag = bytes[at];
        let mut pos = at + 1;
        let len = get_varint(bytes, &mut pos).unwrap() as usize;
        let end = pos + len;
        let mut events = 0;
        if tag == codec::TAG_EVENTS {
            let thread = get_varint(bytes, &mut pos).unwrap() as u32;
            let mut delta = codec::DeltaState::new(get_varint(bytes, &mut pos).unwrap());
            while pos < end {
                delta.decode(&bytes[..end], &mut pos, thread).unwrap();
                events += 1;
            }
        }
        records.push((end, tag, events));
        at = end;
    }
    records
}

/// `t` (written as `bytes`) cut after `len` bytes reads as the records that
/// end by then: the events they hold, the segments they begin, and a
/// [`CutShort`] at the last one's end, unless that is an end record.
fn check_cut(t: &Trace, bytes: &[u8], len: usize) -> Result<(), TestCaseError> {
    let read = Trace::read(&bytes[..len]);
    if len < codec::HEADER_LEN {
        prop_assert!(read.is_err(), "a cut inside the header does not read");
        return Ok(());
    }
    let head = read.map_err(|e| TestCaseError::fail(format!("cut at {len}: {e}")))?;
    let whole: Vec<_> = framing(bytes)
        .into_iter()
        .take_while(|&(end, _, _)| end <= len)
        .collect();
    let events: usize = whole.iter().map(|&(_, _, n)| n).sum();
    let at_byte = whole.last().map_or(codec::HEADER_LEN, |&(end, _, _)| end);
    let after_end = whole
        .last()
        .is_some_and(|&(end, tag, _)| tag == codec::TAG_END && end == len);
    let cut = (!after_end).then_some(CutShort {
        at_byte: at_byte as u64,
        events: events as u64,
    });
    prop_assert_eq!(head.cut_short, cut, "cut at {}", len);
    prop_assert_eq!(&head.events[..], &t.events[..events], "cut at {}", len);
    let segments: Vec<usize> = t.segments.iter().copied().filter(|&s| s < events).collect();
    prop_assert_eq!(head.segments, segments, "cut at {}", len);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn events_encode_as_their_varints(
        events in prop::collection::vec((event(), prop_oneof![Just(0u32), any::<u32>()]), 1..20),
        base in num(),
    ) {
        let events: Vec<Event> = events.into_iter().map(|(e, stack)| Event { stack, ..e }).collect();
        let mut delta = codec::DeltaState::new(base);
        let (mut prev_time, mut prev_addr) = (base, 0u64);
        let mut buf = vec![0xAAu8; 64 * (events.len() + 1)];
        let mut pos = 0;
        let mut want = Vec::new();
        for e in &events {
            want.extend(reference_event_bytes(e, prev_time, prev_addr));
            prev_time = e.time_ns;
            if e.op.has_ptr() {
                prev_addr = e.ptr;
            }
            if e.op.allocates() {
                prev_addr = e.ret;
            }
            delta.encode(&mut buf, &mut pos, e).unwrap();
            prop_assert_eq!(&buf[..pos], &want[..]);
        }
    }

    #[test]
    fn varint_round_trip(v in any::<u64>()) {
        let mut buf = [0u8; codec::MAX_VARINT];
        let mut n = 0;
        put_varint(&mut buf, &mut n, v).unwrap();
        let mut m = 0;
        prop_assert_eq!(get_varint(&buf[..n], &mut m), Ok(v));
        prop_assert_eq!(m, n);
        prop_assert_eq!(unzigzag(zigzag(v)), v);
    }

    #[test]
    fn trace_round_trip(t in trace()) {
        let back = Trace::read(&bytes_of(&t)[..]).unwrap();
        prop_assert_eq!(back, t);
    }

    #[test]
    fn a_cut_trace_reads_its_whole_records(t in trace(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..16)) {
        let bytes = bytes_of(&t);
        for cut in cuts {
            check_cut(&t, &bytes, cut.index(bytes.len()))?;
        }
    }

    #[test]
    fn the_stream_reader_ends_a_cut_trace_with_an_error_within_it(t in trace(), cut in any::<prop::sample::Index>()) {
        let bytes = bytes_of(&t);
        let len = cut.index(bytes.len());
        if len < codec::HEADER_LEN {
            return Ok(());
        }
        let last = Reader::new(&bytes[..len]).unwrap().last().unwrap();
        match last {
            // A cut right after a segment's end record leaves whole segments.
            Ok(r) => prop_assert!(matches!(r, retype_trace::Record::End { .. }), "{:?}", r),
            Err(e) => {
                prop_assert!(matches!(e.kind, TraceErrorKind::Truncated { .. }), "{}", e);
                prop_assert_eq!(e.offset, len as u64);
                let named = format!("byte {len}");
                prop_assert!(e.to_string().contains(&named), "{}", e);
            }
        }
    }

    #[test]
    fn corrupted_bytes_never_panic(t in trace(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut bytes = bytes_of(&t);
        for (i, b) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= b | 1;
        }
        if let Err(e) = Trace::read(&bytes[..]) {
            prop_assert!(e.offset <= bytes.len() as u64);
        }
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(tail in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut bytes = codec::header().to_vec();
        bytes.extend_from_slice(&tail);
        let len = bytes.len() as u64;
        match Trace::read(&bytes[..]) {
            Ok(_) => {}
            Err(e) => prop_assert!(e.offset <= len),
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        prop_assert!(Trace::read(&bytes[..]).is_err() || bytes.starts_with(&codec::MAGIC));
    }
}

/// Values at the edges of every varint length (one to ten bytes), in every
/// field an event carries, encode as `put_varint` spells them: the
/// encoder's one store for values of up to four bytes, and its loop beyond.
#[test]
fn values_of_every_varint_length_encode_as_their_varints() {
    let edges = (0..64)
        .flat_map(|k| [(1u64 << k) - 1, 1 << k, (1 << k) + 1])
        .chain([u64::MAX]);
    for v in edges {
        for (op, base) in [(Op::Realloc, 0), (Op::PosixMemalign, v / 2)] {
            let e = Event {
                op,
                time_ns: v,
                latency_ns: v,
                ptr: if op.has_ptr() { v } else { 0 },
                align: if op.has_align() { v } else { 0 },
                size: v,
                ret: v.rotate_left(17),
                stack: (v as u32).max(1),
                ..Event::default()
            };
            let mut buf = [0xAAu8; 64];
            let mut pos = 0;
            codec::DeltaState::new(base)
                .encode(&mut buf, &mut pos, &e)
                .unwrap();
            assert_eq!(buf[..pos], reference_event_bytes(&e, base, 0), "{v:#x}");
        }
    }
}

#[test]
fn the_stream_reader_yields_records_in_order() {
    let t = Trace {
        meta: vec![("pid".into(), "7".into())],
        events: vec![
            Event {
                op: Op::Malloc,
                thread: 1,
                time_ns: 10,
                size: 8,
                ret: 0x1000,
                ..Event::default()
            },
            Event {
                op: Op::Free,
                thread: 2,
                time_ns: 11,
                ptr: 0x1000,
                ..Event::default()
            },
        ],
        threads: vec![ThreadSummary {
            thread: 1,
            ..ThreadSummary::default()
        }],
        ..Trace::default()
    };
    let records: Vec<_> = Reader::new(&bytes_of(&t)[..])
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(records.len(), 5);
    assert!(matches!(
        records[4],
        retype_trace::Record::End { events: 2 }
    ));
}

#[test]
fn errors_name_the_offset_and_the_cause() {
    let t = Trace {
        events: vec![
            Event {
                op: Op::Malloc,
                size: 300,
                ret: 0x10,
                ..Event::default()
            };
            3
        ],
        ..Trace::default()
    };
    let bytes = bytes_of(&t);
    // Cut inside the events record: the stream's error points at the file's
    // end, and the trace reads as what came before the record.
    let e = Reader::new(&bytes[..20])
        .unwrap()
        .last()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.offset, 20);
    assert!(e.to_string().contains("file ends inside a record"), "{e}");
    let head = Trace::read(&bytes[..20]).unwrap();
    let at_events = codec::HEADER_LEN as u64;
    assert_eq!(
        head.cut_short,
        Some(CutShort {
            at_byte: at_events,
            events: 0
        })
    );
    assert!(head.events.is_empty());
    // Without the end record: every event reads.
    let end_len = 3;
    let without_end = &bytes[..bytes.len() - end_len];
    let e = Reader::new(without_end)
        .unwrap()
        .last()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.offset, without_end.len() as u64);
    assert!(e.to_string().contains("before the end record"), "{e}");
    let head = Trace::read(without_end).unwrap();
    assert_eq!(head.events, t.events);
    assert_eq!(
        head.cut_short,
        Some(CutShort {
            at_byte: without_end.len() as u64,
            events: 3
        })
    );
    // A bad op code in the first event (header 12, tag, len, thread, base).
    let mut bad = bytes.clone();
    bad[codec::HEADER_LEN + 4] = 77;
    let e = Trace::read(&bad[..]).unwrap_err();
    assert_eq!(e.offset, codec::HEADER_LEN as u64 + 4);
    assert!(e.to_string().contains("unknown op code 77"), "{e}");
    // Wrong magic.
    let e = Trace::read(&b"Alloc(5),\n"[..]).unwrap_err();
    assert_eq!(e.offset, 0);
    assert!(e.to_string().contains("not a retype trace"), "{e}");
}

/// Two segments (the second after an exec) with modules, stacks, several
/// threads' events records and thread summaries, cut at every byte.
#[test]
fn a_trace_cut_at_every_byte_reads_its_whole_records() {
    // Even events allocate a block, odd ones free it.
    let event = |thread, i: u64, stack| {
        Event {
            op: [Op::Malloc, Op::Free][i as usize % 2],
            thread,
            time_ns: 1_000 + 10 * i,
            latency_ns: 5,
            size: 24 + i,
            ptr: 0x1000 + 16 * (i - i % 2),
            ret: 0x1000 + 16 * i,
            stack,
            ..Event::default()
        }
        .canonical()
    };
    let stack = |frames: Vec<u64>, segment| Stack {
        frames,
        truncated: false,
        segment,
    };
    let t = Trace {
        meta: vec![("pid".into(), "7".into()), ("cmdline".into(), "a b".into())],
        // Threads 1 and 2 by tens; every third event names its segment's stack.
        events: (0..40)
            .map(|i| {
                let stack = if i % 3 == 0 { 1 + (i / 20) as u32 } else { 0 };
                event(1 + (i / 10) as u32 % 2, i, stack)
            })
            .collect(),
        threads: vec![ThreadSummary {
            thread: 1,
            end_ns: 9,
            ..ThreadSummary::default()
        }],
        segments: vec![20],
        modules: vec![Module {
            path: "/bin/x".into(),
            start: 0x1000,
            end: 0x2000,
            ..Module::default()
        }],
        stacks: vec![stack(vec![0x1010, 0x1020], 0), stack(vec![0x1030], 1)],
        ..Trace::default()
    };
    let bytes = bytes_of(&t);
    assert_eq!(Trace::read(&bytes[..]).unwrap(), t);
    for len in 0..bytes.len() {
        check_cut(&t, &bytes, len).unwrap();
    }
}

/// A record that breaks the format stays an error, even with a whole trace
/// after it (only a file's end makes a cut).
#[test]
fn a_corrupt_record_before_the_end_is_an_error() {
    let t = Trace {
        meta: vec![("k".into(), "v".into())],
        events: vec![
            Event {
                op: Op::Free,
                ptr: 16,
                ..Event::default()
            };
            4
        ],
        ..Trace::default()
    };
    let mut bytes = bytes_of(&t);
    // The meta record's tag becomes an unknown one.
    bytes[codec::HEADER_LEN] = 99;
    let e = Trace::read(&bytes[..]).unwrap_err();
    assert_eq!(e.offset, codec::HEADER_LEN as u64);
    assert!(e.to_string().contains("unknown record tag 99"), "{e}");
}

#[test]
fn an_end_record_with_the_wrong_count_is_corrupt() {
    let t = Trace {
        events: vec![Event {
            op: Op::Free,
            ptr: 16,
            ..Event::default()
        }],
        ..Trace::default()
    };
    let mut bytes = bytes_of(&t);
    let n = bytes.len();
    assert_eq!(bytes[n - 1], 1, "end record counts 1 event");
    bytes[n - 1] = 2;
    let e = Trace::read(&bytes[..]).unwrap_err();
    assert_eq!(e.offset, n as u64 - 3);
    assert!(
        e.to_string()
            .contains("counts 2 events but its segment holds 1"),
        "{e}"
    );
}

#[test]
fn segments_follow_each_other() {
    let a = Trace {
        events: vec![Event {
            op: Op::Free,
            ptr: 16,
            ..Event::default()
        }],
        ..Trace::default()
    };
    let b = Trace {
        events: vec![
            Event {
                op: Op::Malloc,
                size: 1,
                ret: 32,
                ..Event::default()
            };
            2
        ],
        ..Trace::default()
    };
    let mut bytes = bytes_of(&a);
    bytes.extend_from_slice(&bytes_of(&b)[codec::HEADER_LEN..]);
    let t = Trace::read(&bytes[..]).unwrap();
    assert_eq!(t.events.len(), 3);
}

/// The worked example of docs/trace-format.md, byte for byte.
#[test]
fn the_documented_example_encodes_as_documented() {
    let t = Trace {
        events: vec![
            Event {
                op: Op::Malloc,
                thread: 7,
                time_ns: 1000,
                latency_ns: 80,
                size: 24,
                ret: 0x5000,
                ..Event::default()
            },
            Event {
                op: Op::Free,
                thread: 7,
                time_ns: 1130,
                latency_ns: 40,
                ptr: 0x5000,
                ..Event::default()
            },
        ],
        ..Trace::default()
    };
    let mut want = b"\x89RTR\r\n\x1a\n\x04\x00\x00\x00".to_vec();
    want.extend([0x02, 0x0F, 0x07, 0xE8, 0x07]);
    want.extend([0x01, 0x00, 0x50, 0x18, 0x80, 0xC0, 0x02]);
    want.extend([0x04, 0x84, 0x02, 0x28, 0x00]);
    want.extend([0x04, 0x01, 0x02]);
    assert_eq!(bytes_of(&t), want);
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

/// `sites-v1.rtr` was recorded by the recorder of format 1, before call stacks
/// (`crates/retype-recorder/tests/c/sites.c`).
#[test]
fn a_trace_of_format_1_still_reads() {
    let bytes = data("sites-v1.rtr");
    assert_eq!(&bytes[8..10], &[1, 0], "the fixture is of format 1");
    assert_eq!(Reader::new(&bytes[..]).unwrap().version(), 1);
    let t = Trace::read(&bytes[..]).unwrap();
    let count = |op| t.events.iter().filter(|e| e.op == op).count();
    assert_eq!(
        [count(Op::Malloc), count(Op::Calloc), count(Op::Free)],
        [105, 10, 109]
    );
    assert_eq!(t.events.len(), 224);
    assert!(t.events.iter().all(|e| e.stack == 0 && e.latency_ns > 0));
    assert!(t.stacks.is_empty() && t.modules.is_empty());
    assert_eq!(t.threads.len(), 1);
    assert_eq!(t.meta_value("cmdline"), Some("./sites"));
    // Written again, it is a trace of the current format with the same content.
    let again = Trace::read(&bytes_of(&t)[..]).unwrap();
    assert_eq!(again, t);
    assert_eq!(&bytes_of(&t)[8..10], &codec::VERSION.to_le_bytes());
}

#[test]
fn formats_before_3_have_no_descheduled_flag() {
    for version in [1, 2] {
        let mut bytes = codec::header().to_vec();
        bytes[8] = version;
        // A malloc with the descheduled flag, then an end record.
        bytes.extend([2, 7, 0, 0, 0x41, 0, 1, 8, 0x40, 4, 1, 1]);
        let e = Trace::read(&bytes[..]).unwrap_err();
        assert!(e.to_string().contains("unknown op code 65"), "{e}");
    }
    // The same bytes in format 3: a malloc whose thread was descheduled.
    let mut bytes = codec::header().to_vec();
    bytes.extend([2, 7, 0, 0, 0x41, 0, 1, 8, 0x40, 4, 1, 1]);
    let t = Trace::read(&bytes[..]).unwrap();
    assert_eq!(t.events.len(), 1);
    assert!(t.events[0].descheduled && t.events[0].op == Op::Malloc);
}

#[test]
fn format_1_has_no_stacks_or_modules() {
    let mut v1 = codec::header().to_vec();
    v1[8] = 1;
    // A malloc with the stack flag, then an end record.
    let mut flagged = v1.clone();
    flagged.extend([2, 8, 0, 0, 0x81, 0, 1, 8, 0x40, 1, 4, 1, 1]);
    let e = Trace::read(&flagged[..]).unwrap_err();
    assert!(e.to_string().contains("unknown op code 129"), "{e}");
    let mut module = v1;
    module.extend([5, 4, 0, 0, 0, 0]);
    let e = Trace::read(&module[..]).unwrap_err();
    assert!(e.to_string().contains("unknown record tag 5"), "{e}");
}

/// The bytes of one segment of format 2 with stack records `stacks` (id, frames)
/// and one malloc naming stack `named`.
fn one_malloc_naming(stacks: &[(u32, &[u64])], named: u32) -> Vec<u8> {
    let mut out = codec::header().to_vec();
    for &(id, frames) in stacks {
        let mut buf = [0u8; 256];
        let at = codec::stack_record(&mut buf, id, frames, false).unwrap();
        out.extend(&buf[at]);
    }
    let e = Event {
        op: Op::Malloc,
        size: 8,
        ret: 0x20,
        stack: named,
        ..Event::default()
    };
    let mut buf = [0u8; 128];
    let mut pos = codec::MAX_EVENTS_HEADER;
    codec::DeltaState::new(0)
        .encode(&mut buf, &mut pos, &e)
        .unwrap();
    let len = pos - codec::MAX_EVENTS_HEADER;
    let start = codec::header_before(
        &mut buf,
        codec::MAX_EVENTS_HEADER,
        codec::TAG_EVENTS,
        &[0, 0],
        len,
    )
    .unwrap();
    out.extend(&buf[start..pos]);
    out.extend([codec::TAG_END, 1, 1]);
    out
}

#[test]
fn stack_ids_become_indexes_and_unknown_ones_none() {
    let t = Trace::read(&one_malloc_naming(&[(7, &[0x1000, 0x2000]), (3, &[5])], 3)[..]).unwrap();
    assert_eq!(t.stacks.len(), 2);
    assert_eq!(t.stack_of(&t.events[0]).unwrap().frames, vec![5]);
    // A stack whose record was lost: the event reads with none.
    let t = Trace::read(&one_malloc_naming(&[(7, &[0x1000])], 9)[..]).unwrap();
    assert_eq!(t.events[0].stack, 0);
    assert!(t.stack_of(&t.events[0]).is_none());
}

#[test]
fn a_stack_id_defined_twice_is_corrupt() {
    let e = Trace::read(&one_malloc_naming(&[(4, &[1]), (4, &[2])], 4)[..]).unwrap_err();
    assert!(e.to_string().contains("stack id 4 defined twice"), "{e}");
}

/// A coarse clock can read the same value at a malloc's end and at the next
/// free's start, and the malloc's latency is rounded up: serialized, the
/// thread's free still comes after its malloc (and another thread's call
/// still goes by time).
#[test]
fn a_threads_calls_keep_their_order_under_a_coarse_clock() {
    let ev = |op, thread, time_ns, latency_ns, ptr, ret| Event {
        op,
        thread,
        time_ns,
        latency_ns,
        size: if op == Op::Free { 0 } else { 64 },
        ptr,
        ret,
        ..Event::default()
    };
    let t = Trace {
        events: vec![
            ev(Op::Malloc, 1, 147, 11, 0, 0x40),
            ev(Op::Free, 1, 157, 11, 0x40, 0),
            ev(Op::Malloc, 2, 150, 5, 0, 0x80),
        ],
        ..Trace::default()
    };
    let order: Vec<(u32, Op)> = t.serialized().iter().map(|e| (e.thread, e.op)).collect();
    assert_eq!(order, [(2, Op::Malloc), (1, Op::Malloc), (1, Op::Free)]);
}
