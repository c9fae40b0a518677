//! The byte-level encoding of the trace format (docs/trace-format.md), shared by
//! the file writer and the LD_PRELOAD recorder.
//!
//! Nothing here allocates: encoders write into caller-provided byte slices, so
//! the recorder can use them inside `malloc`.

use std::ops::Range;

use crate::event::{Counters, Event, Mapping, Op, RssSample, ThreadSummary};

/// The first 8 bytes of every trace file (PNG-style: detects text-mode mangling).
pub const MAGIC: [u8; 8] = *b"\x89RTR\r\n\x1a\n";
/// The format version this crate writes: 2 added call stacks and loaded
/// objects (module and stack records, the stack flag on events), 3 the
/// descheduled flag on events, 4 aggregate and sampled recordings (counters
/// and snapshot records), RSS samples and mapping calls.
pub const VERSION: u16 = 4;
/// The oldest version this crate reads.
pub const MIN_VERSION: u16 = 1;
/// Magic, version (u16 LE) and a reserved u16 (0).
pub const HEADER_LEN: usize = 12;

/// Record tags.
pub const TAG_META: u8 = 1;
pub const TAG_EVENTS: u8 = 2;
pub const TAG_THREAD: u8 = 3;
pub const TAG_END: u8 = 4;
pub const TAG_MODULE: u8 = 5;
pub const TAG_STACK: u8 = 6;
/// An aggregate recording's counters of one stack ([`counters_record`]).
pub const TAG_COUNTERS: u8 = 7;
/// An aggregate recording's live bytes at one moment ([`snapshot_record`]).
pub const TAG_SNAPSHOT: u8 = 8;
/// An RSS sample: time and resident bytes ([`rss_fields`]).
pub const TAG_RSS: u8 = 9;
/// A mapping call: [`mapping_fields`].
pub const TAG_MAPPING: u8 = 10;

/// Set in an event's op byte when a stack id follows its fields.
pub const STACK_FLAG: u8 = 0x80;
/// Set in an event's op byte when the thread was descheduled during the call.
pub const DESCHEDULED_FLAG: u8 = 0x40;

/// The most bytes a LEB128 varint of a u64 takes.
pub const MAX_VARINT: usize = 10;
/// The room one encoded event needs: op, time, latency, three u64s (an op
/// carries at most three of ptr, align, size and ret) and a u32 stack id take
/// at most 56 bytes, rounded up to a power of two for cheap indexing.
pub const MAX_EVENT_LEN: usize = 64;
/// The most bytes a record header (tag and payload length) takes.
pub const MAX_RECORD_HEADER: usize = 1 + MAX_VARINT;
/// The most bytes an events record's header takes: record header, thread, base time.
pub const MAX_EVENTS_HEADER: usize = MAX_RECORD_HEADER + 2 * MAX_VARINT;
/// The most fields a [`varint_record`] holds.
pub const MAX_VARINT_FIELDS: usize = 12;
/// The most bytes a [`varint_record`] takes.
pub const MAX_VARINT_RECORD: usize = MAX_RECORD_HEADER + MAX_VARINT_FIELDS * MAX_VARINT;

/// The file header.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Appends `v` as LEB128 at `buf[*pos..]`; `None` if it does not fit.
pub fn put_varint(buf: &mut [u8], pos: &mut usize, mut v: u64) -> Option<()> {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let slot = buf.get_mut(*pos)?;
        *pos += 1;
        if v == 0 {
            *slot = byte;
            return Some(());
        }
        *slot = byte | 0x80;
    }
}

/// [`put_varint`] into an event's fixed-size room: at most 6 varints of at
/// most [`MAX_VARINT`] bytes follow the op byte, so `n` stays in bounds.
/// One- and two-byte values (most latencies, time deltas and sizes) skip the loop.
#[inline(always)]
fn put_small(out: &mut [u8; MAX_EVENT_LEN], n: &mut usize, mut v: u64) {
    const MASK: usize = MAX_EVENT_LEN - 1;
    if v < 0x80 {
        out[*n & MASK] = v as u8;
        *n += 1;
        return;
    }
    if v < 0x4000 {
        out[*n & MASK] = v as u8 | 0x80;
        out[(*n + 1) & MASK] = (v >> 7) as u8;
        *n += 2;
        return;
    }
    while v >= 0x80 {
        out[*n & MASK] = v as u8 | 0x80;
        v >>= 7;
        *n += 1;
    }
    out[*n & MASK] = v as u8;
    *n += 1;
}

