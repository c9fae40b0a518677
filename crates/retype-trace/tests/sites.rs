//! Per-stack figures (`retype_trace::sites`) against the trace's summary and
//! a direct count, on random traces whose frees and reallocs name blocks
//! that are live (and sometimes not).

use proptest::prelude::*;
use retype_trace::sites::{per_stack, SiteStats};
use retype_trace::summary::Summary;
use retype_trace::timeline::timeline;
use retype_trace::window::Window;
use retype_trace::{Event, Op, Stack, Trace};

/// A trace over a few addresses and stacks, in one to three segments.
fn trace() -> impl Strategy<Value = Trace> {
    let step = (0u8..6, 1u64..8, 0u64..5000, 0u32..4, 0u64..8);
    (
        prop::collection::vec(step, 0..300),
        prop::collection::vec(1usize..300, 0..2),
    )
        .prop_map(|(steps, mut segments)| {
            let events: Vec<Event> = steps
                .into_iter()
                .enumerate()
                .map(|(i, (kind, slot, size, stack, other))| {
                    let addr = slot * 0x100;
                    let base = Event {
                        time_ns: i as u64,
                        stack,
                        ..Event::default()
                    };
                    match kind {
                        0 => Event {
                            op: Op::Malloc,
                            size,
                            ret: addr,
                            ..base
                        },
                        1 => Event {
                            op: Op::Calloc,
                            size,
                            ret: if size % 7 == 0 { 0 } else { addr },
                            ..base
                        },
                        2 => Event {
                            op: Op::Realloc,
                            ptr: addr,
                            size,
                            ret: other * 0x100,
                            ..base
                        },
                        3 => Event {
                            op: Op::Realloc,
                            ptr: addr,
                            size: 0,
                            ret: 0,
                            ..base
                        },
                        _ => Event {
                            op: Op::Free,
                            ptr: addr,
                            ..base
                        },
                    }
                })
                .collect();
            segments.retain(|&s| s < events.len());
            segments.sort_unstable();
            segments.dedup();
            Trace {
                events,
                segments,
                stacks: vec![Stack::default(); 3],
                ..Trace::default()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn stacks_add_up_to_the_summary(t in trace()) {
        let per = per_stack(&t, Window::ALL);
        prop_assert_eq!(per.len(), t.stacks.len() + 1);
        let mut total = SiteStats::default();
        per.iter().for_each(|s| total.add(s));
        let s = Summary::of(&t);
        prop_assert_eq!(total.peak_bytes, s.peak_live_bytes);
        prop_assert_eq!(total.peak_blocks, s.peak_live_blocks);
        prop_assert_eq!(total.leaked_bytes, s.live_at_end_bytes);
        prop_assert_eq!(total.leaked_blocks, s.live_at_end_blocks);
        prop_assert_eq!(total.failed, s.failed_allocations);
    }

    #[test]
    fn temporaries_add_up_to_the_summarys(t in trace()) {
        let total: u64 = per_stack(&t, Window::ALL).iter().map(|s| s.temporary).sum();
        prop_assert_eq!(total, Summary::of(&t).temporary_allocations);
    }

    /// Two windows that split the trace at `cut` share its calls, bytes,
    /// failures and temporaries; the first's leaks are the blocks it left
    /// live at the cut, the second's the trace's leaks born after it.
    #[test]
    fn windows_split_a_trace(t in trace(), cut in 0u64..300) {
        let all = per_stack(&t, Window::ALL);
        let early = per_stack(&t, Window { from_ns: 0, to_ns: cut });
        let late = per_stack(&t, Window { from_ns: cut, to_ns: u64::MAX });
        for k in 0..all.len() {
            let (a, e, l) = (&all[k], &early[k], &late[k]);
            prop_assert_eq!(a.calls, e.calls + l.calls);
            prop_assert_eq!(a.bytes, e.bytes + l.bytes);
            prop_assert_eq!(a.failed, e.failed + l.failed);
            prop_assert_eq!(a.temporary, e.temporary + l.temporary);
        }
        let sum = |v: &[SiteStats], f: fn(&SiteStats) -> u64| v.iter().map(f).sum::<u64>();
        // The later window reaches the exit: its leaks are some of the
        // exit's; every leak at exit was live at the cut or born after it.
        let leaked = |v: &[SiteStats]| sum(v, |s| s.leaked_blocks);
        prop_assert!(leaked(&late) <= leaked(&all));
        prop_assert!(leaked(&all) <= leaked(&early) + leaked(&late));
        // The highest moment of a window is no higher than the trace's.
        prop_assert!(sum(&early, |s| s.peak_bytes) <= sum(&all, |s| s.peak_bytes));
        prop_assert!(sum(&late, |s| s.peak_bytes) <= sum(&all, |s| s.peak_bytes));
        prop_assert_eq!(
            sum(&early, |s| s.peak_bytes).max(sum(&late, |s| s.peak_bytes)),
            sum(&all, |s| s.peak_bytes)
        );
    }

    /// Every point's groups add up to the process, the highest point is the
    /// summary's peak, the last the bytes live at exit, and no stack's share
    /// of the peak exceeds its own highest.
    #[test]
    fn the_timeline_keeps_the_peak_and_the_end(t in trace(), spans in 1usize..20) {
        let group: Vec<usize> = (0..=t.stacks.len()).collect();
        let tl = timeline(&t, Window::ALL, spans, &group, group.len());
        let s = Summary::of(&t);
        for p in &tl.points {
            prop_assert_eq!(p.groups.iter().sum::<u64>(), p.live_bytes);
        }
        prop_assert!(tl.points.len() <= 2 * spans);
        prop_assert!(tl.points.windows(2).all(|w| w[0].time_ns <= w[1].time_ns && w[0].event < w[1].event));
        let top = tl.points.iter().map(|p| p.live_bytes).max().unwrap_or(0);
        prop_assert_eq!(top, s.peak_live_bytes);
        let end = tl.points.last().map_or(0, |p| p.live_bytes);
        prop_assert_eq!(end, s.live_at_end_bytes);
        for (k, st) in per_stack(&t, Window::ALL).iter().enumerate() {
            prop_assert!(st.peak_bytes <= tl.group_peaks[k]);
        }
    }

    #[test]
    fn calls_and_bytes_are_each_stacks_successful_allocations(t in trace()) {
        let per = per_stack(&t, Window::ALL);
        for (k, site) in per.iter().enumerate() {
            let mine = t.events.iter().filter(|e| e.stack as usize == k && e.op.allocates() && e.ret != 0);
            prop_assert_eq!(site.calls, mine.clone().count() as u64);
            prop_assert_eq!(site.bytes, mine.map(|e| e.size).sum::<u64>());
        }
    }
}

/// The peak is a moment, not each stack's own maximum: a stack whose blocks
/// were freed before the peak has none there.
#[test]
fn the_peak_is_one_moment_for_every_stack() {
    let ev = |op, ptr, size, ret, stack, time_ns| Event {
        op,
        ptr,
        size,
        ret,
        stack,
        time_ns,
        ..Event::default()
    };
    let t = Trace {
        events: vec![
            ev(Op::Malloc, 0, 100, 0x10, 1, 0),
            ev(Op::Free, 0x10, 0, 0, 1, 1),
            ev(Op::Malloc, 0, 60, 0x20, 2, 2),
            ev(Op::Malloc, 0, 50, 0x30, 3, 3),
            ev(Op::Free, 0x30, 0, 0, 3, 4),
        ],
        stacks: vec![Stack::default(); 3],
        ..Trace::default()
    };
    let per = per_stack(&t, Window::ALL);
    assert_eq!(
        per[1].peak_bytes, 0,
        "stack 1's 100 bytes were freed before the peak of 110"
    );
    assert_eq!((per[2].peak_bytes, per[3].peak_bytes), (60, 50));
    assert_eq!((per[2].leaked_bytes, per[2].leaked_blocks), (60, 1));
    assert_eq!(per[1].calls + per[2].calls + per[3].calls, 3);
}
