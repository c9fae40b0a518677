//! The transfer cache, as tcmalloc's: a thread's full batch of frees into another heap's page
//! (see `remote`) goes into a shared queue of its class, from which any heap that would
//! otherwise claim a page of the class takes a batch (see `heap::refill`). The blocks stay
//! counted as used by their page meanwhile, so no page changes owner and their later free is a
//! remote free to the page's owner as any other.
//!
//! Why: where threads free what others allocated, each freed block waits for its page's owner
//! to collect it, and an owner that does not run (blocked, or descheduled on few cores)
//! collects nothing; meanwhile the threads that run claim new pages. `xmalloc 8 64 500` (16
//! threads on 2 cores) held 40 MiB carved at its peak for 8 MiB live: each producer's heap
//! kept what its largest burst claimed, its blocks freed and waiting on its remote lists while
//! the other producers ran. With the cache the blocks go to whichever producer runs.
//!
//! Bounded in bytes and in time, so that no page stays pinned by it (a page cannot empty
//! while a block of it waits here): a queue, oldest first, at most [`LIMIT`] bytes in all
//! queues together; a batch that comes to a full cache sends its class's oldest home (to its
//! page's remote list, as without the cache), and a batch that waited a purge delay
//! (`RETYPE_MALLOC_PURGE_DELAY`) goes home at the next push or page claim (see
//! [`expire_if_due`]), and every batch at `malloc_trim` (see [`Cache::drain`]). A heap takes
//! the oldest batch, so none waits long where heaps take them.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::config;
use crate::lock::SpinLock;
use crate::page::Block;
use crate::size_class::{self, CLASSES};

/// Bytes of blocks the queues hold together at most: `xmalloc 8 64 500` peaked at 39.3 and
/// 36.5 MiB with 2 MiB (one class in use), 17.7-18.6 with 4 and 14.4-15.4 with 8.
pub(crate) const LIMIT: usize = 8 << 20;

/// The fewest blocks a batch in a queue has: its first three blocks hold the queue's words.
pub(crate) const MIN_BATCH: u32 = 3;

/// A batch: blocks linked by their first word from `first` to `last` (whose link is null).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    pub first: *mut Block,
    pub last: *mut Block,
    pub len: u32,
}

/// A class's batches, oldest first, linked through the blocks themselves: the second word of
/// a batch's first block links the next batch's first block, with the batch's length in its
/// top 16 bits; the second word of its second block is its last block, and of its third the
/// time it came (kept in `head_at` too for the oldest, which pushes look at).
struct Queue {
    head: *mut Block,
    tail: *mut Block,
    head_at: u64,
}

/// Bits of a user-space address: the length of a batch goes above them.
const ADDRESS_BITS: u32 = 48;

/// The second word of `b`, a block of at least two words.
unsafe fn word(b: *mut Block) -> *mut usize {
    // SAFETY: the caller's block is at least two words long.
    unsafe { b.cast::<usize>().add(1) }
}

impl Queue {
    const EMPTY: Queue = Queue {
        head: ptr::null_mut(),
        tail: ptr::null_mut(),
        head_at: 0,
    };

    fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Appends `b` (of at least [`MIN_BATCH`] blocks of two words or more, given up by the
    /// caller), which came at `now`.
    unsafe fn push_back(&mut self, b: Batch, now: u64) {
        debug_assert!(b.len >= MIN_BATCH && b.len < 1 << (64 - ADDRESS_BITS));
        // SAFETY: the batch's first three blocks are the caller's, linked from `first`.
        unsafe {
            *word(b.first) = (b.len as usize) << ADDRESS_BITS;
            let second = (*b.first).next;
            *word(second) = b.last as usize;
            *word((*second).next) = now as usize;
            if self.tail.is_null() {
                self.head = b.first;
                self.head_at = now;
            } else {
                *word(self.tail) |= b.first as usize;
            }
        }
        self.tail = b.first;
    }

    /// The time the oldest batch came, if any.
    fn front_at(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.head_at)
    }

