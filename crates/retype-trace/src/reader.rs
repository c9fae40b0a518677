//! The streaming trace reader. It never panics: every malformed input is an
//! error that names the byte offset where reading failed.

use std::io::{self, Read};

use crate::codec::{self, DecodeError, DeltaState, VarintError};
use crate::error::{TraceError, TraceErrorKind};
use crate::event::{Record, ThreadSummary};

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
    /// Events of the current segment so far.
    events: u64,
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
        if version != codec::VERSION {
            return Err(err(
                8,
                TraceErrorKind::BadHeader(format!(
                    "version {version}, this reader knows {}",
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
            events: 0,
            ended: false,
            done: false,
        })
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
                    })?;
                self.events += 1;
                return Ok(Some(Record::Event(e)));
            }
            self.block = None;
        }
        let start = self.offset;
        let mut tag = [0u8; 1];
        if self.read(&mut tag)? == 0 {
            return if self.ended {
                Ok(None)
            } else {
                Err(err(
                    start,
                    TraceErrorKind::Truncated("before the end record"),
                ))
            };
        }
        // After an end record the file may go on with a new segment (the next
        // program image after an exec); its count starts again.
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
            return Err(err(
                self.offset,
                TraceErrorKind::Truncated("inside a record"),
            ));
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
                self.ended = true;
                Ok(Some(Record::End { events }))
            }
            t => Err(corrupt(start, format!("unknown record tag {t}"))),
        }
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
                return Err(err(
                    self.offset,
                    TraceErrorKind::Truncated("inside a record header"),
                ));
            }
            if bytes[i] & 0x80 == 0 {
                break;
            }
        }
        codec::get_varint(&bytes, &mut 0)
            .map_err(|_| corrupt(at, "record length longer than 64 bits".into()))
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
