//! The call stack of each malloc-family call, walked from the program's
//! frame that called the hook (the hooks' trampolines pass where they were
//! entered) up: each frame's caller is found by the rule of its return
//! address ([`crate::cfi`]: the object's call-frame information, or frame
//! pointers where there is none), kept in a per-thread cache so that a frame
//! costs a lookup and two loads once its address was seen. At most the
//! settings' depth of frames are kept (`RETYPE_STACK_DEPTH`). Reads stay between the current stack pointer and the top of
//! the thread's stack, so a wrong rule ends the walk, never the program.
//! Nothing here allocates. Each stack is then interned ([`stack_table`]):
//! events carry its id.
//!
//! A walk is a function of where it starts (the entry's stack and frame
//! pointers) and of the words it reads, the rules being fixed for a table
//! generation: so each thread keeps its last walks (those words and the id
//! each gave), and a call entered at the same place whose words read the same
//! (a loop calling malloc from one site) has the same stack, found by
//! comparing them instead of walking and interning again. The walks are kept
//! in sets of two chosen by the entry's stack pointer and first return
//! address, so that a loop calling the malloc family from several sites,
//! which alternate, finds each its own walk.

use std::mem::MaybeUninit;

use crate::cfi::{Kind, Rule};
use crate::settings::{self, MAX_STACK_DEPTH};
use crate::{modules, stack_table};

/// Rules cached per thread (a power of two): 256 KiB, room for the return
/// addresses of an interpreter's deep and varied stacks.
const CACHE: usize = 16384;

/// A cached rule and the return address it is for (0: empty).
#[derive(Clone, Copy)]
#[repr(C)]
struct Cached {
    at: u64,
    rule: Rule,
}

impl LastWalk {
    /// Whether it gives the stack of the call entered at `entry`, whose first
    /// return address is `first`, under the object table's generation
    /// `generation` and the stack table's `table`.
    #[inline(always)]
    fn gives(&self, entry: Entry, first: u64, (generation, table): (u32, u64)) -> bool {
        // The return address first: it tells a set's two ways apart.
        (self.reads[0].1, self.sp) == (first, entry.sp)
            && self.id != 0
            && (self.modules, self.table) == (generation, table)
            && self.bp.is_none_or(|bp| bp == entry.bp)
            // SAFETY: a walk kept with an id has 1 <= n <= READS (`walk_again`).
            && unsafe { self.reads.get_unchecked(1..self.n) }.iter().all(|&(at, v)| {
                // SAFETY: the walk read `at` inside [entry.sp, top) from this
                // same stack pointer, and a thread's top does not change (a new
                // thread's `begin` forgets every walk): it lies in the live stack.
                unsafe { (at as *const u64).read_unaligned() == v }
            })
    }
}

impl Cached {
    /// All zeros, as a new buffer's mapping holds it.
    const EMPTY: Cached = Cached {
        at: 0,
        rule: Rule {
            cfa: 0,
            bp: 0,
            kind: Kind::Sp,
        },
    };
}

/// Words a walk reads at most: the first return address, then a return
/// address and a saved frame pointer a frame.
const READS: usize = 1 + 2 * MAX_STACK_DEPTH;

/// Walks kept per thread (a power of two), in sets of [`WAYS`] chosen by
/// where they start: 4 KiB each (of address space: a walk's pages are touched
/// only as deep as it went). Sites that alternate walk again each call if
/// more of them share a set than it has ways: with 16 slots of one way, 40 %
/// of `mt_alloc`'s calls did (its loop calls from 16 sites); with 64, a
/// fourth of its allocations did in some builds and none in others (the set
/// depends on where the thread's stack was mapped).
const WALKS: usize = 64;
/// Walks per set: the last walk that missed replaces the one not used last.
const WAYS: usize = 2;
const SETS: usize = WALKS / WAYS;

/// A thread's last walk from one slot's entries (all zeros: none).
#[repr(C)]
struct LastWalk {
    /// Where it started: the stack pointer, and the frame pointer where a
    /// rule used it (else it did not matter: a program built without frame
    /// pointers keeps a variable there).
    sp: u64,
    bp: Option<u64>,
    /// The object table's and the stack table's generations it ran under.
    modules: u32,
    table: u64,
    /// The stack id it gave (0: none kept).
    id: u32,
    /// The words its result depends on, `(address, value)`: `reads[..n]`
    /// (a saved frame pointer only where a later rule used it).
    n: usize,
    reads: [(u64, u64); READS],
}

