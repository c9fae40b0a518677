//! Live heap bytes over time, for the whole process and per group of stacks
//! (a site: what `retype trace timeline` draws and the massif export
//! snapshots).
//!
//! The window is cut into equal spans of time. Of each span the timeline
//! keeps two moments: the one with the most live bytes (so no peak falls
//! between points) and the last (so a drop shows even when the span also
//! rose), each with every group's live bytes at that moment; they add up to
//! the process's. Blocks follow the [`heap`](crate::heap) model (a sampled
//! recording's live bytes are estimates). An aggregate recording has no
//! events: its timeline is its snapshots.
//!
//! Beside the heap, two series of the whole process: its RSS samples and the
//! bytes it mapped itself ([`mapped`](crate::mapped)), every value in the window.

use crate::event::Event;
use crate::heap::Heap;
use crate::kind::Kind;
use crate::mapped::{Mapped, DEFAULT_PAGE_SIZE};
use crate::trace::Trace;
use crate::window::Window;

/// A quantity over time: `(ns after the trace's first event, bytes)` in time order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series(pub Vec<(u64, u64)>);

impl Series {
    /// The value in force at `time_ns`: the last one at or before it.
    pub fn at(&self, time_ns: u64) -> Option<u64> {
        let after = self.0.partition_point(|&(t, _)| t <= time_ns);
        after.checked_sub(1).map(|i| self.0[i].1)
    }
}

/// One moment of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// ns after the trace's first event.
    pub time_ns: u64,
    /// The index (in time order, all segments) of the event after which it was taken.
    pub event: u64,
    /// Bytes live in the whole process.
    pub live_bytes: u64,
    /// Bytes live per group.
    pub groups: Vec<u64>,
}

/// The moments and each group's highest live bytes in the window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    pub points: Vec<Point>,
    /// Each group's own maximum of live bytes over the window (not its share
    /// at the process's peak).
    pub group_peaks: Vec<u64>,
    /// The process's RSS samples in the window.
    pub rss: Series,
    /// The bytes the program mapped itself, after each of its mapping calls
    /// in the window (led by the level before the first, if not 0).
    pub mapped: Series,
}

/// The timeline of `trace` in `window`, at most `2 * spans` points, its
/// stacks grouped by `group`: stack `k` (0: none recorded) counts in group
/// `group[k]`, one of `groups`.
pub fn timeline(
    trace: &Trace,
    window: Window,
    spans: usize,
    group: &[usize],
    groups: usize,
) -> Timeline {
    let kind = Kind::of(trace);
    if kind == Kind::Aggregate {
        return snapshots(trace, window, spans.max(1), group, groups);
    }
    let segments = trace.serialized_segments();
    let first = origin(trace);
    let moments = moments(&segments, window, spans.max(1), kind);
    let mut t = Timeline {
        points: Vec::with_capacity(moments.len()),
        group_peaks: vec![0; groups],
        rss: rss(trace, window, first),
        mapped: mapped(trace, window, first),
    };
    let mut live = vec![0u64; groups];
    let mut heap = Heap::new(kind);
    let mut next = moments.iter().peekable();
    let mut i = 0u64;
    let mut entered = false;
    for segment in &segments {
        heap.clear();
        live.iter_mut().for_each(|b| *b = 0);
        for e in segment {
            let c = heap.apply(e);
            for (b, _) in c.freed.into_iter().flatten() {
                live[group[b.stack as usize]] -= b.size;
            }
            if let Some(b) = c.allocated {
                let g = group[b.stack as usize];
                live[g] = live[g].saturating_add(b.size);
            }
            if window.contains(e.time_ns) {
                // Only an allocation raises a group, but blocks from before
                // the window count from its first event on.
                let raised = c
                    .allocated
                    .filter(|_| entered)
                    .map(|b| group[b.stack as usize]);
                for g in raised.map_or(0..groups, |g| g..g + 1) {
                    t.group_peaks[g] = t.group_peaks[g].max(live[g]);
                }
                entered = true;
            }
            if next.next_if_eq(&&i).is_some() {
                let time_ns = (e.time_ns - first).max(t.points.last().map_or(0, |p| p.time_ns));
                t.points.push(Point {
                    time_ns,
                    event: i,
                    live_bytes: heap.bytes(),
                    groups: live.clone(),
                });
            }
            i += 1;
        }
    }
    t
}

/// The time the timeline counts from: the first event's (or, in a trace
/// without events, the first sample's or mapping call's).
fn origin(trace: &Trace) -> u64 {
    let events = trace.events.iter().map(|e| e.time_ns).min();
    let others = || {
        let rss = trace.rss.iter().map(|r| r.time_ns);
        rss.chain(trace.mappings.iter().map(|m| m.time_ns)).min()
    };
    events.or_else(others).unwrap_or(0)
}

/// The RSS samples in `window`, their times counted from `first` (a sample
/// taken just before the first event is placed at it).
fn rss(trace: &Trace, window: Window, first: u64) -> Series {
    let mut v: Vec<(u64, u64)> = trace
        .rss
        .iter()
        .filter(|r| window.contains(r.time_ns))
        .map(|r| (r.time_ns.saturating_sub(first), r.rss_bytes))
        .collect();
    v.sort_by_key(|&(t, _)| t);
    Series(v)
}

