//! An aggregate recording's per-stack counters, kept apart per thread: each
//! thread counts its calls into its own tally (in its event buffer, see
//! [`crate::thread`]) with plain loads and stores, never a read-modify-write
//! on a line another thread writes. The tally of a thread that exits is added
//! into the retired one and emptied for the next thread that takes its
//! buffer. A stack's figures are the sums over every tally ([`sum`]), taken
//! for a snapshot and when the segment ends.
//!
//! A stack's share of the process's peak is kept by numbering the peaks (see
//! [`crate::aggregate`]): each tally's counter saves its own live figures at
//! its first change after a new peak, so its share of the latest peak is its
//! saved figures if it changed since, else its live ones; the stack's share
//! is the sum of its counters' shares (live figures add up across tallies).
//! A thread's live figures for a stack may be "negative" (it freed blocks
//! another thread allocated): they wrap, and their sum does not.
//!
//! The fields are atomics so that a snapshot may read another thread's tally
//! while it counts; only the owner writes them (the retired tally: the holder
//! of its lock).

use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use retype_trace::Counters;

use crate::coarse::Clock;
use crate::{stack_table, sys};

/// Stacks counted (ids above are counted as none).
const STACKS: usize = 1 << 18;
/// Counters per chunk, mapped as a thread first counts one of its stacks.
const CHUNK: usize = 1024;
const CHUNKS: usize = STACKS / CHUNK;

/// One stack's counters in one tally.
#[derive(Default)]
#[repr(C)]
pub struct Counter {
    calls: AtomicU64,
    bytes: AtomicU64,
    failed: AtomicU64,
    frees: AtomicU64,
    live_bytes: AtomicU64,
    live_blocks: AtomicU64,
    /// Its live figures at the peak of epoch `epoch`, if it changed since.
    peak_bytes: AtomicU64,
    peak_blocks: AtomicU64,
    epoch: AtomicU64,
    temporary: AtomicU64,
}