/// A thread's unwinding state, kept in its buffer and used by its owner
/// only; all zeros is a valid empty state.
#[repr(C)]
pub struct ThreadStack {
    /// The top of the owning thread's stack: reads stay below it (0: unknown).
    top: u64,
    /// The object table's generation the cache was filled under.
    generation: u32,
    cache: [Cached; CACHE],
    last: [LastWalk; WALKS],
    /// Of each set, the way the next walk that misses it replaces.
    replace: [u8; SETS],
}

impl ThreadStack {
    /// The state of a buffer that a new thread (the caller) takes.
    pub fn begin(&mut self) {
        self.top = stack_top();
        // A walk is about a page long (its reads): one never written (in a
        // fresh buffer) is left a zero page, not made resident.
        for walk in self.last.iter_mut().filter(|w| w.id != 0) {
            walk.id = 0;
        }
    }
}

/// The rule for return address `at`, through the thread's cache.
#[inline(always)]
fn rule(cache: &mut [Cached; CACHE], at: u64) -> Rule {
    let e = &mut cache[(at.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize % CACHE];
    if e.at != at {
        *e = Cached { at, rule: miss(at) };
    }
    e.rule
}

/// The rule of return address `at`, from the object's tables. An address
/// outside every known object may be in a library loaded since the last
/// scan: if the loader has loaded or unloaded anything since, scan again and
/// look once more.
#[cold]
fn miss(at: u64) -> Rule {
    let (rule, stranger) = modules::lock().rule(at - 1);
    if stranger && modules::loader_changed() {
        modules::scan(false);
        return modules::lock().rule(at - 1).0;
    }
    rule
}

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// The main thread's stack pointer when the program started (ld.so).
    static __libc_stack_end: *const libc::c_void;
}

/// The top of the calling thread's stack, or 0 if it cannot be told.
fn stack_top() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let here = 0u8;
        let sp = &raw const here as u64;
        // A thread made by pthread_create has its descriptor at the top of
        // its stack; the main thread's stack ends where the program began.
        // SAFETY: pthread_self has no preconditions; the loader sets
        // __libc_stack_end before any code of ours runs.
        let (me, main) = unsafe { (libc::pthread_self() as u64, __libc_stack_end as u64) };
        [me, main.next_multiple_of(4096)]
            .into_iter()
            .find(|&top| top > sp && top - sp < 1 << 30)
            .unwrap_or(0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Where a hook was entered: its stack pointer, where the return address
/// into the program lies (0: unknown, no stack is taken), and the program's
/// frame pointer.
#[derive(Clone, Copy)]
pub struct Entry {
    pub sp: u64,
    pub bp: u64,
}

/// The id of the stack of the call that entered a hook at `entry`, or 0 if
/// it has none to record. Inlined into the hooks (their frame already saves
/// every register the check of the kept walks uses: a call of its own cost
/// a sixth of it); a walk is apart ([`walk_anew`]).
#[inline(always)]
pub fn capture(t: &mut ThreadStack, entry: Entry) -> u32 {
    if entry.sp == 0 {
        return 0;
    }
    let generation = modules::generation();
    if t.generation != generation {
        t.renew(generation);
    }
    // SAFETY: the return address into the program, at the hook's entry
    // stack pointer, in this thread's live stack.
    let first = unsafe { (entry.sp as *const u64).read_unaligned() };
    let table = stack_table::generation();
    let set =
        ((entry.sp ^ first).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SETS.ilog2())) as usize;
    for way in 0..WAYS {
        let walk = &t.last[set * WAYS + way];
        if walk.gives(entry, first, (generation, table)) {
            t.replace[set] = ((way + 1) % WAYS) as u8;
            return walk.id;
        }
    }
    walk_anew(t, entry, first, set, (generation, table))
}

impl ThreadStack {
    /// The object table's generation is now `generation`: the cached rules
    /// are forgotten (a new buffer's cache is zero pages, already empty:
    /// left untouched).
    #[cold]
    #[inline(never)]
    fn renew(&mut self, generation: u32) {
        if self.generation != 0 {
            self.cache.fill(Cached::EMPTY);
        }
        self.generation = generation;
    }
}