/// Why a varint could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The bytes ended inside the varint.
    Truncated,
    /// More than 64 bits, or more than 10 bytes.
    Overflow,
}

/// Reads a LEB128 varint at `buf[*pos..]`, advancing `pos` past it.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    for i in 0..MAX_VARINT {
        let byte = *buf.get(*pos).ok_or(VarintError::Truncated)?;
        *pos += 1;
        let bits = u64::from(byte & 0x7f);
        if i == MAX_VARINT - 1 && bits > 1 {
            return Err(VarintError::Overflow);
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(VarintError::Overflow)
}

/// Zigzag: small signed deltas become small unsigned numbers.
pub fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

pub fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The delta state of one events record: times and addresses are stored as
/// zigzag differences from the previous ones in the same record.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeltaState {
    prev_time: u64,
    prev_addr: u64,
}

impl DeltaState {
    /// The state at the start of an events record whose base time is `base_time`.
    pub fn new(base_time: u64) -> DeltaState {
        DeltaState {
            prev_time: base_time,
            prev_addr: 0,
        }
    }

    fn get_addr(&mut self, buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
        let addr = self.prev_addr.wrapping_add(unzigzag(get_varint(buf, pos)?));
        self.prev_addr = addr;
        Ok(addr)
    }

    /// Appends `e` (its thread is the record's) at `buf[*pos..]`.
    /// On `None` (fewer than [`MAX_EVENT_LEN`] bytes of room) nothing is
    /// committed: `pos` and the state are unchanged.
    #[inline(always)]
    pub fn encode(&mut self, buf: &mut [u8], pos: &mut usize, e: &Event) -> Option<()> {
        // One bounds check for the whole event: the recorder calls this inside malloc.
        let out: &mut [u8; MAX_EVENT_LEN] = buf
            .get_mut(*pos..)?
            .get_mut(..MAX_EVENT_LEN)?
            .try_into()
            .ok()?;
        let mut n = 1;
        out[0] = e.op as u8
            | if e.stack != 0 { STACK_FLAG } else { 0 }
            | if e.descheduled { DESCHEDULED_FLAG } else { 0 };
        put_small(out, &mut n, zigzag(e.time_ns.wrapping_sub(self.prev_time)));
        self.prev_time = e.time_ns;
        put_small(out, &mut n, e.latency_ns);
        if e.op.has_ptr() {
            put_small(out, &mut n, zigzag(e.ptr.wrapping_sub(self.prev_addr)));
            self.prev_addr = e.ptr;
        }
        if e.op.has_align() {
            put_small(out, &mut n, e.align);
        }
        if e.op.allocates() {
            put_small(out, &mut n, e.size);
            put_small(out, &mut n, zigzag(e.ret.wrapping_sub(self.prev_addr)));
            self.prev_addr = e.ret;
        }
        if e.stack != 0 {
            put_small(out, &mut n, u64::from(e.stack));
        }
        *pos += n;
        Some(())
    }

