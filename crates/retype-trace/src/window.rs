//! A time window of a trace (`--from`/`--to`): the part of a recording an
//! analysis looks at.
//!
//! Times are on the trace's clock, counted from its first event (as `retype
//! trace info` counts the peak's time): `1.5s`, `200ms`, `40us`, `7ns`, or a
//! bare number of seconds. `seg:N` names segment N (from 0): as `--from` its
//! first event, as `--to` its last, so `--from seg:1 --to seg:1` is segment 1.

use std::fmt;

use crate::trace::Trace;

/// One end of a window, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// ns after the trace's first event.
    At(u64),
    /// A segment, from 0.
    Segment(usize),
}

impl Bound {
    /// Reads `1.5s`, `200ms`, `40us`, `7ns`, `3` (seconds) or `seg:N`.
    pub fn parse(text: &str) -> Result<Bound, String> {
        let t = text.trim();
        if let Some(n) = t.strip_prefix("seg:") {
            return n
                .parse()
                .map(Bound::Segment)
                .map_err(|_| format!("{text:?}: seg: takes a segment number, as seg:0"));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let scale = match unit.trim() {
            "" | "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => {
                return Err(format!(
                    "{text:?}: a time is a number with s, ms, us or ns, or seg:N"
                ))
            }
        };
        let v: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: a time is a number with s, ms, us or ns, or seg:N"))?;
        Ok(Bound::At((v * scale).round() as u64))
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::At(ns) => write!(f, "{}s", *ns as f64 / 1e9),
            Bound::Segment(n) => write!(f, "seg:{n}"),
        }
    }
}

/// The events an analysis counts: those whose call started in
/// `[from_ns, to_ns)`, absolute times on the trace's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Window {
    /// The whole trace.
    pub const ALL: Window = Window {
        from_ns: 0,
        to_ns: u64::MAX,
    };

    /// The window `from`..`to` of `trace` (either end open when left out);
    /// an error names a segment the trace does not have, or a window that
    /// ends before it starts.
    pub fn of(trace: &Trace, from: Option<Bound>, to: Option<Bound>) -> Result<Window, String> {
        let first = trace.events.iter().map(|e| e.time_ns).min().unwrap_or(0);
        let spans = segment_spans(trace);
        let segment = |n: usize| {
            spans.get(n).copied().ok_or_else(|| {
                format!(
                    "seg:{n}: the trace has {} segments with events (seg:0 to seg:{})",
                    spans.len(),
                    spans.len().saturating_sub(1)
                )
            })
        };
        let from_ns = match from {
            None => 0,
            Some(Bound::At(ns)) => first.saturating_add(ns),
            Some(Bound::Segment(n)) => segment(n)?.0,
        };
        let to_ns = match to {
            None => u64::MAX,
            Some(Bound::At(ns)) => first.saturating_add(ns),
            Some(Bound::Segment(n)) => segment(n)?.1.saturating_add(1),
        };
        if to_ns <= from_ns {
            let (f, t) = (
                from.map_or("the start".into(), |b| b.to_string()),
                to.map_or("the end".into(), |b| b.to_string()),
            );
            return Err(format!(
                "the window from {f} to {t} is empty: --to must come after --from"
            ));
        }
        Ok(Window { from_ns, to_ns })
    }

    pub fn contains(&self, time_ns: u64) -> bool {
        (self.from_ns..self.to_ns).contains(&time_ns)
    }

    pub fn is_all(&self) -> bool {
        *self == Window::ALL
    }
}

/// Each segment's first and last event time, in order (segments without
/// events left out, as [`Trace::serialized_segments`] leaves them out).
pub fn segment_spans(trace: &Trace) -> Vec<(u64, u64)> {
    trace
        .serialized_segments()
        .iter()
        .map(|s| {
            let times = s.iter().map(|e| e.time_ns);
            (times.clone().min().unwrap_or(0), times.max().unwrap_or(0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_read_as_written() {
        assert_eq!(Bound::parse("1.5s"), Ok(Bound::At(1_500_000_000)));
        assert_eq!(Bound::parse("200ms"), Ok(Bound::At(200_000_000)));
        assert_eq!(Bound::parse("40us"), Ok(Bound::At(40_000)));
        assert_eq!(Bound::parse("7ns"), Ok(Bound::At(7)));
        assert_eq!(Bound::parse("2"), Ok(Bound::At(2_000_000_000)));
        assert_eq!(Bound::parse("seg:3"), Ok(Bound::Segment(3)));
        for bad in ["", "ms", "1.5 h", "seg:", "seg:-1", "-1s", "1..2s"] {
            assert!(Bound::parse(bad).is_err(), "{bad:?}");
        }
    }
}
