//! Per-thread event buffers.
//!
//! Each thread appends to its own buffer, mmap'd on its first event (TLS holds
//! only a pointer) and given back when the thread exits. The hook only copies
//! the event, fixed-size, into the buffer's pending array; when that fills,
//! the whole batch is encoded (varints, deltas) into the record payload in one
//! tight loop, away from the program's malloc calls, and the payload is
//! written out as one events record when it fills. All buffers are linked in
//! a registry that is never shrunk, so that process exit, exec and fork can
//! reach every thread's buffer. A buffer whose thread exited is reused by the
//! next new thread.
//!
//! Exclusion without an atomic read-modify-write per event: another thread
//! writes a buffer out only when a segment ends (exit, exec, fatal signal). The
//! owner marks itself `active` with a plain store and then checks [`DRAINERS`];
//! a drainer counts itself in [`DRAINERS`] and then runs `membarrier`, which
//! puts a full memory barrier into every running thread of the process. So
//! either the owner sees the drainer and takes the buffer's lock instead, or
//! the drainer sees the owner `active` and waits until it is done (an
//! asymmetric Dekker handshake). Where membarrier is not available, owners
//! always take the lock.

use std::mem::MaybeUninit;
use std::ptr::null_mut;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use retype_trace::codec::{self, DeltaState, MAX_EVENTS_HEADER, MAX_EVENT_LEN};
use retype_trace::Event;

use super::cost;
use crate::stacks::ThreadStack;
use crate::tally::{self, Tally};
use crate::{aggregate, output, stack_table, sys};

/// Event payload bytes gathered before a buffer is written.
const CAPACITY: usize = 128 * 1024;
/// Events held unencoded before they are encoded into the payload.
const PENDING: usize = 256;

#[repr(C)]
pub struct ThreadBuf {
    /// Held while anyone but an owner on the fast path uses the buffer.
    lock: AtomicBool,
    /// The owner appends on the fast path (without the lock).
    active: AtomicBool,
    /// Tid of the owning thread; 0 when free for reuse.
    owner: AtomicU32,
    /// Next buffer in the registry (set before the buffer is published).
    next: *mut ThreadBuf,
    /// Thread of the buffered events.
    pub tid: u32,
    /// Where its thread's last allocation is kept ([`aggregate::slot`]
    /// of `tid`, worked out once rather than at every allocation).
    pub count_at: u32,
    /// When the owning thread started, in ns on CLOCK_MONOTONIC.
    pub start_ns: u64,
    /// The owner's call-stack unwinding state.
    stack: ThreadStack,
    /// The owner's counters in an aggregate recording.
    tally: Tally,
    /// Events recorded in this buffer since the segment began (written or not).
    events: u64,
    /// Events appended and not yet encoded: `pending[..waiting]`.
    waiting: usize,
    pending: [MaybeUninit<Event>; PENDING],
    len: usize,
    base_time: u64,
    delta: DeltaState,
    /// `MAX_EVENTS_HEADER` bytes of room for the record header, then the payload.
    data: [u8; MAX_EVENTS_HEADER + CAPACITY + MAX_EVENT_LEN],
}

static REGISTRY: AtomicPtr<ThreadBuf> = AtomicPtr::new(null_mut());

/// Threads now writing buffers out, plus 1 while membarrier is not registered:
/// owners append without the lock only while it is 0.
static DRAINERS: AtomicU32 = AtomicU32::new(1);

/// Lets owners append without the lock from now on, if this process can use
/// membarrier (once per program image, and again in a fork child, whose
/// registration is not inherited; both have one thread then).
pub fn enable_fast_path() {
    DRAINERS.store(u32::from(!sys::membarrier_register()), Ordering::SeqCst);
}

/// Events written one by one after their thread's buffer was released.
static STRAY_EVENTS: AtomicU64 = AtomicU64::new(0);

