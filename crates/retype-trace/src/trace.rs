//! A whole trace in memory, for the commands that need random access.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use anyhow::Context;

use crate::error::{TraceError, TraceErrorKind};
use crate::event::{
    Counters, CutShort, Event, Mapping, Module, Record, RssSample, Snapshot, Stack, ThreadSummary,
};
use crate::reader::Reader;
use crate::writer::Writer;

/// The counters of one stack in one segment of an aggregate recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackCounters {
    /// As `Event::stack`: `stacks[stack - 1]`, 0 for calls without a stack.
    pub stack: u32,
    /// The segment of the file (program image) they were counted in, from 0.
    pub segment: u32,
    pub counters: Counters,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Key/value metadata in file order (keys may repeat, e.g. one `cmdline` per exec).
    pub meta: Vec<(String, String)>,
    /// Events in file order: per thread in call order, threads interleaved by flush.
    pub events: Vec<Event>,
    pub threads: Vec<ThreadSummary>,
    /// Indexes into `events` where a new segment (program image, after an
    /// exec) begins; empty for a one-segment trace. An exec drops the heap, so
    /// blocks never cross a segment boundary.
    pub segments: Vec<usize>,
    /// The objects loaded in each segment's program image (`Module::segment`
    /// indexes the segments: 0 before `segments[0]`, and so on).
    pub modules: Vec<Module>,
    /// Call stacks: an event's (or a mapping's) `stack` k > 0 is `stacks[k - 1]`.
    pub stacks: Vec<Stack>,
    /// An aggregate recording's counters: what each stack of each segment
    /// did (a full or sampled recording has none).
    pub counters: Vec<StackCounters>,
    /// An aggregate recording's snapshots of live bytes, in file order; their
    /// stacks are numbered as events' are.
    pub snapshots: Vec<Snapshot>,
    /// The process's RSS samples, in file order, each in its segment (an
    /// image that made no malloc-family call counts in the next one's).
    pub rss: Vec<RssSample>,
    /// The program's mapping calls, in file order, segments as for [`Trace::rss`].
    pub mappings: Vec<Mapping>,
    /// Where the file stops, if it stops before its last end record (the
    /// trace holds what was read before that).
    pub cut_short: Option<CutShort>,
}

