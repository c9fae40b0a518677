//! A whole trace in memory, for the commands that need random access.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use anyhow::Context;

use crate::error::TraceError;
use crate::event::{Event, Record, ThreadSummary};
use crate::reader::Reader;
use crate::writer::Writer;

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
}

impl Trace {
    /// Reads a whole trace.
    pub fn read(src: impl Read) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        for r in Reader::new(src)? {
            match r? {
                Record::Meta(k, v) => t.meta.push((k, v)),
                Record::Event(e) => t.events.push(e),
                Record::Thread(s) => t.threads.push(s),
                Record::End { .. } => t.segments.push(t.events.len()),
            }
        }
        // The last end record closes the last segment rather than opening one.
        while t.segments.last().is_some_and(|&s| s >= t.events.len()) {
            t.segments.pop();
        }
        t.segments.dedup();
        Ok(t)
    }

    pub fn read_file(path: &Path) -> anyhow::Result<Trace> {
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Trace::read(BufReader::new(f)).with_context(|| format!("{}", path.display()))
    }

    /// Writes the trace: metadata, events, thread summaries, end record.
    pub fn write(&self, out: impl Write) -> std::io::Result<()> {
        let mut w = Writer::new(out)?;
        for (k, v) in &self.meta {
            w.meta(k, v)?;
        }
        for (i, e) in self.events.iter().enumerate() {
            if self.segments.contains(&i) {
                w.end_segment()?;
            }
            w.event(e)?;
        }
        for t in &self.threads {
            w.thread(t)?;
        }
        w.finish()?;
        Ok(())
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
                let mut ev = self.events[w[0]..w[1]].to_vec();
                ev.sort_by_key(|e| {
                    if e.op.allocates() {
                        e.time_ns + e.latency_ns
                    } else {
                        e.time_ns
                    }
                });
                ev
            })
            .collect()
    }

    /// All events, segment after segment, each segment ordered by time.
    pub fn serialized(&self) -> Vec<Event> {
        self.serialized_segments().concat()
    }
}