/// The bytes mapped after each mapping call in `window`, led by the level
/// before the first, segment by segment (an exec unmaps everything).
fn mapped(trace: &Trace, window: Window, first: u64) -> Series {
    let page = trace
        .meta_value("page_size")
        .and_then(|p| p.parse().ok())
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let mut calls: Vec<_> = trace.mappings.iter().collect();
    calls.sort_by_key(|m| (m.segment, m.time_ns));
    let mut v = Vec::new();
    let mut model = Mapped::new(page);
    let mut segment = None;
    let mut entered = false;
    for m in calls {
        if segment != Some(m.segment) {
            segment = Some(m.segment);
            model = Mapped::new(page);
        }
        let before = model.bytes();
        model.apply(m);
        if !window.contains(m.time_ns) {
            continue;
        }
        let at = m.time_ns.saturating_sub(first);
        if !entered && before > 0 {
            v.push((at, before));
        }
        entered = true;
        v.push((at, model.bytes()));
    }
    Series(v)
}

/// The indexes of the events the timeline keeps, in order: of each span of
/// `window`, the event after which most bytes were live (the first such) and
/// the span's last event.
fn moments(segments: &[Vec<Event>], window: Window, spans: usize, kind: Kind) -> Vec<u64> {
    let times = || segments.iter().flatten().map(|e| e.time_ns);
    let inside = || times().filter(|&t| window.contains(t));
    let (Some(from), Some(to)) = (inside().min(), inside().max()) else {
        return Vec::new();
    };
    let width = u128::from(to - from) + 1;
    let span_of = |t: u64| (u128::from(t - from) * spans as u128 / width) as usize;
    // Per span: (most bytes, its event, the last event).
    let mut best: Vec<Option<(u64, u64, u64)>> = vec![None; spans];
    let mut heap = Heap::new(kind);
    let mut i = 0u64;
    for segment in segments {
        heap.clear();
        for e in segment {
            heap.apply(e);
            if window.contains(e.time_ns) {
                let s = &mut best[span_of(e.time_ns)];
                let bytes = heap.bytes();
                match s {
                    Some((most, at, last)) => {
                        if bytes > *most {
                            (*most, *at) = (bytes, i);
                        }
                        *last = i;
                    }
                    None => *s = Some((bytes, i, i)),
                }
            }
            i += 1;
        }
    }
    let mut kept: Vec<u64> = best
        .into_iter()
        .flatten()
        .flat_map(|(_, at, last)| [at, last])
        .collect();
    kept.sort_unstable();
    kept.dedup();
    kept
}

/// An aggregate recording's timeline: its snapshots in `window`, of each
/// span the highest and the last. A snapshot names only its top stacks: the
/// groups add up to at most the process's live bytes, the rest being in none.
fn snapshots(
    trace: &Trace,
    window: Window,
    spans: usize,
    group: &[usize],
    groups: usize,
) -> Timeline {
    let inside: Vec<_> = trace
        .snapshots
        .iter()
        .filter(|s| window.contains(s.time_ns))
        .collect();
    let (Some(from), Some(to)) = (
        inside.iter().map(|s| s.time_ns).min(),
        inside.iter().map(|s| s.time_ns).max(),
    ) else {
        let first = origin(trace);
        return Timeline {
            points: Vec::new(),
            group_peaks: vec![0; groups],
            rss: rss(trace, window, first),
            mapped: mapped(trace, window, first),
        };
    };
    let first = trace
        .meta_value("first_call_ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(from)
        .min(from);
    let width = u128::from(to - from) + 1;
    let span_of = |t: u64| (u128::from(t - from) * spans as u128 / width) as usize;
    // Per span: (most bytes, its snapshot, the last snapshot).
    let mut best: Vec<Option<(u64, usize, usize)>> = vec![None; spans];
    for (i, s) in inside.iter().enumerate() {
        match &mut best[span_of(s.time_ns)] {
            Some((most, at, last)) => {
                if s.live_bytes > *most {
                    (*most, *at) = (s.live_bytes, i);
                }
                *last = i;
            }
            slot => *slot = Some((s.live_bytes, i, i)),
        }
    }
    let mut kept: Vec<usize> = best
        .into_iter()
        .flatten()
        .flat_map(|(_, at, last)| [at, last])
        .collect();
    kept.sort_unstable();
    kept.dedup();
    let mut t = Timeline {
        points: Vec::with_capacity(kept.len()),
        group_peaks: vec![0; groups],
        rss: rss(trace, window, first),
        mapped: mapped(trace, window, first),
    };
    for i in kept {
        let s = inside[i];
        let mut live = vec![0u64; groups];
        for &(stack, bytes) in &s.stacks {
            if let Some(&g) = group.get(stack as usize) {
                live[g] = live[g].saturating_add(bytes);
            }
        }
        for (peak, &b) in t.group_peaks.iter_mut().zip(&live) {
            *peak = (*peak).max(b);
        }
        t.points.push(Point {
            time_ns: s.time_ns - first,
            event: 0,
            live_bytes: s.live_bytes,
            groups: live,
        });
    }
    t
}
