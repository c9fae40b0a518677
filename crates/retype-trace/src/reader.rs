//! The streaming trace reader. It never panics: every malformed input is an
//! error that names the byte offset where reading failed.
//!
//! A file that ends inside a record or before its last end record (a
//! recording cut short: its process was killed, its disk filled up) ends the
//! stream with a [`TraceErrorKind::Truncated`] error that says how much of it
//! reads: the records before the unfinished one, and their events
//! ([`CutShort`]). An events record yields its events only once it is whole,
//! so a cut never splits a batch.

use std::collections::HashSet;
use std::io::{self, Read};

use crate::codec::{self, DecodeError, DeltaState, VarintError};
use crate::error::{TraceError, TraceErrorKind};
use crate::event::{
    Counters, CutShort, MapOp, Mapping, Module, Record, RssSample, Snapshot, Stack, ThreadSummary,
};

/// The largest record payload accepted; bigger lengths are corruption, not data.
pub const MAX_RECORD_LEN: u64 = 1 << 26;

/// Reads a trace record by record: an iterator of `Result<Record, TraceError>`
/// that stops at the end of the file or after the first error. A file is one or
/// more segments, each closed by an end record that counts its events.
pub struct Reader<R: Read> {
    src: R,
    /// File offset of the next byte `src` yields.
    offset: u64,
    payload: Vec<u8>,
    /// File offset of `payload[0]`.
    payload_at: u64,
    cursor: usize,
    /// The thread and delta state of the events record being read, if any.
    block: Option<(u32, DeltaState)>,
    /// File offset of the record being read (of the next one between records).
    record_at: u64,
    /// Events of the current segment so far.
    events: u64,
    /// Events of the whole file so far.
    events_read: u64,
    /// The current segment's number in the file, from 0.
    segment: u32,
    /// The file's format version.
    version: u16,
    /// Stack ids defined in the current segment.
    stack_ids: HashSet<u32>,
    ended: bool,
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Checks the file header and returns a reader positioned at the first record.
    pub fn new(mut src: R) -> Result<Reader<R>, TraceError> {
        let mut h = [0u8; codec::HEADER_LEN];
        let got = read_full(&mut src, &mut h).map_err(|e| err(0, TraceErrorKind::Io(e)))?;
        if got < h.len() || h[..8] != codec::MAGIC {
            let what = if h[..got.min(8)] == codec::MAGIC[..got.min(8)] {
                format!(
                    "the {got}-byte file is shorter than the {}-byte header",
                    h.len()
                )
            } else {
                "wrong magic number".to_string()
            };
            return Err(err(0, TraceErrorKind::BadHeader(what)));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if !(codec::MIN_VERSION..=codec::VERSION).contains(&version) {
            return Err(err(
                8,
                TraceErrorKind::BadHeader(format!(
                    "version {version}, this reader knows {} to {}",
                    codec::MIN_VERSION,
                    codec::VERSION
                )),
            ));
        }
        Ok(Reader {
            src,
            offset: codec::HEADER_LEN as u64,
            payload: Vec::new(),
            payload_at: 0,
            cursor: 0,
            block: None,
            record_at: codec::HEADER_LEN as u64,
            events: 0,
            events_read: 0,
            segment: 0,
            version,
            stack_ids: HashSet::new(),
            ended: false,
            done: false,
        })
    }

    /// The file's format version.
    pub fn version(&self) -> u16 {
        self.version
    }

    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        if let Some((thread, delta)) = &mut self.block {
            if self.cursor < self.payload.len() {
                let at = self.payload_at + self.cursor as u64;
                let e = delta
                    .decode(&self.payload, &mut self.cursor, *thread)
                    .map_err(|e| match e {
                        DecodeError::Varint(VarintError::Truncated) => {
                            corrupt(at, "event runs past the end of its record".into())
                        }
                        DecodeError::Varint(VarintError::Overflow) => {
                            corrupt(at, "varint longer than 64 bits".into())
                        }
                        DecodeError::BadOp(code) => corrupt(at, format!("unknown op code {code}")),
                        DecodeError::BadStack(id) => {
                            corrupt(at, format!("stack id {id} is 0 or exceeds 32 bits"))
                        }
                    })?;
                if (e.stack != 0 && self.version < 2) || (e.descheduled && self.version < 3) {
                    let code = self.payload[(at - self.payload_at) as usize];
                    return Err(corrupt(at, format!("unknown op code {code}")));
                }
                self.events += 1;
                self.events_read += 1;
                return Ok(Some(Record::Event(e)));
            }
            self.block = None;
        }
        let start = self.offset;
        self.record_at = start;
        let mut tag = [0u8; 1];
        if self.read(&mut tag)? == 0 {
            return if self.ended {
                Ok(None)
            } else {
                Err(self.truncated(start, "before the end record"))
            };
        }
        // After an end record the file may go on with a new segment (the next
        // program image after an exec); its count starts again.
        if self.ended {
            self.segment += 1;
        }
        self.ended = false;
        let len = self.read_stream_varint()?;
        if len > MAX_RECORD_LEN {
            return Err(corrupt(
                start,
                format!("record length {len} exceeds {MAX_RECORD_LEN}"),
            ));
        }
        self.payload.clear();
        self.payload_at = self.offset;
        // Grows with the data that is there, so a corrupt length allocates nothing.
        let got = (&mut self.src)
            .take(len)
            .read_to_end(&mut self.payload)
            .map_err(|e| err(self.offset, TraceErrorKind::Io(e)))?;
        self.offset += got as u64;
        if (got as u64) < len {
            return Err(self.truncated(self.offset, "inside a record"));
        }
        self.cursor = 0;
        match tag[0] {
            codec::TAG_META => self.meta().map(Some),
            codec::TAG_EVENTS => {
                let thread = self.field()?;
                let thread = u32::try_from(thread).map_err(|_| {
                    corrupt(
                        self.payload_at,
                        format!("thread id {thread} exceeds 32 bits"),
                    )
                })?;
                let base = self.field()?;
                self.block = Some((thread, DeltaState::new(base)));
                self.next_record()
            }
            codec::TAG_THREAD => {
                let mut f = [0u64; 7];
                for x in &mut f {
                    *x = self.field()?;
                }
                self.expect_consumed()?;
                let thread = u32::try_from(f[0]).map_err(|_| {
                    corrupt(
                        self.payload_at,
                        format!("thread id {} exceeds 32 bits", f[0]),
                    )
                })?;
                Ok(Some(Record::Thread(ThreadSummary {
                    thread,
                    start_ns: f[1],
                    end_ns: f[2],
                    user_ns: f[3],
                    system_ns: f[4],
                    voluntary_switches: f[5],
                    involuntary_switches: f[6],
                })))
            }
            codec::TAG_END => {
                let events = self.field()?;
                self.expect_consumed()?;
                if events != self.events {
                    return Err(corrupt(
                        start,
                        format!(
                            "end record counts {events} events but its segment holds {}",
                            self.events
                        ),
                    ));
                }
                self.events = 0;
                self.stack_ids.clear();
                self.ended = true;
                Ok(Some(Record::End { events }))
            }
            codec::TAG_MODULE if self.version >= 2 => self.module().map(Some),
            codec::TAG_STACK if self.version >= 2 => self.stack().map(Some),
            codec::TAG_COUNTERS if self.version >= 4 => self.counters().map(Some),
            codec::TAG_SNAPSHOT if self.version >= 4 => self.snapshot().map(Some),
            codec::TAG_RSS if self.version >= 4 => {
                let [time_ns, rss_bytes] = [(); 2].map(|()| self.field());
                let (time_ns, rss_bytes) = (time_ns?, rss_bytes?);
                self.expect_consumed()?;
                Ok(Some(Record::Rss(RssSample {
                    time_ns,
                    rss_bytes,
                    segment: self.segment,
                })))
            }
            codec::TAG_MAPPING if self.version >= 4 => self.mapping().map(Some),
            t => Err(corrupt(start, format!("unknown record tag {t}"))),
        }
    }