    /// Takes the oldest batch.
    fn pop_front(&mut self) -> Option<Batch> {
        if self.is_empty() {
            return None;
        }
        let first = self.head;
        // SAFETY: as in `front_at`.
        unsafe {
            let w = *word(first);
            self.head = (w & ((1 << ADDRESS_BITS) - 1)) as *mut Block;
            if self.head.is_null() {
                self.tail = ptr::null_mut();
            } else {
                self.head_at = *word((*(*self.head).next).next) as u64;
            }
            Some(Batch {
                first,
                last: *word((*first).next) as *mut Block,
                len: (w >> ADDRESS_BITS) as u32,
            })
        }
    }
}

/// A class's queue and whether it holds a batch (read without the lock).
struct Class {
    queue: SpinLock<Queue>,
    full: AtomicBool,
}

// SAFETY: the queue's blocks are given up to it; they move between threads under its lock.
unsafe impl Send for Queue {}

/// The queues of every class, bounded to `limit` bytes together.
pub(crate) struct Cache {
    classes: [Class; CLASSES],
    limit: usize,
    /// Bytes in all queues.
    bytes: AtomicUsize,
    /// When the oldest batch of some queue is due home (ms of `os::now_ms`), or `u64::MAX`
    /// when none waits; may be early (a batch taken meanwhile), late only when a push races
    /// [`Cache::expire`] (then until the next expiry).
    next_expire: AtomicU64,
}

/// The process's transfer cache.
pub(crate) static CACHE: Cache = Cache::new(LIMIT);

fn bytes_of(class: usize, b: &Batch) -> usize {
    b.len as usize * size_class::block_size(class)
}

/// The most batches one push sends home for their age (more go at the next).
const EXPIRE_PER_PUSH: usize = 4;

impl Cache {
    pub(crate) const fn new(limit: usize) -> Cache {
        Cache {
            classes: [const {
                Class {
                    queue: SpinLock::new(Queue::EMPTY),
                    full: AtomicBool::new(false),
                }
            }; CLASSES],
            limit,
            bytes: AtomicUsize::new(0),
            next_expire: AtomicU64::new(u64::MAX),
        }
    }

