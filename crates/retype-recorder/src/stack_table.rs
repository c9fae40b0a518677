//! Each distinct call stack once per segment: a lock-free hash table from a
//! stack's frames to its id, shared by all threads, in memory the recorder
//! maps itself.
//!
//! A stack seen for the first time gets the next id and its stack record is
//! appended to one pending buffer, which is written out before any events are
//! (see [`flush`]): so a stack's record always precedes, in the file, every
//! events record that names it, whichever thread recorded them. Ids only
//! grow within a process; a new segment (a failed exec) or a fork child's
//! file moves the table to a new generation, so that every stack is written
//! again before it is named there.
//!
//! When the table or its frame store is full, further new stacks are not
//! kept (their events name none) and the segment ends with a meta record
//! `stacks_dropped` that counts them.

use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use retype_trace::codec;

use crate::settings::MAX_STACK_DEPTH;
use crate::{output, sys};

/// Slots of the hash table (a power of two); it takes at most 3/4 of them.
const SLOTS: usize = 1 << 18;
/// Frames the store holds, all stacks together.
const FRAMES: usize = 1 << 24;
/// Bytes of stack records gathered before they are written.
const PENDING: usize = 64 * 1024;

#[repr(C)]
struct Slot {
    /// The stack's hash mixed with the table's generation; 0: empty.
    key: AtomicU64,
    /// Where its frames are in the store (`at << 8 | len`).
    place: AtomicU64,
    /// Its id, 0 until the slot is complete.
    id: AtomicU32,
}

struct Table {
    slots: *mut Slot,
    frames: *mut u64,
}

/// The table, mapped on first use.
static TABLE: AtomicPtr<Slot> = AtomicPtr::new(null_mut());
static STORE: AtomicPtr<u64> = AtomicPtr::new(null_mut());
static MAPPING: AtomicBool = AtomicBool::new(false);
/// Slots taken and frames stored.
static USED: AtomicU32 = AtomicU32::new(0);
static STORED: AtomicU64 = AtomicU64::new(0);
/// The generation keys are mixed with.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// The last id given.
static LAST_ID: AtomicU32 = AtomicU32::new(0);
/// New stacks not kept because the table was full, this segment.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Stack records not yet written, behind a spin lock.
struct Pending {
    lock: AtomicBool,
    len: UnsafeCell<usize>,
    bytes: UnsafeCell<[u8; PENDING]>,
}
// SAFETY: `len` and `bytes` are touched only by the holder of `lock`.
unsafe impl Sync for Pending {}
static RECORDS: Pending = Pending {
    lock: AtomicBool::new(false),
    len: UnsafeCell::new(0),
    bytes: UnsafeCell::new([0; PENDING]),
};

/// The hash of a stack is `mix` folded over its frames from 0 (FxHash), so
/// that the walk computes it as it goes.
#[inline(always)]
pub fn mix(h: u64, frame: u64) -> u64 {
    (h.rotate_left(5) ^ frame).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// The id of the stack `frames` (truncated if `truncated`; `hash` folded by
/// [`mix`]), given it a new one and its record if it is new; 0 if the table
/// is full.
#[inline]
pub fn intern(frames: &[u64], truncated: bool, hash: u64) -> u32 {
    let Some(t) = table() else { return 0 };
    let key = (hash ^ u64::from(truncated) << 63 ^ GENERATION.load(Ordering::Relaxed)).max(1);
    let mask = SLOTS - 1;
    let mut i = key as usize & mask;
    loop {
        // SAFETY: `i` < SLOTS; slots are atomics in the mapping.
        let slot = unsafe { &*t.slots.add(i) };
        match slot.key.load(Ordering::Acquire) {
            0 => {
                if slot
                    .key
                    .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return insert(&t, slot, frames, truncated);
                }
                // Taken meanwhile: look at it again.
                continue;
            }
            k if k == key => {
                if let Some(id) = same(&t, slot, frames, truncated) {
                    return id;
                }
            }
            _ => {}
        }
        i = (i + 1) & mask;
    }
}

/// The id in `slot` if it holds `frames`: waits for a slot another thread is
/// filling; `None` if it holds another stack of the same hash.
fn same(t: &Table, slot: &Slot, frames: &[u64], truncated: bool) -> Option<u32> {
    let id = loop {
        let id = slot.id.load(Ordering::Acquire);
        if id != 0 {
            break id;
        }
        std::hint::spin_loop();
    };
    if id == u32::MAX {
        // A slot whose stack could not be kept.
        return None;
    }
    let (stored, stored_truncated) = stored(t, slot);
    (stored == frames && stored_truncated == truncated).then_some(id)
}

/// The frames of the stack in `slot`, whose id is published, and whether it was truncated.
fn stored<'a>(t: &Table, slot: &'a Slot) -> (&'a [u64], bool) {
    let place = slot.place.load(Ordering::Relaxed);
    let at = (place >> 8) as usize & ((1 << 55) - 1);
    let len = (place & 0xff) as usize;
    // SAFETY: the frames were written before the slot's id was published
    // (Release); the store lives as long as the process.
    let frames = unsafe { std::slice::from_raw_parts(t.frames.add(at), len) };
    (frames, place >> 63 != 0)
}

