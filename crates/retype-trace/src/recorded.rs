//! Recorded windows: the stretches of a run that a trace recorded, when
//! recording was started and stopped while the program ran (`retype record
//! --paused`, the toggle signal, `--control`, `--pid` and its `--stop`). The
//! recorder writes each as two meta records, `window_start` and
//! `window_stop`, whose values are `NS REASON` (docs/trace-format.md). A
//! trace without them recorded its whole run.
//!
//! A window is not a segment: the heap lives on while nothing is recorded, so
//! a block allocated outside every window and freed inside one is a free of a
//! pointer the trace never returned (counted apart, as
//! [`Summary::unknown_pointers`](crate::summary::Summary::unknown_pointers)),
//! and a block allocated inside may be freed unseen.

use crate::trace::Trace;

/// One recorded stretch of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedWindow {
    /// When recording started, in ns on the events' clock.
    pub start_ns: u64,
    /// When it stopped; `None` if the trace ends inside the window (a
    /// process killed, a file cut short).
    pub stop_ns: Option<u64>,
    /// What started it: `start`, `fork`, `exec`, `signal`, `control`, `attach`.
    pub opened_by: String,
    /// What stopped it: `exit`, `exec`, `signal`, `control`, `detach`.
    pub closed_by: Option<String>,
    /// The events whose call began inside it.
    pub events: u64,
}

impl RecordedWindow {
    /// Whether time `t` (ns on the events' clock) falls inside the window.
    pub fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && self.stop_ns.is_none_or(|s| t <= s)
    }
}

/// The windows of `trace`, in time order; empty if recording was not controlled.
pub fn windows(trace: &Trace) -> Vec<RecordedWindow> {
    let parse = |v: &str| {
        let (at, why) = v.split_once(' ').unwrap_or((v, ""));
        Some((at.parse::<u64>().ok()?, why.to_string()))
    };
    let mut out: Vec<RecordedWindow> = Vec::new();
    for (k, v) in &trace.meta {
        match (k.as_str(), parse(v)) {
            ("window_start", Some((at, why))) => out.push(RecordedWindow {
                start_ns: at,
                stop_ns: None,
                opened_by: why,
                closed_by: None,
                events: 0,
            }),
            ("window_stop", Some((at, why))) => {
                if let Some(w) = out.last_mut().filter(|w| w.stop_ns.is_none()) {
                    w.stop_ns = Some(at);
                    w.closed_by = Some(why);
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|w| w.start_ns);
    for e in &trace.events {
        if let Some(w) = out.iter_mut().find(|w| w.contains(e.time_ns)) {
            w.events += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    fn trace(meta: &[(&str, &str)], times: &[u64]) -> Trace {
        Trace {
            meta: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            events: times
                .iter()
                .map(|&t| Event {
                    time_ns: t,
                    ..Event::default()
                })
                .collect(),
            ..Trace::default()
        }
    }

    #[test]
    fn a_trace_without_window_records_has_none() {
        assert!(windows(&trace(&[("pid", "1"), ("start_ns", "5")], &[6, 7])).is_empty());
    }

    #[test]
    fn windows_pair_their_records_and_count_their_events() {
        let t = trace(
            &[
                ("pid", "1"),
                ("window_start", "100 start"),
                ("window_stop", "200 signal"),
                ("window_start", "300 control"),
                ("window_stop", "400 detach"),
                ("window_start", "500 signal"),
            ],
            &[150, 200, 350, 600, 700],
        );
        let w = windows(&t);
        assert_eq!(w.len(), 3);
        assert_eq!(
            (w[0].start_ns, w[0].stop_ns, w[0].events),
            (100, Some(200), 2)
        );
        assert_eq!(
            (w[0].opened_by.as_str(), w[0].closed_by.as_deref()),
            ("start", Some("signal"))
        );
        assert_eq!(
            (w[1].start_ns, w[1].stop_ns, w[1].events),
            (300, Some(400), 1)
        );
        assert_eq!(w[1].closed_by.as_deref(), Some("detach"));
        // The last one is open: the trace ended inside it.
        assert_eq!(
            (w[2].stop_ns, w[2].closed_by.as_deref(), w[2].events),
            (None, None, 2)
        );
    }

    #[test]
    fn malformed_and_unpaired_records_are_skipped() {
        let t = trace(
            &[
                ("window_stop", "50 exit"),
                ("window_start", "x start"),
                ("window_start", "100"),
                ("window_stop", "150 exit"),
                ("window_stop", "160 exit"),
            ],
            &[120],
        );
        let w = windows(&t);
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].start_ns, w[0].stop_ns, w[0].opened_by.as_str()),
            (100, Some(150), "")
        );
        assert_eq!(w[0].events, 1);
    }
}
