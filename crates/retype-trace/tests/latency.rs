//! The summary's latency figures when a full recording measured only a
//! sample of the calls (latency 0: not measured), against a direct count.

use proptest::prelude::*;
use retype_trace::summary::Summary;
use retype_trace::{Event, Op, Trace};

/// Mallocs of distinct blocks with these latencies, a thread's calls in order.
fn trace(latencies: &[u64]) -> Trace {
    let events = latencies
        .iter()
        .enumerate()
        .map(|(i, &latency_ns)| Event {
            op: Op::Malloc,
            time_ns: 100 * i as u64,
            latency_ns,
            size: 16,
            ret: 0x1000 + 0x10 * i as u64,
            ..Event::default()
        })
        .collect();
    Trace {
        events,
        ..Trace::default()
    }
}

proptest! {
    /// Only measured calls count: the histogram holds them, the longest is
    /// theirs, and the time inside the allocator is their sum over all
    /// calls when all were measured.
    #[test]
    fn unmeasured_calls_are_left_out_of_every_latency_figure(
        latencies in prop::collection::vec(prop_oneof![Just(0u64), 1u64..1_000_000], 1..200),
    ) {
        let s = Summary::of(&trace(&latencies));
        let measured: Vec<u64> = latencies.iter().copied().filter(|&l| l > 0).collect();
        prop_assert_eq!(s.latency_measured, measured.len() as u64);
        prop_assert_eq!(s.latencies_ns.total(), measured.len() as u64);
        prop_assert_eq!(s.latency_max_ns, measured.iter().copied().max().unwrap_or(0));
        prop_assert_eq!(s.latency_max_running_ns, s.latency_max_ns);
        if measured.len() == latencies.len() {
            prop_assert_eq!(s.latency_total_ns, latencies.iter().sum::<u64>());
        }
        if measured.is_empty() {
            prop_assert_eq!(s.latency_total_ns, 0);
        }
    }

    /// Where every call takes the same time, any sample of them gives the
    /// exact time inside the allocator: the estimate scales the sample's
    /// mean to all the calls.
    #[test]
    fn a_sample_of_equal_calls_estimates_their_total_exactly(
        latency in 1u64..100_000,
        picked in prop::collection::vec(any::<bool>(), 1..300),
    ) {
        prop_assume!(picked.iter().any(|&p| p));
        let latencies: Vec<u64> = picked.iter().map(|&p| if p { latency } else { 0 }).collect();
        let s = Summary::of(&trace(&latencies));
        prop_assert_eq!(s.latency_total_ns, latency * picked.len() as u64);
    }
}
