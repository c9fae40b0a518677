//! The streaming trace writer.

use std::io::{self, Write};

use crate::codec::{self, DeltaState, MAX_EVENTS_HEADER, MAX_EVENT_LEN};
use crate::event::{Counters, Event, Mapping, Module, RssSample, Snapshot, Stack, ThreadSummary};

/// Bytes of event payload gathered before an events record is written.
const BLOCK: usize = 64 * 1024;

/// Writes a trace to `W` as events arrive. Consecutive events of one thread
/// share an events record; call [`Writer::finish`] to write the end record.
pub struct Writer<W: Write> {
    out: W,
    /// `MAX_EVENTS_HEADER` bytes of room for the record header, then the payload.
    block: Vec<u8>,
    len: usize,
    thread: u32,
    base_time: u64,
    delta: DeltaState,
    /// Events of the current segment.
    events: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a trace: writes the file header.
    pub fn new(mut out: W) -> io::Result<Writer<W>> {
        out.write_all(&codec::header())?;
        Ok(Writer {
            out,
            block: vec![0; MAX_EVENTS_HEADER + BLOCK + MAX_EVENT_LEN],
            len: 0,
            thread: 0,
            base_time: 0,
            delta: DeltaState::default(),
            events: 0,
        })
    }

    pub fn meta(&mut self, key: &str, value: &str) -> io::Result<()> {
        self.flush_events()?;
        let mut buf = vec![0; key.len() + value.len() + 2 * codec::MAX_VARINT + 1];
        let n = codec::meta_record(&mut buf, key.as_bytes(), value.as_bytes())
            .expect("buffer sized for the record");
        self.out.write_all(&buf[..n])
    }

    pub fn event(&mut self, e: &Event) -> io::Result<()> {
        if self.len > 0 && (e.thread != self.thread || self.len >= BLOCK) {
            self.flush_events()?;
        }
        if self.len == 0 {
            self.thread = e.thread;
            self.base_time = e.time_ns;
            self.delta = DeltaState::new(e.time_ns);
        }
        let mut pos = MAX_EVENTS_HEADER + self.len;
        self.delta
            .encode(&mut self.block, &mut pos, &e.canonical())
            .expect("block has room for one event");
        self.len = pos - MAX_EVENTS_HEADER;
        self.events += 1;
        Ok(())
    }

    pub fn thread(&mut self, t: &ThreadSummary) -> io::Result<()> {
        self.flush_events()?;
        self.varint_record(codec::TAG_THREAD, &codec::thread_fields(t))
    }

    /// A loaded object of the current segment's program image.
    pub fn module(&mut self, m: &Module) -> io::Result<()> {
        self.flush_events()?;
        let mut buf = vec![0; m.path.len() + m.build_id.len() + 5 * codec::MAX_VARINT + 1];
        let fields = codec::ModuleFields {
            base: m.base,
            start: m.start,
            end: m.end,
            build_id: &m.build_id,
            path: m.path.as_bytes(),
        };
        let at = codec::module_record(&mut buf, &fields).expect("buffer sized for the record");
        self.out.write_all(&buf[at])
    }

    /// A call stack that events of the current segment name by `id` (not 0,
    /// unique within the segment).
    pub fn stack(&mut self, id: u32, s: &Stack) -> io::Result<()> {
        assert_ne!(id, 0, "stack id 0 means none");
        self.flush_events()?;
        let mut buf = vec![0; (s.frames.len() + 3) * codec::MAX_VARINT + 1];
        let at = codec::stack_record(&mut buf, id, &s.frames, s.truncated)
            .expect("buffer sized for the record");
        self.out.write_all(&buf[at])
    }

    /// An aggregate recording's counters of the stack the current segment
    /// names `id` (0: none).
    pub fn counters(&mut self, id: u32, c: &Counters) -> io::Result<()> {
        self.flush_events()?;
        let mut buf = [0u8; codec::MAX_COUNTERS_RECORD];
        let n = codec::counters_record(&mut buf, id, c).expect("buffer sized for the record");
        self.out.write_all(&buf[..n])
    }

    /// An aggregate recording's snapshot, its stacks named by the current segment's ids.
    pub fn snapshot(&mut self, s: &Snapshot) -> io::Result<()> {
        self.flush_events()?;
        let mut buf =
            vec![0; (s.stacks.len() * 2 + 3) * codec::MAX_VARINT + codec::MAX_RECORD_HEADER];
        let at = codec::snapshot_record(&mut buf, s.time_ns, s.live_bytes, &s.stacks)
            .expect("buffer sized for the record");
        self.out.write_all(&buf[at])
    }

    /// An RSS sample of the current segment's process.
    pub fn rss(&mut self, r: &RssSample) -> io::Result<()> {
        self.flush_events()?;
        self.varint_record(codec::TAG_RSS, &codec::rss_fields(r))
    }

    /// A mapping call of the current segment; its stack, if any, is an id
    /// as an event's is.
    pub fn mapping(&mut self, m: &Mapping) -> io::Result<()> {
        self.flush_events()?;
        self.varint_record(codec::TAG_MAPPING, &codec::mapping_fields(m))
    }

    /// Ends the current segment; what follows is the next program image's.
    pub fn end_segment(&mut self) -> io::Result<()> {
        self.flush_events()?;
        self.varint_record(codec::TAG_END, &[self.events])?;
        self.events = 0;
        Ok(())
    }

    /// Writes the end record and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.end_segment()?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn varint_record(&mut self, tag: u8, fields: &[u64]) -> io::Result<()> {
        let mut buf = [0u8; codec::MAX_VARINT_RECORD];
        let n = codec::varint_record(&mut buf, tag, fields).expect("buffer sized for the record");
        self.out.write_all(&buf[..n])
    }

    fn flush_events(&mut self) -> io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let end = MAX_EVENTS_HEADER;
        let fields = [u64::from(self.thread), self.base_time];
        let start =
            codec::header_before(&mut self.block, end, codec::TAG_EVENTS, &fields, self.len)
                .expect("room reserved for the header");
        self.out.write_all(&self.block[start..end + self.len])?;
        self.len = 0;
        Ok(())
    }
}