/// Adds `v` to a field only its writer changes (a load and a store).
#[inline(always)]
fn add(a: &AtomicU64, v: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl Counter {
    /// Before a change: saves its live figures as its peak figures if it has
    /// not changed since the peak of epoch `epoch`.
    #[inline(always)]
    fn touch(&self, epoch: u64) {
        if get(&self.epoch) != epoch {
            self.peak_bytes
                .store(get(&self.live_bytes), Ordering::Relaxed);
            self.peak_blocks
                .store(get(&self.live_blocks), Ordering::Relaxed);
            self.epoch.store(epoch, Ordering::Relaxed);
        }
    }

    /// An allocation of `size` bytes; `followed`: its block is followed
    /// (else it is never freed, and not counted live).
    #[inline(always)]
    pub fn allocated(&self, epoch: u64, size: u64, followed: bool) {
        self.touch(epoch);
        add(&self.calls, 1);
        add(&self.bytes, size);
        if followed {
            add(&self.live_bytes, size);
            add(&self.live_blocks, 1);
        }
    }

    /// A free of one of the stack's blocks, of `size` bytes.
    #[inline(always)]
    pub fn freed(&self, epoch: u64, size: u64, temporary: bool) {
        self.touch(epoch);
        add(&self.frees, 1);
        add(&self.live_bytes, size.wrapping_neg());
        add(&self.live_blocks, u64::MAX);
        if temporary {
            add(&self.temporary, 1);
        }
    }

    /// An allocating call that returned no block.
    #[inline(always)]
    pub fn failed(&self) {
        add(&self.failed, 1);
    }

    /// Whether it counted a call: every change of its figures counts one
    /// (a call, a free or a failure), so one that did not is all zeros.
    fn counted(&self) -> bool {
        get(&self.calls) | get(&self.frees) | get(&self.failed) != 0
    }

    /// Its figures; its share of the peak of epoch `epoch`.
    fn figures(&self, epoch: u64) -> Counters {
        let changed = get(&self.epoch) == epoch;
        let at_peak = |saved: &AtomicU64, live: &AtomicU64| get(if changed { saved } else { live });
        Counters {
            calls: get(&self.calls),
            bytes: get(&self.bytes),
            failed: get(&self.failed),
            frees: get(&self.frees),
            peak_blocks: at_peak(&self.peak_blocks, &self.live_blocks),
            peak_bytes: at_peak(&self.peak_bytes, &self.live_bytes),
            leaked_blocks: get(&self.live_blocks),
            leaked_bytes: get(&self.live_bytes),
            temporary: get(&self.temporary),
        }
    }

    /// Adds `c` (another tally's figures at epoch `epoch`) into this counter,
    /// whose share of that peak becomes the sum of both.
    fn absorb(&self, c: &Counters, epoch: u64) {
        let mine = self.figures(epoch);
        for (a, v) in [
            (&self.calls, c.calls),
            (&self.bytes, c.bytes),
            (&self.failed, c.failed),
            (&self.frees, c.frees),
            (&self.live_bytes, c.leaked_bytes),
            (&self.live_blocks, c.leaked_blocks),
            (&self.temporary, c.temporary),
        ] {
            add(a, v);
        }
        let peak_bytes = mine.peak_bytes.wrapping_add(c.peak_bytes);
        self.peak_bytes.store(peak_bytes, Ordering::Relaxed);
        let peak_blocks = mine.peak_blocks.wrapping_add(c.peak_blocks);
        self.peak_blocks.store(peak_blocks, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    fn clear(&self) {
        for a in [
            &self.calls,
            &self.bytes,
            &self.failed,
            &self.frees,
            &self.live_bytes,
            &self.live_blocks,
            &self.peak_bytes,
            &self.peak_blocks,
            &self.epoch,
            &self.temporary,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// One thread's counters (or the retired threads'); all zeros is empty.
#[repr(C)]
pub struct Tally {
    /// The next tally in [`LIST`] (set once, as it is listed).
    next: AtomicPtr<Tally>,
    listed: AtomicBool,
    /// The first and last call counted, in clock ticks (0: none yet).
    first: AtomicU64,
    last: AtomicU64,
    /// Bytes its thread freed that the process's live bytes still hold
    /// (see [`Tally::defer`]).
    deferred: AtomicU64,
    /// Chunks of [`CHUNK`] counters, by stack id, mapped on first use.
    chunks: [AtomicPtr<Counter>; CHUNKS],
}

/// Every tally of a thread that counted, listed as it mapped its first chunk
/// (they live in thread buffers, which are never unmapped).
static LIST: AtomicPtr<Tally> = AtomicPtr::new(null_mut());

/// The counts of threads that exited (and of calls made after a thread gave
/// its buffer back), behind [`RETIRED_LOCK`].
static RETIRED: Tally = Tally::empty();
static RETIRED_LOCK: AtomicBool = AtomicBool::new(false);

/// The number of the process's latest peak (see the module's doc).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The latest peak's number.
#[inline(always)]
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::Relaxed)
}

/// The live bytes passed the peak: a new one begins.
pub fn new_peak() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

impl Tally {
    const fn empty() -> Tally {
        Tally {
            next: AtomicPtr::new(null_mut()),
            listed: AtomicBool::new(false),
            first: AtomicU64::new(0),
            last: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
            chunks: [const { AtomicPtr::new(null_mut()) }; CHUNKS],
        }
    }

    /// The counter of stack `stack` (ids past [`STACKS`] share stack 0's);
    /// `None` if its chunk cannot be mapped. Its writer calls this.
    #[inline(always)]
    pub fn counter(&'static self, stack: u32) -> Option<&'static Counter> {
        let id = if (stack as usize) < STACKS {
            stack as usize
        } else {
            0
        };
        let mut chunk = self.chunks[id / CHUNK].load(Ordering::Acquire);
        if chunk.is_null() {
            chunk = self.map_chunk(id / CHUNK);
        }
        // SAFETY: a chunk holds CHUNK zero-initialised counters, never unmapped.
        unsafe { chunk.add(id % CHUNK).as_ref() }
    }

    /// Maps chunk `k`, listing this tally first if it is not yet.
    #[cold]
    fn map_chunk(&'static self, k: usize) -> *mut Counter {
        let chunk = sys::map(CHUNK * std::mem::size_of::<Counter>()).cast::<Counter>();
        if chunk.is_null() {
            return chunk;
        }
        if !self.listed.swap(true, Ordering::AcqRel) && !std::ptr::eq(self, &RETIRED) {
            let me = (self as *const Tally).cast_mut();
            let mut head = LIST.load(Ordering::Acquire);
            loop {
                self.next.store(head, Ordering::Relaxed);
                match LIST.compare_exchange_weak(head, me, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
        }
        self.chunks[k].store(chunk, Ordering::Release);
        chunk
    }

    /// A call was counted, made at the time of its thread's coarse clock
    /// `clock` (read exactly for the first, which makes it a fresh read: see
    /// [`Tally::last_at`]).
    #[inline(always)]
    pub fn called_at(&self, clock: &Clock) {
        if get(&self.first) == 0 {
            self.first.store(clock.exact(), Ordering::Relaxed);
        }
    }

    /// The call being counted read its thread's clock at `ticks`. Calls
    /// between reads share the time of the read before them, so the last
    /// call's time is that of the last read, and is stored only then.
    #[inline(always)]
    pub fn last_at(&self, ticks: u64) {
        self.last.store(ticks, Ordering::Relaxed);
    }

    /// Frees of `bytes` in all, which its thread takes out of the process's
    /// live bytes at its next allocation ([`Tally::take_deferred`]) rather
    /// than now: a free cannot raise the live bytes to a peak, and each
    /// update of them is a locked add on a line every thread writes.
    #[inline(always)]
    pub fn defer(&self, bytes: u64) {
        add(&self.deferred, bytes);
    }

    /// Takes a rise of `bytes` out of the frees [`Tally::defer`] kept, if
    /// they cover it and then `may` (checked only then) says so: the live
    /// bytes then stay or fall, and their shared figure needs no locked add.
    /// Whether it did.
    #[inline(always)]
    pub fn offset(&self, bytes: u64, may: impl FnOnce() -> bool) -> bool {
        let kept = get(&self.deferred);
        if kept < bytes || !may() {
            return false;
        }
        self.deferred.store(kept - bytes, Ordering::Relaxed);
        true
    }

    /// The bytes [`Tally::defer`] kept, which the caller now takes out of
    /// the process's live bytes.
    #[inline(always)]
    pub fn take_deferred(&self) -> u64 {
        let bytes = get(&self.deferred);
        if bytes != 0 {
            self.deferred.store(0, Ordering::Relaxed);
        }
        bytes
    }

    /// Its counters of the stacks in chunk `k`, if it has that chunk.
    fn chunk(&self, k: usize) -> Option<&[Counter]> {
        let chunk = self.chunks[k].load(Ordering::Acquire);
        // SAFETY: as in `counter`.
        (!chunk.is_null()).then(|| unsafe { std::slice::from_raw_parts(chunk, CHUNK) })
    }

    /// Empties it.
    fn clear(&self) {
        for k in 0..CHUNKS {
            for c in self.chunk(k).into_iter().flatten() {
                c.clear();
            }
        }
        self.first.store(0, Ordering::Relaxed);
        self.last.store(0, Ordering::Relaxed);
        self.deferred.store(0, Ordering::Relaxed);
    }
}

/// Holds the retired tally's lock.
struct Retired;

impl Retired {
    fn lock() -> Retired {
        while RETIRED_LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        Retired
    }
}

impl Drop for Retired {
    fn drop(&mut self) {
        RETIRED_LOCK.store(false, Ordering::Release);
    }
}

/// Counts into the retired tally, for a thread that has none left.
pub fn with_retired(count: impl FnOnce(&'static Tally)) {
    let _held = Retired::lock();
    count(&RETIRED);
}

/// A thread with tally `t` exits: its counts move into the retired tally and
/// `t` is left empty for the next thread that takes it.
pub fn retire(t: &Tally) {
    let _held = Retired::lock();
    let epoch = epoch();
    for k in 0..CHUNKS {
        let Some(mine) = t.chunk(k) else { continue };
        for (id, c) in (k * CHUNK..).zip(mine).filter(|(_, c)| c.counted()) {
            let figures = c.figures(epoch);
            if let Some(r) = RETIRED.counter(id as u32) {
                r.absorb(&figures, epoch);
            }
            c.clear();
        }
    }
    let (first, last) = (get(&t.first), get(&t.last));
    if first != 0 && (get(&RETIRED.first) == 0 || first < get(&RETIRED.first)) {
        RETIRED.first.store(first, Ordering::Relaxed);
    }
    RETIRED
        .last
        .store(get(&RETIRED.last).max(last), Ordering::Relaxed);
    t.first.store(0, Ordering::Relaxed);
    t.last.store(0, Ordering::Relaxed);
    RETIRED.defer(t.take_deferred());
}

/// Every tally, the retired one first.
fn all() -> impl Iterator<Item = &'static Tally> {
    let mut t = LIST.load(Ordering::Acquire);
    std::iter::once(&RETIRED).chain(std::iter::from_fn(move || {
        // SAFETY: listed tallies live in buffers that are never unmapped.
        let cur = unsafe { t.as_ref() }?;
        t = cur.next.load(Ordering::Acquire);
        Some(cur)
    }))
}

/// Calls `each` with every stack counted (its id and its figures summed over
/// every tally, with their shares of the latest peak), in id order. Takes no
/// lock (it runs in signal handlers too): a thread that exits meanwhile may
/// be counted twice or not at all, as with any moment read across threads.
pub fn sum(mut each: impl FnMut(u32, &Counters)) {
    let epoch = epoch();
    // Every id given so far (a tally keeps no highest id of its own: a
    // check on every call).
    let last = (stack_table::last_id() as usize).min(STACKS - 1);
    for id in 0..=last {
        let mut s = Counters::default();
        for c in all()
            .filter_map(|t| t.chunk(id / CHUNK))
            .map(|chunk| &chunk[id % CHUNK])
            .filter(|c| c.counted())
        {
            let f = c.figures(epoch);
            s.calls = s.calls.wrapping_add(f.calls);
            s.bytes = s.bytes.wrapping_add(f.bytes);
            s.failed = s.failed.wrapping_add(f.failed);
            s.frees = s.frees.wrapping_add(f.frees);
            s.peak_blocks = s.peak_blocks.wrapping_add(f.peak_blocks);
            s.peak_bytes = s.peak_bytes.wrapping_add(f.peak_bytes);
            s.leaked_blocks = s.leaked_blocks.wrapping_add(f.leaked_blocks);
            s.leaked_bytes = s.leaked_bytes.wrapping_add(f.leaked_bytes);
            s.temporary = s.temporary.wrapping_add(f.temporary);
        }
        if s != Counters::default() {
            each(id as u32, &s);
        }
    }
}

/// The bytes freed that the process's live bytes still hold, over every
/// tally ([`Tally::defer`]); without a lock, as [`sum`].
pub fn deferred() -> u64 {
    all().map(|t| get(&t.deferred)).fold(0, u64::wrapping_add)
}

/// The first and last call counted, over every tally, in clock ticks (0:
/// none); without a lock, as [`sum`].
pub fn span() -> (u64, u64) {
    all().fold((0, 0), |(first, last), t| {
        let f = get(&t.first);
        let first = if f != 0 && (first == 0 || f < first) {
            f
        } else {
            first
        };
        (first, last.max(get(&t.last)))
    })
}

/// A segment begins: every tally empty, the peaks numbered afresh.
/// `forked`: in a fork child, whose other threads (perhaps holding the
/// retired tally's lock) are gone.
pub fn clear(forked: bool) {
    if forked {
        RETIRED_LOCK.store(false, Ordering::Release);
    }
    let _held = Retired::lock();
    for t in all() {
        t.clear();
    }
    EPOCH.store(0, Ordering::Relaxed);
}