    /// Queues `b`, a full batch of freed blocks of `class` (at least [`MIN_BATCH`] blocks),
    /// given up by the caller, at `now`; sends home (calls `home` on) the class's oldest
    /// batches while the cache is full or they waited `delay` ms, and `b` itself if the cache
    /// stays full, then the other classes' batches due home.
    pub(crate) unsafe fn push(
        &self,
        class: usize,
        b: Batch,
        now: u64,
        delay: u64,
        mut home: impl FnMut(Batch),
    ) {
        let size = size_class::block_size(class);
        let bytes = b.len as usize * size;
        let due = now.saturating_sub(delay);
        // The class's batches sent home, in the order they leave.
        let mut gone = Queue::EMPTY;
        let c = &self.classes[class];
        let kept = {
            let mut q = c.queue.lock();
            for _ in 0..=EXPIRE_PER_PUSH {
                let over = self.bytes.load(Ordering::Relaxed) + bytes > self.limit;
                if !over && q.front_at().is_none_or(|at| at > due) {
                    break;
                }
                let Some(old) = q.pop_front() else { break };
                self.bytes
                    .fetch_sub(old.len as usize * size, Ordering::Relaxed);
                // SAFETY: the batch left the queue; its blocks are the cache's until sent.
                unsafe { gone.push_back(old, 0) };
            }
            let kept = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes <= self.limit;
            if kept {
                if q.is_empty() {
                    self.next_expire
                        .fetch_min(now.saturating_add(delay), Ordering::Relaxed);
                }
                // SAFETY: the caller gives the batch up.
                unsafe { q.push_back(b, now) };
            } else {
                self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
            c.full.store(!q.is_empty(), Ordering::Relaxed);
            kept
        };
        while let Some(old) = gone.pop_front() {
            home(old);
        }
        if !kept {
            home(b);
        }
        self.expire_due(now, delay, home);
    }

    /// Takes the oldest batch of `class`, if any.
    pub(crate) fn pop(&self, class: usize) -> Option<Batch> {
        let c = &self.classes[class];
        if !c.full.load(Ordering::Relaxed) {
            return None;
        }
        let mut q = c.queue.lock();
        let b = q.pop_front()?;
        c.full.store(!q.is_empty(), Ordering::Relaxed);
        self.bytes.fetch_sub(bytes_of(class, &b), Ordering::Relaxed);
        Some(b)
    }

    /// Sends home every batch that waited `delay` ms at `now`, if one is due.
    pub(crate) fn expire_due(&self, now: u64, delay: u64, home: impl FnMut(Batch)) {
        if now >= self.next_expire.load(Ordering::Relaxed) {
            self.expire(now.saturating_sub(delay), delay, home);
        }
    }

    /// Sends home the batches that came at `due` or before.
    fn expire(&self, due: u64, delay: u64, mut home: impl FnMut(Batch)) {
        self.next_expire.store(u64::MAX, Ordering::Relaxed);
        for (class, c) in self.classes.iter().enumerate() {
            while c.full.load(Ordering::Relaxed) {
                let b = {
                    let mut q = c.queue.lock();
                    let b = match q.front_at() {
                        Some(at) if at <= due => q.pop_front(),
                        Some(at) => {
                            self.next_expire
                                .fetch_min(at.saturating_add(delay), Ordering::Relaxed);
                            None
                        }
                        None => None,
                    };
                    c.full.store(!q.is_empty(), Ordering::Relaxed);
                    b
                };
                let Some(b) = b else { break };
                self.bytes.fetch_sub(bytes_of(class, &b), Ordering::Relaxed);
                home(b);
            }
        }
    }

    /// Bytes in all queues.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Sends every batch home.
    pub(crate) fn drain(&self, home: impl FnMut(Batch)) {
        if self.bytes() != 0 {
            self.expire(u64::MAX, 0, home);
        }
    }

    /// Takes every queue's lock (before a fork, see `global`).
    pub(crate) fn acquire_all(&self) {
        self.classes.iter().for_each(|c| c.queue.acquire());
    }

    /// Releases the locks [`Cache::acquire_all`] took (after a fork, in the parent and the
    /// child).
    pub(crate) fn release_all(&self) {
        self.classes.iter().for_each(|c| c.queue.release());
    }
}

fn delay() -> u64 {
    config::PURGE_DELAY_MS.load(Ordering::Relaxed)
}

/// [`Cache::push`] into the process's cache, with the purge delay (`RETYPE_MALLOC_PURGE_DELAY`).
pub(crate) unsafe fn push(class: usize, b: Batch, now: u64, home: impl FnMut(Batch)) {
    // SAFETY: as the caller's.
    unsafe { CACHE.push(class, b, now, delay(), home) }
}

/// Sends home every batch that waited a purge delay, if one is due (reads the clock only
/// while a batch waits): a heap about to claim a page calls it, so that batches of classes
/// no longer freed do not wait for the next push.
pub(crate) fn expire_if_due(home: impl FnMut(Batch)) {
    if CACHE.next_expire.load(Ordering::Relaxed) != u64::MAX {
        CACHE.expire_due(crate::os::now_ms(), delay(), home);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    impl Cache {
        /// Batches of `class` waiting.
        pub(crate) fn batches(&self, class: usize) -> usize {
            let q = self.classes[class].queue.lock();
            let mut n = 0;
            let mut b = q.head;
            while !b.is_null() {
                n += 1;
                // SAFETY: as in `Queue::pop_front`.
                b = (unsafe { *word(b) } & ((1 << ADDRESS_BITS) - 1)) as *mut Block;
            }
            n
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push { class: usize, len: u32, wait: u64 },
        Pop { class: usize },
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..4, MIN_BATCH..=64, 0u64..40)
                .prop_map(|(class, len, wait)| Op::Push { class, len, wait }),
            2 => (0usize..4).prop_map(|class| Op::Pop { class }),
            1 => Just(Op::Drain),
        ]
    }

    /// The blocks of a batch, two words each, linked in order; the batch's id is its index.
    fn make(len: u32) -> (Vec<[usize; 2]>, Batch) {
        let mut blocks = vec![[0usize; 2]; len as usize];
        let base = blocks.as_mut_ptr();
        for i in 0..len as usize {
            // SAFETY: within `blocks`; the links stay inside it.
            unsafe {
                (*base.add(i))[0] = if i + 1 < len as usize {
                    base.add(i + 1) as usize
                } else {
                    0
                };
            }
        }
        let first = base.cast::<Block>();
        // SAFETY: within `blocks`.
        let last = unsafe { base.add(len as usize - 1) }.cast::<Block>();
        (blocks, Batch { first, last, len })
    }

    /// A batch comes back as it went in: its blocks still linked from `first` to `last`.
    fn intact(b: &Batch) -> bool {
        let mut p = b.first;
        for _ in 1..b.len {
            // SAFETY: the test's blocks, linked by `make`.
            p = unsafe { (*p).next };
        }
        // SAFETY: as above.
        p == b.last && unsafe { (*p).next }.is_null()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Against a model (per class a queue of (batch, time), oldest first): a push sends home
        /// the class's oldest batches while the cache would pass its limit or they waited the
        /// delay (at most `EXPIRE_PER_PUSH` + 1), the batch itself if the cache stays full,
        /// then every batch of any class that waited the delay; a pop takes the oldest; a
        /// drain sends all home; the bytes held are the model's and never above the limit.
        #[test]
        fn the_cache_follows_its_model(
            ops in proptest::collection::vec(op(), 1..200),
            limit_batches in 0usize..12,
            delay in 0u64..60,
        ) {
            let sizes = [16usize, 64, 720, 4096];
            let classes = sizes.map(size_class::class_of);
            let limit = limit_batches * 64 * 720;
            let cache = Cache::new(limit);
            let mut model: Vec<VecDeque<(usize, u64)>> = vec![VecDeque::new(); 4];
            let mut model_bytes = 0usize;
            let mut store: Vec<(Vec<[usize; 2]>, Batch, usize)> = Vec::new();
            let bytes = |store: &Vec<(Vec<[usize; 2]>, Batch, usize)>, id: usize| {
                store[id].1.len as usize * size_class::block_size(classes[store[id].2])
            };
            let id_of = |store: &Vec<(Vec<[usize; 2]>, Batch, usize)>, b: &Batch| {
                store.iter().position(|s| s.1 == *b).expect("a batch of the test")
            };
            let mut now = 1000u64;
            for op in ops {
                let mut sent = Vec::new();
                let mut expect = Vec::new();
                match op {
                    Op::Push { class, len, wait } => {
                        now += wait;
                        let (blocks, b) = make(len);
                        store.push((blocks, b, class));
                        let id = store.len() - 1;
                        let due = now.saturating_sub(delay);
                        let size = bytes(&store, id);
                        for _ in 0..=EXPIRE_PER_PUSH {
                            let over = model_bytes + size > limit;
                            match model[class].front() {
                                Some(&(old, at)) if over || at <= due => {
                                    model[class].pop_front();
                                    model_bytes -= bytes(&store, old);
                                    expect.push(old);
                                }
                                _ => break,
                            }
                        }
                        if model_bytes + size <= limit {
                            model[class].push_back((id, now));
                            model_bytes += size;
                        } else {
                            expect.push(id);
                        }
                        for q in model.iter_mut() {
                            while let Some(&(old, _)) = q.front().filter(|f| f.1 <= due) {
                                q.pop_front();
                                model_bytes -= bytes(&store, old);
                                expect.push(old);
                            }
                        }
                        // SAFETY: the batch's blocks live in `store` until the test ends.
                        unsafe { cache.push(classes[class], b, now, delay, |b| sent.push(b)) };
                    }
                    Op::Pop { class } => {
                        let want = model[class].pop_front().map(|(id, _)| id);
                        if let Some(id) = want {
                            model_bytes -= bytes(&store, id);
                        }
                        let got = cache.pop(classes[class]);
                        prop_assert_eq!(got.map(|b| id_of(&store, &b)), want);
                        if let Some(b) = got {
                            prop_assert!(intact(&b));
                        }
                    }
                    Op::Drain => {
                        for q in model.iter_mut() {
                            for (id, _) in q.drain(..) {
                                model_bytes -= bytes(&store, id);
                                expect.push(id);
                            }
                        }
                        cache.drain(|b| sent.push(b));
                    }
                }
                // Home in class order, as the cache's classes run (the sizes are in order).
                let got: Vec<usize> = sent.iter().map(|b| id_of(&store, b)).collect();
                prop_assert_eq!(got, expect);
                prop_assert!(sent.iter().all(intact));
                prop_assert_eq!(cache.bytes(), model_bytes);
                prop_assert!(model_bytes <= limit);
                for (i, q) in model.iter().enumerate() {
                    prop_assert_eq!(cache.batches(classes[i]), q.len());
                }
            }
        }
    }
}