/// [`capture`] of a call whose walk was not kept (`first`: its first return
/// address; `set`: its set of kept walks): walks again into the set's way
/// not used last.
#[inline(never)]
fn walk_anew(
    t: &mut ThreadStack,
    entry: Entry,
    first: u64,
    set: usize,
    generations: (u32, u64),
) -> u32 {
    let ThreadStack {
        top,
        cache,
        last: walks,
        replace,
        ..
    } = t;
    let way = usize::from(replace[set]) % WAYS;
    replace[set] = ((way + 1) % WAYS) as u8;
    let walk = &mut walks[set * WAYS + way];
    // Reads stay in [entry.sp, top): the words above the hook's entry.
    let stack = Bounds {
        bottom: entry.sp,
        last: top.saturating_sub(8).max(entry.sp),
    };
    walk_again(cache, walk, entry, stack, first, generations)
}

/// The part of this thread's stack a walk may read: `[bottom, last + 8)`.
#[derive(Clone, Copy)]
struct Bounds {
    bottom: u64,
    last: u64,
}

impl Bounds {
    /// The word at `at`, if it lies inside.
    #[inline(always)]
    fn read(self, at: u64) -> Option<u64> {
        (at.wrapping_sub(self.bottom) <= self.last - self.bottom)
            // SAFETY: [bottom, top) is this thread's live stack, mapped.
            .then(|| unsafe { (at as *const u64).read_unaligned() })
    }
}