    fn module(&mut self) -> Result<Record, TraceError> {
        let [base, start, end, id_len] = [(); 4].map(|()| self.field());
        let (base, start, end, id_len) = (base?, start?, end?, id_len?);
        let at = self.payload_at + self.cursor as u64;
        let rest = &self.payload[self.cursor..];
        if id_len > rest.len() as u64 {
            return Err(corrupt(
                at,
                format!("build id length {id_len} exceeds its record"),
            ));
        }
        if start > end {
            return Err(corrupt(
                self.payload_at,
                format!("module range {start:#x}..{end:#x} is backwards"),
            ));
        }
        let (build_id, path) = rest.split_at(id_len as usize);
        let path = String::from_utf8(path.to_vec()).map_err(|e| {
            corrupt(
                at + id_len + e.utf8_error().valid_up_to() as u64,
                "module path is not UTF-8".into(),
            )
        })?;
        Ok(Record::Module(Module {
            path,
            base,
            start,
            end,
            build_id: build_id.to_vec(),
            segment: self.segment,
        }))
    }

    fn mapping(&mut self) -> Result<Record, TraceError> {
        let mut f = [0u64; 10];
        for x in &mut f {
            *x = self.field()?;
        }
        self.expect_consumed()?;
        let [thread, time_ns, op, addr, len, old_addr, old_len, prot, flags, stack] = f;
        let at = self.payload_at;
        let narrow = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| corrupt(at, format!("{what} {v} exceeds 32 bits")))
        };
        let op = MapOp::from_code(op)
            .ok_or_else(|| corrupt(at, format!("unknown mapping op code {op}")))?;
        Ok(Record::Mapping(Mapping {
            op,
            thread: narrow(thread, "thread id")?,
            time_ns,
            addr,
            len,
            old_addr,
            old_len,
            prot: narrow(prot, "mapping prot")?,
            flags: narrow(flags, "mapping flags")?,
            stack: narrow(stack, "stack id")?,
            segment: self.segment,
        }))
    }

    fn stack(&mut self) -> Result<Record, TraceError> {
        let at = self.payload_at;
        let id = self.field()?;
        let id = u32::try_from(id)
            .ok()
            .filter(|&id| id != 0)
            .ok_or_else(|| corrupt(at, format!("stack id {id} is 0 or exceeds 32 bits")))?;
        if !self.stack_ids.insert(id) {
            return Err(corrupt(
                at,
                format!("stack id {id} defined twice in one segment"),
            ));
        }
        let count = self.field()?;
        let (n, truncated) = (count >> 1, count & 1 == 1);
        // Each frame takes at least a byte: a count beyond the payload is corrupt
        // (and must not size an allocation).
        if n > (self.payload.len() - self.cursor) as u64 {
            return Err(corrupt(
                at,
                format!("stack of {n} frames exceeds its record"),
            ));
        }
        let mut frames = Vec::with_capacity(n as usize);
        let mut prev = 0u64;
        for _ in 0..n {
            prev = prev.wrapping_add(codec::unzigzag(self.field()?));
            frames.push(prev);
        }
        self.expect_consumed()?;
        Ok(Record::Stack {
            id,
            stack: Stack {
                frames,
                truncated,
                segment: self.segment,
            },
        })
    }

    fn counters(&mut self) -> Result<Record, TraceError> {
        let at = self.payload_at;
        let id = self.field()?;
        let id =
            u32::try_from(id).map_err(|_| corrupt(at, format!("stack id {id} exceeds 32 bits")))?;
        let mut f = [0u64; 9];
        for x in &mut f {
            *x = self.field()?;
        }
        self.expect_consumed()?;
        Ok(Record::Counters {
            id,
            counters: Counters::from_fields(f),
        })
    }

    fn snapshot(&mut self) -> Result<Record, TraceError> {
        let at = self.payload_at;
        let (time_ns, live_bytes, n) = (self.field()?, self.field()?, self.field()?);
        // Each stack takes at least two bytes: a count beyond the payload is
        // corrupt (and must not size an allocation).
        if n > (self.payload.len() - self.cursor) as u64 / 2 {
            return Err(corrupt(
                at,
                format!("snapshot of {n} stacks exceeds its record"),
            ));
        }
        let mut stacks = Vec::with_capacity(n as usize);
        for _ in 0..n {
            // 0: the calls recorded without a stack.
            let id = self.field()?;
            let id = u32::try_from(id)
                .map_err(|_| corrupt(at, format!("stack id {id} exceeds 32 bits")))?;
            stacks.push((id, self.field()?));
        }
        self.expect_consumed()?;
        Ok(Record::Snapshot(Snapshot {
            time_ns,
            live_bytes,
            stacks,
        }))
    }

    fn meta(&mut self) -> Result<Record, TraceError> {
        let klen = self.field()?;
        let at = self.payload_at + self.cursor as u64;
        let rest = &self.payload[self.cursor..];
        if klen > rest.len() as u64 {
            return Err(corrupt(
                at,
                format!("meta key length {klen} exceeds its record"),
            ));
        }
        let (key, value) = rest.split_at(klen as usize);
        let text = |b: &[u8], at: u64| {
            String::from_utf8(b.to_vec()).map_err(|e| {
                corrupt(
                    at + e.utf8_error().valid_up_to() as u64,
                    "meta text is not UTF-8".into(),
                )
            })
        };
        Ok(Record::Meta(text(key, at)?, text(value, at + klen)?))
    }

    /// The next varint of the current record's payload.
    fn field(&mut self) -> Result<u64, TraceError> {
        let at = self.payload_at + self.cursor as u64;
        codec::get_varint(&self.payload, &mut self.cursor).map_err(|e| match e {
            VarintError::Truncated => corrupt(at, "field runs past the end of its record".into()),
            VarintError::Overflow => corrupt(at, "varint longer than 64 bits".into()),
        })
    }

    fn expect_consumed(&self) -> Result<(), TraceError> {
        if self.cursor == self.payload.len() {
            Ok(())
        } else {
            let at = self.payload_at + self.cursor as u64;
            Err(corrupt(at, "record has bytes after its last field".into()))
        }
    }

    fn read_stream_varint(&mut self) -> Result<u64, TraceError> {
        let mut bytes = [0u8; codec::MAX_VARINT];
        let at = self.offset;
        for i in 0..bytes.len() {
            if self.read(&mut bytes[i..=i])? == 0 {
                return Err(self.truncated(self.offset, "inside a record header"));
            }
            if bytes[i] & 0x80 == 0 {
                break;
            }
        }
        codec::get_varint(&bytes, &mut 0)
            .map_err(|_| corrupt(at, "record length longer than 64 bits".into()))
    }

    /// The error of a file that ends at `offset`, `what` saying where: the
    /// records before the one being read are what reads.
    fn truncated(&self, offset: u64, what: &'static str) -> TraceError {
        let cut = CutShort {
            at_byte: self.record_at,
            events: self.events_read,
        };
        err(offset, TraceErrorKind::Truncated { what, cut })
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let n =
            read_full(&mut self.src, buf).map_err(|e| err(self.offset, TraceErrorKind::Io(e)))?;
        self.offset += n as u64;
        Ok(n)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_record().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn err(offset: u64, kind: TraceErrorKind) -> TraceError {
    TraceError { offset, kind }
}

fn corrupt(offset: u64, message: String) -> TraceError {
    err(offset, TraceErrorKind::Corrupt(message))
}