/// Fills the slot just claimed with a new stack: stores its frames, writes
/// its record, then publishes its id.
#[cold]
fn insert(t: &Table, slot: &Slot, frames: &[u64], truncated: bool) -> u32 {
    let full = USED.fetch_add(1, Ordering::Relaxed) as usize >= SLOTS / 4 * 3;
    let at = STORED.fetch_add(frames.len() as u64, Ordering::Relaxed) as usize;
    if full || at + frames.len() > FRAMES {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        // Other threads with this stack skip the slot.
        slot.id.store(u32::MAX, Ordering::Release);
        return 0;
    }
    // SAFETY: [at, at + len) of the store was reserved for this stack alone.
    unsafe { std::ptr::copy_nonoverlapping(frames.as_ptr(), t.frames.add(at), frames.len()) };
    slot.place.store(
        (at as u64) << 8 | frames.len() as u64 | u64::from(truncated) << 63,
        Ordering::Relaxed,
    );
    let records = lock_records();
    let id = LAST_ID.fetch_add(1, Ordering::Relaxed) + 1;
    records.append(id, frames, truncated);
    drop(records);
    slot.id.store(id, Ordering::Release);
    id
}

/// The table, mapped on first use; `None` if it cannot be.
#[inline(always)]
fn table() -> Option<Table> {
    let slots = TABLE.load(Ordering::Acquire);
    if !slots.is_null() {
        return Some(Table {
            slots,
            frames: STORE.load(Ordering::Acquire),
        });
    }
    map_table()
}

#[cold]
fn map_table() -> Option<Table> {
    if MAPPING.swap(true, Ordering::AcqRel) {
        // Another thread is mapping it: this stack goes without.
        return None;
    }
    let frames = sys::map(FRAMES * 8).cast::<u64>();
    let slots = sys::map(SLOTS * std::mem::size_of::<Slot>()).cast::<Slot>();
    if frames.is_null() || slots.is_null() {
        return None;
    }
    STORE.store(frames, Ordering::Release);
    TABLE.store(slots, Ordering::Release);
    Some(Table { slots, frames })
}

/// The pending records, while their lock is held.
struct Records;

impl Records {
    /// Appends the record of stack `id`, writing the pending ones first if it does not fit.
    fn append(&self, id: u32, frames: &[u64], truncated: bool) {
        let mut rec = [0u8; (MAX_STACK_DEPTH + 3) * codec::MAX_VARINT + 1];
        let Some(at) = codec::stack_record(&mut rec, id, frames, truncated) else {
            return;
        };
        // SAFETY: we hold the lock.
        let (len, bytes) = unsafe { (&mut *RECORDS.len.get(), &mut *RECORDS.bytes.get()) };
        if *len + at.len() > PENDING {
            output::write(&bytes[..*len]);
            *len = 0;
        }
        let n = at.len();
        bytes[*len..*len + n].copy_from_slice(&rec[at]);
        *len += n;
    }

    /// Writes the pending records.
    fn write(&self) {
        // SAFETY: we hold the lock.
        let (len, bytes) = unsafe { (&mut *RECORDS.len.get(), &*RECORDS.bytes.get()) };
        if *len > 0 {
            output::write(&bytes[..*len]);
            *len = 0;
        }
    }
}

impl Drop for Records {
    fn drop(&mut self) {
        RECORDS.lock.store(false, Ordering::Release);
    }
}

/// Takes the records' lock.
fn lock_records() -> Records {
    while !try_lock_once() {
        std::hint::spin_loop();
    }
    Records
}