/// Appends the event `event` makes to buffer `b` (its `thread` field is
/// ignored; it is built in place). Its time and latency are in clock ticks
/// ([`sys::ticks`]): they become ns when the batch is encoded.
///
/// # Safety
/// `b` is the calling thread's buffer ([`take`]n and not yet released).
#[inline(always)]
pub unsafe fn append(b: *mut ThreadBuf, event: impl FnOnce() -> Event) {
    // SAFETY: `b` is this thread's live buffer. On the fast path a drainer
    // waits until `active` is false again; else the lock makes access exclusive.
    unsafe {
        let active = &(*b).active;
        active.store(true, Ordering::Relaxed);
        // The drainer's membarrier orders this store before the load below.
        compiler_fence(Ordering::SeqCst);
        if DRAINERS.load(Ordering::Relaxed) == 0 {
            (*b).push(event);
            active.store(false, Ordering::Release);
        } else {
            active.store(false, Ordering::Release);
            lock(b);
            (*b).push(event);
            unlock(b);
        }
    }
}

/// Writes one event as its own record: for the few calls a thread makes
/// after its buffer was released at thread exit (glibc's own thread cleanup).
pub fn write_stray(e: &Event) {
    let e = &in_ns(e, sys::TickScale::now());
    let mut rec = [0u8; MAX_EVENTS_HEADER + MAX_EVENT_LEN];
    let mut pos = MAX_EVENTS_HEADER;
    let mut delta = DeltaState::new(e.time_ns);
    if delta.encode(&mut rec, &mut pos, e).is_none() {
        return;
    }
    let fields = [u64::from(sys::gettid()), e.time_ns];
    let len = pos - MAX_EVENTS_HEADER;
    if let Some(start) =
        codec::header_before(&mut rec, MAX_EVENTS_HEADER, codec::TAG_EVENTS, &fields, len)
    {
        STRAY_EVENTS.fetch_add(1, Ordering::Relaxed);
        stack_table::flush(false);
        output::write(&rec[start..pos]);
    }
}

/// `e` with its time and latency turned from clock ticks into ns (a latency
/// of 0 ticks was not measured, and stays 0).
#[inline(always)]
fn in_ns(e: &Event, scale: sys::TickScale) -> Event {
    Event {
        time_ns: scale.time_ns(e.time_ns),
        latency_ns: if e.latency_ns == 0 {
            0
        } else {
            scale.latency_ns(e.latency_ns)
        },
        ..*e
    }
}

/// A buffer for the calling thread: a free one from the registry, or a new
/// one; null if none could be mapped.
#[cold]
pub fn take() -> *mut ThreadBuf {
    let tid = sys::gettid();
    let b = reuse(tid).unwrap_or_else(|| create(tid));
    if !b.is_null() {
        // SAFETY: we own `b` now (owner = tid).
        unsafe {
            (*b).tid = tid;
            (*b).count_at = aggregate::slot(tid) as u32;
            (*b).start_ns = cost::start_ns(tid);
            (*b).stack.begin();
        }
    }
    b
}

/// Takes a free buffer from the registry.
fn reuse(tid: u32) -> Option<*mut ThreadBuf> {
    let mut b = REGISTRY.load(Ordering::Acquire);
    while !b.is_null() {
        // SAFETY: registry buffers are never unmapped.
        let buf = unsafe { &*b };
        if buf
            .owner
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Some(b);
        }
        b = buf.next;
    }
    None
}

/// Maps a new buffer and publishes it in the registry.
fn create(tid: u32) -> *mut ThreadBuf {
    let size = std::mem::size_of::<ThreadBuf>();
    // SAFETY: an anonymous private mapping; zeroed memory is a valid empty ThreadBuf.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return null_mut();
    }
    let b = p.cast::<ThreadBuf>();
    // SAFETY: `b` is fresh and unpublished.
    unsafe { (*b).owner.store(tid, Ordering::Relaxed) };
    let mut head = REGISTRY.load(Ordering::Acquire);
    loop {
        // SAFETY: unpublished until the exchange succeeds.
        unsafe { (*b).next = head };
        match REGISTRY.compare_exchange_weak(head, b, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return b,
            Err(h) => head = h,
        }
    }
}