impl Trace {
    /// Reads a whole trace.
    ///
    /// Stack ids, which the file scopes to a segment, become indexes into
    /// `stacks`; an event naming a stack its segment does not define (its
    /// record was lost with a buffer a fatal signal could not write) gets none.
    /// A file cut short reads up to its last whole record, and says so in
    /// [`Trace::cut_short`]; its last segment ends there.
    pub fn read(src: impl Read) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        // Per file segment: the event it starts at, and its stack ids.
        let mut starts = vec![0];
        let mut ids: Vec<HashMap<u32, u32>> = vec![HashMap::new()];
        let mut snapshot_segments = Vec::new();
        for r in Reader::new(src)? {
            let record = match r {
                Err(TraceError {
                    kind: TraceErrorKind::Truncated { cut, .. },
                    ..
                }) => {
                    t.cut_short = Some(cut);
                    None
                }
                r => Some(r?),
            };
            match record {
                Some(Record::Meta(k, v)) => t.meta.push((k, v)),
                Some(Record::Event(e)) => t.events.push(e),
                Some(Record::Thread(s)) => t.threads.push(s),
                Some(Record::End { .. }) | None => {
                    t.segments.push(t.events.len());
                    starts.push(t.events.len());
                    ids.push(HashMap::new());
                }
                Some(Record::Module(m)) => t.modules.push(m),
                Some(Record::Stack { id, stack }) => {
                    t.stacks.push(stack);
                    ids[starts.len() - 1].insert(id, t.stacks.len() as u32);
                }
                Some(Record::Counters { id, counters }) => t.counters.push(StackCounters {
                    stack: id,
                    segment: starts.len() as u32 - 1,
                    counters,
                }),
                Some(Record::Snapshot(s)) => {
                    snapshot_segments.push(starts.len() - 1);
                    t.snapshots.push(s);
                }
                Some(Record::Rss(r)) => t.rss.push(r),
                Some(Record::Mapping(m)) => t.mappings.push(m),
            }
        }
        // Counters and snapshots name stacks by their segment's ids too; a
        // stack the segment does not define counts as none.
        let index_of = |k: usize, id: u32| ids[k].get(&id).copied().unwrap_or(0);
        for c in &mut t.counters {
            if c.stack != 0 {
                c.stack = index_of(c.segment as usize, c.stack);
            }
        }
        for (s, &k) in t.snapshots.iter_mut().zip(&snapshot_segments) {
            for (stack, _) in &mut s.stacks {
                *stack = index_of(k, *stack);
            }
        }
        for m in &mut t.mappings {
            if m.stack != 0 {
                m.stack = index_of(m.segment as usize, m.stack);
            }
        }
        // Events name their stacks by their segment's ids.
        for (k, w) in starts.windows(2).enumerate() {
            for e in &mut t.events[w[0]..w[1]] {
                if e.stack != 0 {
                    e.stack = ids[k].get(&e.stack).copied().unwrap_or(0);
                }
            }
        }
        // The last end record closes the last segment rather than opening one.
        while t.segments.last().is_some_and(|&s| s >= t.events.len()) {
            t.segments.pop();
        }
        t.segments.dedup();
        // A file segment is the segment its events are in; one without events
        // (an image that exec'd before its first call) keeps no modules,
        // unless it holds an aggregate recording's counters.
        let counted: std::collections::HashSet<u32> =
            t.counters.iter().map(|c| c.segment).collect();
        let index = |k: u32| {
            let seg = k;
            let k = k as usize;
            let start = starts[k];
            let empty = !counted.contains(&seg)
                && (starts.get(k + 1).is_some_and(|&next| next == start)
                    || start == t.events.len());
            (!empty).then(|| t.segments.iter().filter(|&&b| b <= start).count() as u32)
        };
        let (mut modules, mut stacks) = (
            std::mem::take(&mut t.modules),
            std::mem::take(&mut t.stacks),
        );
        modules.retain_mut(|m| index(m.segment).map(|i| m.segment = i).is_some());
        // Records that outlive an image without events go to the next image.
        let image = |k: u32| {
            t.segments
                .iter()
                .filter(|&&b| b <= starts[k as usize])
                .count() as u32
        };
        for s in &mut stacks {
            s.segment = image(s.segment);
        }
        for r in &mut t.rss {
            r.segment = image(r.segment);
        }
        for m in &mut t.mappings {
            m.segment = image(m.segment);
        }
        t.modules = modules;
        t.stacks = stacks;
        Ok(t)
    }

    pub fn read_file(path: &Path) -> anyhow::Result<Trace> {
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Trace::read(BufReader::new(f)).with_context(|| format!("{}", path.display()))
    }

    /// Writes the trace: metadata, events, thread summaries, end record (a
    /// trace read cut short is written whole).
    pub fn write(&self, out: impl Write) -> std::io::Result<()> {
        let mut w = Writer::new(out)?;
        for (k, v) in &self.meta {
            w.meta(k, v)?;
        }
        let mut segment = 0;
        self.write_image(&mut w, segment)?;
        // An aggregate recording has no events: its counters and snapshots
        // follow the stacks they name.
        for c in &self.counters {
            w.counters(c.stack, &c.counters)?;
        }
        for s in &self.snapshots {
            w.snapshot(s)?;
        }
        for (i, e) in self.events.iter().enumerate() {
            if self.segments.contains(&i) {
                w.end_segment()?;
                segment += 1;
                self.write_image(&mut w, segment)?;
            }
            w.event(e)?;
        }
        for t in &self.threads {
            w.thread(t)?;
        }
        w.finish()?;
        Ok(())
    }

    /// The modules, stacks, RSS samples and mappings of segment `segment`,
    /// which begin it.
    fn write_image<W: Write>(&self, w: &mut Writer<W>, segment: u32) -> std::io::Result<()> {
        for m in self.modules.iter().filter(|m| m.segment == segment) {
            w.module(m)?;
        }
        for (i, s) in self.stacks.iter().enumerate() {
            if s.segment == segment {
                w.stack(i as u32 + 1, s)?;
            }
        }
        for r in self.rss.iter().filter(|r| r.segment == segment) {
            w.rss(r)?;
        }
        for m in self.mappings.iter().filter(|m| m.segment == segment) {
            w.mapping(m)?;
        }
        Ok(())
    }

    /// The stack of event `e`, if it has one.
    pub fn stack_of(&self, e: &Event) -> Option<&Stack> {
        self.stacks.get((e.stack as usize).checked_sub(1)?)
    }

    /// The first value of metadata key `key`.
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Each segment's events ordered by time (stable: ties keep file order),
    /// as one thread replaying a multi-threaded program would see them.
    ///
    /// A call that hands out a block is placed at its end (the block is not
    /// the caller's before it returns) and every other call at its start (a
    /// freed block may be handed out again as soon as `free` is entered).
    /// Ordered by start alone, a thread's `malloc` that began before another
    /// thread's `free` of the same block, yet returned that block, would come
    /// first, and the replay would see the block allocated twice.
    ///
    /// A thread's calls keep their order: no call is placed before the
    /// thread's previous one. (A latency is rounded up to the clock's
    /// resolution, and a coarse clock can read the same value at a call's end
    /// and at the next call's start, so the end of a `malloc` could otherwise
    /// land after the start of the `free` of its block.)
    pub fn serialized_segments(&self) -> Vec<Vec<Event>> {
        let mut bounds = vec![0];
        bounds.extend(
            self.segments
                .iter()
                .copied()
                .filter(|&s| s > 0 && s < self.events.len()),
        );
        bounds.push(self.events.len());
        bounds
            .windows(2)
            .filter(|w| w[0] < w[1])
            .map(|w| {
                let events = &self.events[w[0]..w[1]];
                let mut last: HashMap<u32, u64> = HashMap::new();
                let keys: Vec<u64> = events
                    .iter()
                    .map(|e| {
                        let at = if e.op.allocates() {
                            e.time_ns.saturating_add(e.latency_ns)
                        } else {
                            e.time_ns
                        };
                        let prev = last.entry(e.thread).or_insert(0);
                        *prev = at.max(*prev);
                        *prev
                    })
                    .collect();
                let mut order: Vec<usize> = (0..events.len()).collect();
                order.sort_by_key(|&i| keys[i]);
                order.into_iter().map(|i| events[i]).collect()
            })
            .collect()
    }

    /// All events, segment after segment, each segment ordered by time.
    pub fn serialized(&self) -> Vec<Event> {
        self.serialized_segments().concat()
    }
}