    /// Reads one event of thread `thread` at `buf[*pos..]`.
    pub fn decode(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        thread: u32,
    ) -> Result<Event, DecodeError> {
        let code = *buf
            .get(*pos)
            .ok_or(DecodeError::Varint(VarintError::Truncated))?;
        let op = Op::from_code(code & !(STACK_FLAG | DESCHEDULED_FLAG))
            .ok_or(DecodeError::BadOp(code))?;
        *pos += 1;
        let mut e = Event {
            op,
            thread,
            descheduled: code & DESCHEDULED_FLAG != 0,
            ..Event::default()
        };
        e.time_ns = self.prev_time.wrapping_add(unzigzag(get_varint(buf, pos)?));
        self.prev_time = e.time_ns;
        e.latency_ns = get_varint(buf, pos)?;
        if op.has_ptr() {
            e.ptr = self.get_addr(buf, pos)?;
        }
        if op.has_align() {
            e.align = get_varint(buf, pos)?;
        }
        if op.allocates() {
            e.size = get_varint(buf, pos)?;
            e.ret = self.get_addr(buf, pos)?;
        }
        if code & STACK_FLAG != 0 {
            let id = get_varint(buf, pos)?;
            e.stack = u32::try_from(id)
                .ok()
                .filter(|&id| id != 0)
                .ok_or(DecodeError::BadStack(id))?;
        }
        Ok(e)
    }
}

/// Why an event could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Varint(VarintError),
    BadOp(u8),
    /// A stack id of 0 or beyond 32 bits.
    BadStack(u64),
}

impl From<VarintError> for DecodeError {
    fn from(e: VarintError) -> Self {
        DecodeError::Varint(e)
    }
}

/// Writes a record header (tag, payload length) ending exactly at `buf[end]`,
/// and returns where it starts. Lets an encoder fill the payload first and put
/// the header in front of it afterwards, with no copy of the payload.
pub fn header_before(
    buf: &mut [u8],
    end: usize,
    tag: u8,
    fields: &[u64],
    payload_len: usize,
) -> Option<usize> {
    let mut tmp = [0u8; MAX_RECORD_HEADER + 4 * MAX_VARINT];
    let mut fields_len = 0;
    let mut fields_buf = [0u8; 4 * MAX_VARINT];
    for &f in fields {
        put_varint(&mut fields_buf, &mut fields_len, f)?;
    }
    tmp[0] = tag;
    let mut n = 1;
    put_varint(&mut tmp, &mut n, (fields_len + payload_len) as u64)?;
    tmp.get_mut(n..n + fields_len)?
        .copy_from_slice(&fields_buf[..fields_len]);
    n += fields_len;
    let start = end.checked_sub(n)?;
    buf.get_mut(start..end)?.copy_from_slice(&tmp[..n]);
    Some(start)
}

/// Encodes a whole record with tag `tag` and varint fields `fields` (at most
/// [`MAX_VARINT_FIELDS`]) into `buf`; returns its length.
pub fn varint_record(buf: &mut [u8], tag: u8, fields: &[u64]) -> Option<usize> {
    let mut payload = [0u8; MAX_VARINT_FIELDS * MAX_VARINT];
    let mut len = 0;
    for &f in fields {
        put_varint(&mut payload, &mut len, f)?;
    }
    let mut pos = 0;
    *buf.get_mut(pos)? = tag;
    pos += 1;
    put_varint(buf, &mut pos, len as u64)?;
    buf.get_mut(pos..pos + len)?
        .copy_from_slice(&payload[..len]);
    Some(pos + len)
}

/// A thread-summary record's fields, in file order.
pub fn thread_fields(t: &ThreadSummary) -> [u64; 7] {
    [
        u64::from(t.thread),
        t.start_ns,
        t.end_ns,
        t.user_ns,
        t.system_ns,
        t.voluntary_switches,
        t.involuntary_switches,
    ]
}

/// The most bytes a counters record takes: tag, length, stack id and nine counters.
pub const MAX_COUNTERS_RECORD: usize = 1 + 11 * MAX_VARINT;

/// Encodes the counters record of stack `id` (0: no stack) into `buf`;
/// returns its length.
pub fn counters_record(buf: &mut [u8], id: u32, c: &Counters) -> Option<usize> {
    let mut fields = [0u64; 10];
    fields[0] = u64::from(id);
    fields[1..].copy_from_slice(&c.fields());
    varint_record(buf, TAG_COUNTERS, &fields)
}