fn try_lock_once() -> bool {
    RECORDS
        .lock
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// Writes the pending stack records: called before any events are written,
/// so that a stack's record comes first. `in_signal`: the lock is tried a
/// bounded number of times (a signal handler may have interrupted its holder
/// on this very thread).
pub fn flush(in_signal: bool) {
    if !in_signal {
        return lock_records().write();
    }
    if (0..100_000).any(|_| {
        std::hint::spin_loop();
        try_lock_once()
    }) {
        Records.write();
    }
}

/// The frames of stack `id` (innermost first) copied into `out`; their
/// number, 0 if the table holds no stack `id`. A scan of the whole table:
/// for a rare reader in the program's own time (a phase's top sites), never
/// for the hooks.
pub fn frames(id: u32, out: &mut [u64]) -> usize {
    let Some(t) = (id != 0 && id != u32::MAX).then(table).flatten() else {
        return 0;
    };
    for i in 0..SLOTS {
        // SAFETY: `i` < SLOTS; slots are atomics in the mapping.
        let slot = unsafe { &*t.slots.add(i) };
        if slot.id.load(Ordering::Acquire) == id {
            let frames = stored(&t, slot).0;
            let n = frames.len().min(out.len());
            out[..n].copy_from_slice(&frames[..n]);
            return n;
        }
    }
    0
}

/// At the end of a segment: how many new stacks were not kept (resetting the count).
pub fn take_dropped() -> u64 {
    DROPPED.swap(0, Ordering::Relaxed)
}

/// The last id given (0: none yet); ids are never given again.
pub fn last_id() -> u32 {
    LAST_ID.load(Ordering::Relaxed)
}

/// A new segment begins in this process (after a failed exec, or in a fork
/// child, whose file is new): stacks known so far are not defined there, so
/// the table moves to a new generation and every stack is written again.
/// A fork child also drops the records its parent had not yet written (the
/// parent writes them) and the locks of threads it does not have.
pub fn new_generation(forked: bool) {
    if forked {
        RECORDS.lock.store(false, Ordering::Release);
        MAPPING.store(!TABLE.load(Ordering::Acquire).is_null(), Ordering::Release);
        // SAFETY: the child has one thread and the lock was just released.
        unsafe { *RECORDS.len.get() = 0 };
    }
    GENERATION.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
}

/// The table's generation: an id given in another is not defined now.
#[inline(always)]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::sync::{Mutex, MutexGuard};

    use proptest::prelude::*;
    use retype_trace::codec;

    use super::{flush, intern, lock_records, mix, new_generation, RECORDS};
    use crate::settings::MAX_STACK_DEPTH;

    /// The table is one per process: the tests that use it take turns.
    pub(crate) fn turn() -> MutexGuard<'static, ()> {
        static TURN: Mutex<()> = Mutex::new(());
        TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The hash the stack walk folds as it goes.
    fn hash(frames: &[u64]) -> u64 {
        frames.iter().fold(0, |h, &f| mix(h, f))
    }

    fn id(frames: &[u64], truncated: bool) -> u32 {
        intern(frames, truncated, hash(frames))
    }

    /// The stack records not yet written.
    fn pending() -> Vec<u8> {
        let _held = lock_records();
        // SAFETY: we hold the records' lock.
        unsafe { (&*RECORDS.bytes.get())[..*RECORDS.len.get()].to_vec() }
    }

    #[test]
    fn a_stack_keeps_its_id_and_another_stack_gets_another() {
        let _turn = turn();
        let a = [0xa1_0000, 0xa1_1000, 0xa1_2000];
        let first = id(&a, false);
        assert_ne!(first, 0);
        assert_eq!(id(&a, false), first);
        let others = [id(&a[..2], false), id(&a[1..], false), id(&a, true)];
        for other in others {
            assert_ne!(other, 0);
            assert_ne!(other, first);
        }
        assert_eq!(
            id(&a, true),
            others[2],
            "a truncated stack keeps its id too"
        );
    }

    #[test]
    fn stacks_of_one_hash_are_told_apart_by_their_frames() {
        let _turn = turn();
        let (a, b) = ([0xb1_0000, 0xb1_1000], [0xb2_0000]);
        let (id_a, id_b) = (intern(&a, false, 42), intern(&b, false, 42));
        assert_ne!(id_a, id_b);
        assert_eq!(intern(&a, false, 42), id_a);
        assert_eq!(intern(&b, false, 42), id_b);
    }

    #[test]
    fn a_new_generation_gives_every_stack_a_new_id() {
        let _turn = turn();
        let a = [0xc1_0000, 0xc1_1000];
        let before = id(&a, false);
        new_generation(false);
        let after = id(&a, false);
        assert!(after > before, "ids only grow: {before} then {after}");
        assert_eq!(id(&a, false), after);
    }

    #[test]
    fn each_new_stack_is_recorded_once() {
        let _turn = turn();
        // Nothing is open to write to: flushing empties the pending records.
        flush(false);
        assert!(pending().is_empty());
        let a = [0xd1_0000, 0xd1_1000, 0xd1_2000];
        let id_a = id(&a, true);
        let mut rec = [0u8; (MAX_STACK_DEPTH + 3) * codec::MAX_VARINT + 1];
        let at = codec::stack_record(&mut rec, id_a, &a, true).unwrap();
        let record = &rec[at];
        assert_eq!(pending(), record);
        assert_eq!(id(&a, true), id_a);
        assert_eq!(pending(), record, "a known stack is not recorded again");
    }

    proptest! {
        /// Against a map from stack to id: a stack seen before has its id
        /// again; a new one gets an id above every id given so far.
        #[test]
        fn interning_agrees_with_a_map(
            stacks in prop::collection::vec(
                (prop::collection::vec(0xe0_0000..0xe0_0010u64, 1..4), any::<bool>()),
                1..40,
            ),
        ) {
            let _turn = turn();
            // Every stack is new in a new generation.
            new_generation(false);
            let mut model = HashMap::new();
            let mut highest = 0;
            for (frames, truncated) in stacks {
                let got = id(&frames, truncated);
                match model.get(&(frames.clone(), truncated)) {
                    Some(&known) => prop_assert_eq!(got, known),
                    None => {
                        prop_assert!(got > highest, "{got} after {highest}");
                        highest = got;
                        model.insert((frames, truncated), got);
                    }
                }
            }
        }

        /// Folding one more frame never maps two frames to one hash.
        #[test]
        fn mix_tells_frames_apart(h in any::<u64>(), a in any::<u64>(), b in any::<u64>()) {
            prop_assume!(a != b);
            prop_assert_ne!(mix(h, a), mix(h, b));
        }
    }
}