/// Walks the stack of the call entered at `entry`, whose first return
/// address is `first`, into `walk` (kept for the next call) under the object
/// table's generation `generation` and the stack table's `table`; returns its
/// stack id.
#[inline(always)]
fn walk_again(
    cache: &mut [Cached; CACHE],
    walk: &mut LastWalk,
    entry: Entry,
    stack: Bounds,
    first: u64,
    (generation, table): (u32, u64),
) -> u32 {
    let (bottom, read) = (stack.bottom, |at| stack.read(at));
    walk.reads[0] = (bottom, first);
    let mut n_reads = 1;
    // At most READS kept: one, then two a frame kept.
    let mut keep = |at: u64, v: u64| {
        walk.reads[n_reads] = (at, v);
        n_reads += 1;
    };
    // Where the frame pointer's value came from, until a rule uses it: the
    // entry (None) or a saved word.
    let mut bp_from: Option<Option<(u64, u64)>> = Some(None);
    let mut entry_bp = None;
    let depth = settings::get().stack_depth();
    let mut frames = [MaybeUninit::<u64>::uninit(); MAX_STACK_DEPTH];
    frames[0].write(first);
    let (mut n, mut truncated, mut hash) = (1, false, stack_table::mix(0, first));
    let (mut at, mut sp, mut bp) = (first, bottom + 8, entry.bp);
    loop {
        let rule = rule(cache, at);
        let base = match rule.kind {
            Kind::Sp => sp,
            Kind::Bp => {
                match bp_from.take() {
                    Some(Some((at, v))) => keep(at, v),
                    Some(None) => entry_bp = Some(entry.bp),
                    None => {}
                }
                bp
            }
            Kind::End | Kind::Unknown => break,
        };
        let cfa = base.wrapping_add(rule.cfa as i64 as u64);
        let Some(ret) = read(cfa.wrapping_sub(8)) else {
            break;
        };
        keep(cfa.wrapping_sub(8), ret);
        if rule.bp != 0 {
            let saved = cfa.wrapping_add(rule.bp as i64 as u64);
            match read(saved) {
                Some(v) => (bp, bp_from) = (v, Some(Some((saved, v)))),
                None => break,
            }
        }
        // Each caller's frame lies above its callee's.
        if cfa <= sp || ret == 0 {
            break;
        }
        if n == depth {
            truncated = true;
            break;
        }
        frames[n].write(ret);
        n += 1;
        hash = stack_table::mix(hash, ret);
        (at, sp) = (ret, cfa);
    }
    // SAFETY: frames[..n] were written above.
    let frames = unsafe { std::slice::from_raw_parts(frames.as_ptr().cast::<u64>(), n) };
    let id = stack_table::intern(frames, truncated, hash);
    // Kept for the next call (a dropped stack, id 0, is looked up again).
    (walk.sp, walk.bp, walk.modules, walk.table) = (entry.sp, entry_bp, generation, table);
    (walk.id, walk.n) = (id, n_reads);
    id
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hint::black_box;

    /// Calls `probe_body` with the [`Entry`] of this call, as the hooks do.
    #[unsafe(naked)]
    unsafe extern "C" fn probe(_: *mut ThreadStack, _: *mut [u32; 2]) {
        core::arch::naked_asm!("mov rdx, rsp", "mov rcx, rbp", "jmp {}", sym probe_body)
    }

    /// The stack of the call to `probe` twice: through the kept walks, then
    /// with none kept (a full walk).
    extern "C" fn probe_body(t: *mut ThreadStack, out: *mut [u32; 2], sp: u64, bp: u64) {
        // SAFETY: the test passes its own state and result, both valid.
        let (t, out) = unsafe { (&mut *t, &mut *out) };
        let kept = capture(t, Entry { sp, bp });
        let kept_walks = std::mem::replace(&mut t.last, no_walks());
        let walked = capture(t, Entry { sp, bp });
        t.last = kept_walks;
        *out = [kept, walked];
    }

    fn no_walks() -> [LastWalk; WALKS] {
        // SAFETY: all zeros is a valid LastWalk (none kept).
        unsafe { std::mem::zeroed() }
    }

    /// Calls `probe` under one frame of `step::<B>` for each of `path`'s
    /// choices: paths of one length enter `probe` at the same stack pointer
    /// with the same return address, from different callers.
    #[inline(never)]
    fn step<const B: bool>(t: *mut ThreadStack, path: &[bool], out: *mut [u32; 2]) {
        match path.split_first() {
            // SAFETY: t and out are valid.
            None => unsafe { probe(t, out) },
            Some((true, rest)) => step::<true>(t, black_box(rest), out),
            Some((false, rest)) => step::<false>(t, black_box(rest), out),
        }
        black_box(path);
    }

    /// A new thread's state in a fresh buffer (zero pages) makes none of its
    /// kept walks' pages resident: they hold no walk yet.
    #[test]
    fn a_fresh_state_begins_without_touching_its_walks() {
        let len = std::mem::size_of::<ThreadStack>().next_multiple_of(4096);
        // Between two inaccessible pages of its own, so that the kernel
        // cannot merge the state's mapping with another one of the process.
        let outer = crate::sys::map(len + 2 * 4096);
        assert!(!outer.is_null());
        let m = outer.wrapping_add(4096);
        for guard in [outer, m.wrapping_add(len)] {
            // SAFETY: a page of the mapping just made, which nothing uses.
            assert_eq!(
                unsafe { libc::mprotect(guard.cast(), 4096, libc::PROT_NONE) },
                0
            );
        }
        // The mapping's resident KiB by the kernel's count (a read of a page
        // never written maps the shared zero page, which is not counted).
        let resident_kib = || {
            let smaps = "\n".to_owned() + &std::fs::read_to_string("/proc/self/smaps").unwrap();
            let head = format!("\n{:x}-", m as usize);
            let at = smaps.find(&head).expect("the mapping is listed");
            smaps[at..]
                .lines()
                .find_map(|l| l.strip_prefix("Rss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
                .unwrap()
        };
        // SAFETY: zero pages are a valid empty state, and the mapping is ours.
        unsafe { (*m.cast::<ThreadStack>()).begin() };
        let kib = resident_kib();
        // SAFETY: the mapping is ours, and nothing refers to it any more.
        unsafe { libc::munmap(outer.cast(), len + 2 * 4096) };
        assert!(kib <= 8, "{kib} KiB of {} resident", len / 1024);
    }

    proptest! {
        #[test]
        fn a_kept_walk_gives_the_stack_a_full_walk_gives(
            paths in prop::collection::vec(prop::collection::vec(any::<bool>(), 0..6), 1..40)
        ) {
            let _turn = stack_table::tests::turn();
            modules::scan(true);
            // SAFETY: all zeros is a valid empty state.
            let mut t: Box<ThreadStack> = unsafe { Box::new_zeroed().assume_init() };
            t.begin();
            let mut ids = std::collections::HashMap::new();
            for path in &paths {
                let mut out = [0u32; 2];
                step::<false>(&mut *t, path, &mut out);
                prop_assert_ne!(out[1], 0);
                prop_assert_eq!(out[0], out[1], "path {:?}", path);
                // Different paths are different stacks.
                prop_assert_eq!(*ids.entry(out[1]).or_insert(path), path);
            }
        }
    }
}