impl ThreadBuf {
    /// The owner's unwinding state (only its owner touches it: drainers
    /// write events out, never this field).
    pub fn stack(&mut self) -> &mut ThreadStack {
        &mut self.stack
    }

    /// The owner's counters (others read them; see [`tally`]).
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Appends the event `event` makes to the batch (the caller has the buffer).
    #[inline(always)]
    fn push(&mut self, event: impl FnOnce() -> Event) {
        if self.waiting == PENDING {
            self.encode_pending(false);
        }
        // SAFETY: `waiting` < PENDING here (it never exceeds PENDING and was
        // just emptied if equal).
        unsafe { self.pending.get_unchecked_mut(self.waiting) }.write(event());
        self.waiting += 1;
    }

    /// Encodes the pending events into the payload, writing the payload out
    /// whenever it fills. `in_signal`: see [`ThreadBuf::write_payload`].
    fn encode_pending(&mut self, in_signal: bool) {
        let scale = sys::TickScale::now();
        let mut next = 0;
        while next < self.waiting {
            if self.len >= CAPACITY {
                self.write_payload(in_signal);
            }
            next = self.encode_some(next, scale);
        }
        self.waiting = 0;
    }

    /// Encodes pending events from `from` on until the payload is full;
    /// returns the first one not encoded. The state lives in locals for the
    /// loop (stores into `data` could otherwise alias the fields).
    fn encode_some(&mut self, from: usize, scale: sys::TickScale) -> usize {
        let end = MAX_EVENTS_HEADER + CAPACITY;
        let mut pos = MAX_EVENTS_HEADER + self.len;
        let mut delta = self.delta;
        let mut encoded = 0;
        let mut next = from;
        for slot in &self.pending[from..self.waiting] {
            if pos >= end {
                break;
            }
            // SAFETY: `pending[..waiting]` were written by `append`.
            let e = in_ns(unsafe { slot.assume_init_ref() }, scale);
            if pos == MAX_EVENTS_HEADER {
                self.base_time = e.time_ns;
                delta = DeltaState::new(e.time_ns);
            }
            // The payload keeps MAX_EVENT_LEN bytes of room past CAPACITY, so
            // this succeeds; an event that did not fit would be dropped.
            if delta.encode(&mut self.data, &mut pos, &e).is_some() {
                encoded += 1;
            }
            next += 1;
        }
        self.delta = delta;
        self.len = pos - MAX_EVENTS_HEADER;
        self.events += encoded;
        next
    }

    /// Writes every buffered event out.
    fn write_out(&mut self, in_signal: bool) {
        self.encode_pending(in_signal);
        self.write_payload(in_signal);
    }

    /// Writes the encoded events as one events record, after the stack
    /// records not yet written (an event's stack must come first; in a
    /// signal handler the stacks' lock is tried a bounded number of times).
    fn write_payload(&mut self, in_signal: bool) {
        if self.len == 0 {
            return;
        }
        stack_table::flush(in_signal);
        let fields = [u64::from(self.tid), self.base_time];
        if let Some(start) = codec::header_before(
            &mut self.data,
            MAX_EVENTS_HEADER,
            codec::TAG_EVENTS,
            &fields,
            self.len,
        ) {
            output::write(&self.data[start..MAX_EVENTS_HEADER + self.len]);
        }
        self.len = 0;
    }
}