/// Encodes a snapshot record into `buf` (payload first, then the header in
/// front of it): its time, the process's live bytes, and `(stack id, live
/// bytes)` of each stack in `stacks`. Returns where in `buf` it lies.
pub fn snapshot_record(
    buf: &mut [u8],
    time_ns: u64,
    live_bytes: u64,
    stacks: &[(u32, u64)],
) -> Option<Range<usize>> {
    let mut pos = MAX_RECORD_HEADER;
    for v in [time_ns, live_bytes, stacks.len() as u64] {
        put_varint(buf, &mut pos, v)?;
    }
    for &(id, bytes) in stacks {
        put_varint(buf, &mut pos, u64::from(id))?;
        put_varint(buf, &mut pos, bytes)?;
    }
    let start = header_before(
        buf,
        MAX_RECORD_HEADER,
        TAG_SNAPSHOT,
        &[],
        pos - MAX_RECORD_HEADER,
    )?;
    Some(start..pos)
}

/// An RSS sample record's fields, in file order.
pub fn rss_fields(r: &RssSample) -> [u64; 2] {
    [r.time_ns, r.rss_bytes]
}

/// A mapping record's fields, in file order (the stack id last, 0 for none).
pub fn mapping_fields(m: &Mapping) -> [u64; 10] {
    [
        u64::from(m.thread),
        m.time_ns,
        m.op as u64,
        m.addr,
        m.len,
        m.old_addr,
        m.old_len,
        u64::from(m.prot),
        u64::from(m.flags),
        u64::from(m.stack),
    ]
}

/// Encodes a meta record (`key`, `value`) into `buf`; returns its length.
pub fn meta_record(buf: &mut [u8], key: &[u8], value: &[u8]) -> Option<usize> {
    let mut klen = [0u8; MAX_VARINT];
    let mut kn = 0;
    put_varint(&mut klen, &mut kn, key.len() as u64)?;
    let payload = kn + key.len() + value.len();
    let mut pos = 0;
    *buf.get_mut(pos)? = TAG_META;
    pos += 1;
    put_varint(buf, &mut pos, payload as u64)?;
    for part in [&klen[..kn], key, value] {
        buf.get_mut(pos..pos + part.len())?.copy_from_slice(part);
        pos += part.len();
    }
    Some(pos)
}

/// Encodes a stack record into `buf` (payload first, then the header in
/// front of it); returns where in `buf` the record lies. Frames are zigzag
/// differences from the previous frame (the first from 0): a stack's return
/// addresses are mostly close to each other.
pub fn stack_record(
    buf: &mut [u8],
    id: u32,
    frames: &[u64],
    truncated: bool,
) -> Option<Range<usize>> {
    let mut pos = MAX_RECORD_HEADER;
    put_varint(buf, &mut pos, u64::from(id))?;
    put_varint(
        buf,
        &mut pos,
        (frames.len() as u64) << 1 | u64::from(truncated),
    )?;
    let mut prev = 0u64;
    for &f in frames {
        put_varint(buf, &mut pos, zigzag(f.wrapping_sub(prev)))?;
        prev = f;
    }
    let start = header_before(
        buf,
        MAX_RECORD_HEADER,
        TAG_STACK,
        &[],
        pos - MAX_RECORD_HEADER,
    )?;
    Some(start..pos)
}

/// The fields of a module record.
pub struct ModuleFields<'a> {
    pub base: u64,
    pub start: u64,
    pub end: u64,
    pub build_id: &'a [u8],
    pub path: &'a [u8],
}

/// Encodes a module record into `buf`; returns where in `buf` it lies.
pub fn module_record(buf: &mut [u8], m: &ModuleFields) -> Option<Range<usize>> {
    let mut pos = MAX_RECORD_HEADER;
    for v in [m.base, m.start, m.end, m.build_id.len() as u64] {
        put_varint(buf, &mut pos, v)?;
    }
    for part in [m.build_id, m.path] {
        buf.get_mut(pos..pos + part.len())?.copy_from_slice(part);
        pos += part.len();
    }
    let start = header_before(
        buf,
        MAX_RECORD_HEADER,
        TAG_MODULE,
        &[],
        pos - MAX_RECORD_HEADER,
    )?;
    Some(start..pos)
}