/// Spins until `b`'s lock is taken.
///
/// # Safety
/// `b` must be a registry buffer.
unsafe fn lock(b: *mut ThreadBuf) {
    // SAFETY: per the contract.
    let l = unsafe { &(*b).lock };
    while l
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

/// Tries `b`'s lock a bounded number of times (for signal handlers, which may
/// have interrupted the holder on this very thread).
unsafe fn try_lock(b: *mut ThreadBuf) -> bool {
    // SAFETY: `b` is a registry buffer.
    let l = unsafe { &(*b).lock };
    (0..100_000).any(|_| {
        std::hint::spin_loop();
        l.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    })
}

/// Waits until `b`'s owner has left the fast path; with `bounded`, gives up
/// after a while (a signal handler may have interrupted the owner itself).
unsafe fn wait_inactive(b: *mut ThreadBuf, bounded: bool) -> bool {
    // SAFETY: `b` is a registry buffer.
    let active = unsafe { &(*b).active };
    let mut spins = 0u32;
    while active.load(Ordering::Acquire) {
        if bounded && spins == 100_000 {
            return false;
        }
        spins += 1;
        std::hint::spin_loop();
    }
    true
}

unsafe fn unlock(b: *mut ThreadBuf) {
    // SAFETY: `b` is a registry buffer whose lock we hold.
    unsafe { (*b).lock.store(false, Ordering::Release) };
}

/// Called in the thread that owns `b` as it exits: writes its events, then
/// the thread summary record, retires its counters, and frees the buffer for reuse.
///
/// # Safety
/// `b` is the calling thread's buffer, which it uses no more.
pub unsafe fn release(b: *mut ThreadBuf, summary: &[u8]) {
    // SAFETY: per the contract.
    unsafe {
        lock(b);
        (*b).write_out(false);
        output::write(summary);
        tally::retire(&(*b).tally);
        (*b).owner.store(0, Ordering::Release);
        unlock(b);
    }
}

/// Writes out every buffer and returns the number of events of the segment,
/// resetting the counts for the next one. With `in_signal`, a buffer whose
/// lock is held (perhaps by the interrupted code) is skipped with its events.
/// `each_live_thread` sees the tid and start of every buffer still owned.
pub fn drain(in_signal: bool, mut each_live_thread: impl FnMut(u32, u64)) -> u64 {
    DRAINERS.fetch_add(1, Ordering::SeqCst);
    // Every owner now either sees DRAINERS and locks, or shows `active`.
    sys::membarrier();
    let mut total = STRAY_EVENTS.swap(0, Ordering::Relaxed);
    let mut b = REGISTRY.load(Ordering::Acquire);
    while !b.is_null() {
        // SAFETY: registry buffers are never unmapped; the lock makes access exclusive.
        unsafe {
            let next = (*b).next;
            if in_signal {
                if !try_lock(b) {
                    b = next;
                    continue;
                }
            } else {
                lock(b);
            }
            if !wait_inactive(b, in_signal) {
                unlock(b);
                b = next;
                continue;
            }
            let buf = &mut *b;
            buf.write_out(in_signal);
            total += buf.events;
            buf.events = 0;
            total += STRAY_EVENTS.swap(0, Ordering::Relaxed);
            let owner = buf.owner.load(Ordering::Acquire);
            if owner != 0 {
                each_live_thread(owner, buf.start_ns);
            }
            unlock(b);
            b = next;
        }
    }
    DRAINERS.fetch_sub(1, Ordering::SeqCst);
    total
}

/// In a fork child: the buffered events belong to the parent, which writes
/// them; other threads do not exist here. Empties every buffer, releases
/// every lock and frees every buffer but `me`, this thread's (null if none).
pub fn after_fork_child(me: *mut ThreadBuf) {
    let mut b = REGISTRY.load(Ordering::Acquire);
    while !b.is_null() {
        // SAFETY: the child has one thread; nobody else touches the buffers.
        unsafe {
            let buf = &mut *b;
            buf.len = 0;
            buf.waiting = 0;
            buf.events = 0;
            buf.lock.store(false, Ordering::Release);
            buf.active.store(false, Ordering::Release);
            if b == me {
                buf.tid = sys::gettid();
                buf.start_ns = cost::start_ns(buf.tid);
                buf.owner.store(buf.tid, Ordering::Release);
            } else {
                buf.owner.store(0, Ordering::Release);
            }
            b = buf.next;
        }
    }
    enable_fast_path();
}
