//! The exported malloc family. Each hook takes the call's stack (unless
//! stacks are off), times the call it forwards (or, in a full recording, a
//! sample of the calls: a clock read costs as much as the rest of a call's
//! recording) and appends one event to this thread's buffer (or keeps what
//! an aggregate or sampled recording keeps of it, see [`kept`]).
//!
//! On x86-64 each exported function is a two-instruction trampoline that
//! passes its own entry stack pointer and the caller's frame pointer to the
//! hook's body as two extra arguments, then jumps there: the stack walk then
//! starts at the program's frame (the return address is the word at the entry
//! stack pointer) instead of unwinding the recorder's own frames first.
//!
//! Calls made while this thread is already inside the recorder (the next
//! allocator calling malloc itself, or a libc function the recorder uses) are
//! forwarded without a record: they are not the program's.

use libc::{c_int, c_void, size_t};
use retype_trace::{Event, Op};

use crate::kept::{self, Call, Keep};
use crate::real::{self, bootstrap_alloc, bootstrap_size, real};
use crate::settings::{Mode, Settings};
use crate::stacks::Entry;
use crate::thread::local::{local, Busy, Local};
use crate::thread::own;
use crate::{phase_stats, process, recording, rseq, rss, settings, stacks, sys};

/// A recorded call's start: `None` if the call is not recorded (recording
/// is off, or this thread is inside the recorder), else this thread's state
/// and the guard that marks it inside.
#[inline(always)]
pub fn enter() -> Option<(&'static Local, Busy)> {
    enter_in(recording::state())
}

/// [`enter`], the recording's state `state` read.
#[inline(always)]
fn enter_in(state: recording::State) -> Option<(&'static Local, Busy)> {
    if !state.is_on() {
        if !process::not_started() {
            return None;
        }
        process::start();
        if !recording::is_on() {
            return None;
        }
    }
    let l = local();
    let busy = Busy::enter_on(l)?;
    Some((l, busy))
}

/// The stack of a call made from `at` (0: stacks are not recorded, by the
/// settings `s`), taken outside the timed call so that latencies stay the
/// allocator's.
#[inline(always)]
pub fn stack(l: &Local, s: &Settings, at: Entry) -> u32 {
    if s.records_stacks() {
        // A match, not `map_or`: the compiler left that call in place.
        match own::stack_state(l) {
            Some(t) => stacks::capture(t, at),
            None => 0,
        }
    } else {
        0
    }
}

/// Runs `run`, the call `call` describes, recording what the recording
/// keeps ([`kept`]) of the event `event` builds from its result; `at` is
/// where the program called from.
#[inline(always)]
fn traced<T: Copy>(
    at: Entry,
    call: Call,
    run: impl FnOnce() -> T,
    event: impl FnOnce(T) -> Event,
) -> T {
    let state = recording::state();
    if state.counts_only() {
        let l = local();
        let Some(_busy) = Busy::enter_on(l) else {
            return run();
        };
        return counted(l, at, call, false, run, event);
    }
    traced_in(state, at, call, run, event)
}

/// An aggregate recording's call, made from `at` by the thread whose state
/// is `l` (`phases`: a phase may be active): a free is [`kept::counted_free`];
/// an allocation is counted after the call in [`counted_alloc`], one copy
/// that every allocating hook calls, `realloc` too (its old block counted
/// before, [`kept::realloc_freed`]): inlined into each, the count was seven
/// copies of several KiB that a program calling the malloc family in turn
/// missed in the instruction cache more than once a call.
#[inline(always)]
fn counted<T: Copy>(
    l: &'static Local,
    at: Entry,
    call: Call,
    phases: bool,
    run: impl FnOnce() -> T,
    event: impl FnOnce(T) -> Event,
) -> T {
    if call.asks.is_none() {
        kept::counted_free(l, call.frees);
        return run();
    }
    // Out of the table before the allocator may hand its address to another thread.
    let old = kept::taken(call.frees);
    let v = run();
    let e = event(v);
    if call.frees == 0 || kept::realloc_freed(l, call.frees, old, e.size, e.ret) {
        counted_alloc(l, at, phases, e.op, e.size, e.ret);
    }
    v
}

/// [`kept::counted_alloc`] of a block of `size` bytes at `ret` (0: the call
/// failed) by a call `op`, allocated from `at` by the thread whose state is `l`.
#[inline(never)]
fn counted_alloc(l: &'static Local, at: Entry, phases: bool, op: Op, size: u64, ret: u64) {
    // SAFETY: recording is on, so the settings were read.
    let stack = || stack(l, unsafe { settings::read() }, at);
    kept::counted_alloc(l, phases, op, size, ret, stack);
}

/// [`traced`] past its check of [`recording::State::counts_only`], the
/// recording's state `state` read.
#[inline(always)]
fn traced_in<T: Copy>(
    state: recording::State,
    at: Entry,
    call: Call,
    run: impl FnOnce() -> T,
    event: impl FnOnce(T) -> Event,
) -> T {
    let Some((l, _busy)) = enter_in(state) else {
        return run();
    };
    let settings = settings::get();
    let mode = settings.mode();
    let phases = state.phases();
    if let Mode::Aggregate { .. } = mode {
        return counted(l, at, call, phases, run, event);
    }
    let keep = kept::before(l, mode, call);
    if let Keep::Nothing = keep {
        rss::poll();
        return run();
    }
    let stack = if keep.stack() {
        stack(l, settings, at)
    } else {
        0
    };
    let (v, t0, latency_ns, descheduled) =
        if matches!(keep, Keep::All) && !timed(l, settings.latency_every()) {
            // A latency not measured (0) takes one clock read, not two: the
            // time the trace orders the call by (`serialized_segments`), the
            // end of a call that hands out a block, the start of any other.
            if call.asks.is_some() {
                let v = run();
                (v, rss::tick(sys::ticks()), 0, false)
            } else {
                let t0 = rss::tick(sys::ticks());
                (run(), t0, 0, false)
            }
        } else {
            let t0 = rss::tick(sys::ticks());
            let mark = rseq::mark(&l.rseq_cs);
            let v = run();
            let t1 = sys::ticks();
            // A counter read on another core may lag: such a span counts as
            // none. At least one tick, since 0 means "not measured".
            (v, t0, t1.saturating_sub(t0).max(1), rseq::descheduled(mark))
        };
    let ev = Event {
        time_ns: t0,
        latency_ns,
        descheduled,
        stack,
        ..event(v)
    };
    phase_stats::allocated(&ev);
    match keep {
        Keep::All => own::append(l, || ev),
        Keep::Nothing | Keep::Sampled { .. } => kept::after(l, keep, ev),
    }
    v
}

/// Whether a full recording measures this call's latency: on every call
/// (`every` 1), else on calls picked at random, `every` apart on average
/// (the byte sampler's countdown, which a full recording does not
/// otherwise use, counting calls).
#[inline(always)]
fn timed(l: &Local, every: u64) -> bool {
    every == 1 || l.gap.take(1, every, 0)
}

fn addr(p: *mut c_void) -> u64 {
    p as u64
}

/// Exports C function `$name` whose body is `$body`, which takes the C
/// arguments and then the [`Entry`] registers. On x86-64: a naked
/// trampoline that puts the entry stack pointer and the frame pointer into
/// the two argument registers after the C arguments (`$sp`, `$bp`) and jumps
/// to the body, leaving the stack as the caller made it.
macro_rules! export {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $body:ident, $sp:literal, $bp:literal) => {
        /// # Safety
        /// The C contract of the function of this name.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($(_: $ty),*) -> $ret {
            core::arch::naked_asm!(
                concat!("mov ", $sp, ", rsp"),
                concat!("mov ", $bp, ", rbp"),
                "jmp {}",
                sym $body
            )
        }

        /// # Safety
        /// The C contract of the function of this name.
        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: the same contract; no stack is taken on this architecture.
            unsafe { $body($($arg,)* 0, 0) }
        }
    };
}

pub(crate) use export;

export!(malloc(size: size_t) -> *mut c_void = malloc_body, "rsi", "rdx");
export!(calloc(n: size_t, size: size_t) -> *mut c_void = calloc_body, "rdx", "rcx");
export!(realloc(p: *mut c_void, size: size_t) -> *mut c_void = realloc_body, "rdx", "rcx");
export!(reallocarray(p: *mut c_void, n: size_t, size: size_t) -> *mut c_void = reallocarray_body, "rcx", "r8");
export!(free(p: *mut c_void) -> () = free_body, "rsi", "rdx");
export!(posix_memalign(out: *mut *mut c_void, align: size_t, size: size_t) -> c_int = posix_memalign_body, "rcx", "r8");
export!(aligned_alloc(align: size_t, size: size_t) -> *mut c_void = aligned_alloc_body, "rdx", "rcx");
export!(memalign(align: size_t, size: size_t) -> *mut c_void = memalign_body, "rdx", "rcx");
export!(valloc(size: size_t) -> *mut c_void = valloc_body, "rsi", "rdx");
export!(pvalloc(size: size_t) -> *mut c_void = pvalloc_body, "rsi", "rdx");

/// # Safety
/// The C `malloc` contract.
unsafe extern "C" fn malloc_body(size: size_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        return bootstrap_alloc(size, 16);
    };
    traced(
        Entry { sp, bp },
        Call::alloc(size as u64),
        // SAFETY: forwarding the caller's arguments.
        || unsafe { (r.malloc)(size) },
        |p| Event {
            op: Op::Malloc,
            size: size as u64,
            ret: addr(p),
            ..Event::default()
        },
    )
}

/// # Safety
/// The C `calloc` contract.
unsafe extern "C" fn calloc_body(n: size_t, size: size_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        // The arena is zeroed and never reused.
        return n
            .checked_mul(size)
            .map_or(std::ptr::null_mut(), |b| bootstrap_alloc(b, 16));
    };
    let bytes = (n as u64).saturating_mul(size as u64);
    traced(
        Entry { sp, bp },
        Call::alloc(bytes),
        // SAFETY: forwarding.
        || unsafe { (r.calloc)(n, size) },
        |p| Event {
            op: Op::Calloc,
            size: bytes,
            ret: addr(p),
            ..Event::default()
        },
    )
}

/// # Safety
/// The C `realloc` contract.
unsafe extern "C" fn realloc_body(p: *mut c_void, size: size_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        return bootstrap_realloc(p, size);
    };
    if bootstrap_size(p).is_some() {
        return bootstrap_realloc(p, size);
    }
    let old = phase_stats::freeing(p);
    let q = traced(
        Entry { sp, bp },
        Call {
            frees: addr(p),
            asks: Some(size as u64),
        },
        // SAFETY: forwarding.
        || unsafe { (r.realloc)(p, size) },
        |q| Event {
            op: Op::Realloc,
            ptr: addr(p),
            size: size as u64,
            ret: addr(q),
            ..Event::default()
        },
    );
    if q.is_null() && size != 0 {
        phase_stats::restore(p, old);
    }
    q
}

/// # Safety
/// The C `reallocarray` contract.
unsafe extern "C" fn reallocarray_body(
    p: *mut c_void,
    n: size_t,
    size: size_t,
    sp: u64,
    bp: u64,
) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
        return std::ptr::null_mut();
    };
    // SAFETY: reallocarray(p, n, size) is realloc(p, n * size) without overflow.
    unsafe { realloc_body(p, bytes, sp, bp) }
}

/// A realloc of an arena block (or any realloc while resolving): a new block and a copy.
fn bootstrap_realloc(p: *mut c_void, size: size_t) -> *mut c_void {
    let old = bootstrap_size(p).unwrap_or(0);
    // SAFETY: malloc_body is our hook (no stack: `sp` 0); the copy stays inside both blocks.
    unsafe {
        let q = malloc_body(size, 0, 0);
        if !q.is_null() && !p.is_null() {
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size));
        }
        q
    }
}

/// # Safety
/// The C `free` contract.
unsafe extern "C" fn free_body(p: *mut c_void, sp: u64, bp: u64) {
    if bootstrap_size(p).is_some() {
        return;
    }
    let state = recording::state();
    if state.counts_only() {
        // SAFETY: the same contract; `counts_only`: resolved.
        return unsafe { counted_free(p) };
    }
    // SAFETY: the same contract.
    unsafe { traced_free(p, sp, bp, state) }
}

/// An aggregate recording's free, when a call is only counted
/// ([`recording::State::counts_only`]): apart from [`traced_free`], so that
/// neither's frame is the other's, and counted before it is forwarded, so
/// that nothing but this thread's state is kept across the call.
///
/// # Safety
/// The C `free` contract; the functions forwarded to are resolved.
#[inline(never)]
unsafe extern "C" fn counted_free(p: *mut c_void) {
    // SAFETY: resolved, the caller says.
    let free = unsafe { real::resolved() }.free;
    let l = local();
    let Some(_busy) = Busy::enter_on(l) else {
        // SAFETY: forwarding.
        return unsafe { free(p) };
    };
    kept::counted_free(l, addr(p));
    // SAFETY: forwarding.
    unsafe { free(p) }
}

/// # Safety
/// The C `free` contract; `p` is not the bootstrap arena's; `state`: the
/// recording's, read by the caller.
#[inline(never)]
unsafe extern "C" fn traced_free(p: *mut c_void, sp: u64, bp: u64, state: recording::State) {
    let Some(r) = real() else { return };
    if state.phases() {
        phase_stats::freeing(p);
    }
    traced_in(
        state,
        Entry { sp, bp },
        Call::free(addr(p)),
        // SAFETY: forwarding.
        || unsafe { (r.free)(p) },
        |()| Event {
            op: Op::Free,
            ptr: addr(p),
            ..Event::default()
        },
    )
}

/// # Safety
/// The C `posix_memalign` contract.
unsafe extern "C" fn posix_memalign_body(
    out: *mut *mut c_void,
    align: size_t,
    size: size_t,
    sp: u64,
    bp: u64,
) -> c_int {
    let Some(r) = real() else {
        let p = bootstrap_alloc(size, align);
        // SAFETY: `out` is the caller's out-pointer.
        unsafe { *out = p };
        return if p.is_null() { libc::ENOMEM } else { 0 };
    };
    traced(
        Entry { sp, bp },
        Call::alloc(size as u64),
        // SAFETY: forwarding.
        || unsafe { (r.posix_memalign)(out, align, size) },
        // SAFETY: on success posix_memalign stored the block in `*out`.
        |rc| Event {
            op: Op::PosixMemalign,
            align: align as u64,
            size: size as u64,
            ret: if rc == 0 { addr(unsafe { *out }) } else { 0 },
            ..Event::default()
        },
    )
}

macro_rules! aligned_body {
    ($name:ident, $op:expr, $field:ident) => {
        /// # Safety
        /// The C contract of the function this is the body of.
        unsafe extern "C" fn $name(align: size_t, size: size_t, sp: u64, bp: u64) -> *mut c_void {
            let Some(r) = real() else {
                return bootstrap_alloc(size, align);
            };
            traced(
                Entry { sp, bp },
                Call::alloc(size as u64),
                // SAFETY: forwarding.
                || unsafe { (r.$field)(align, size) },
                |p| Event {
                    op: $op,
                    align: align as u64,
                    size: size as u64,
                    ret: addr(p),
                    ..Event::default()
                },
            )
        }
    };
}

aligned_body!(aligned_alloc_body, Op::AlignedAlloc, aligned_alloc);
aligned_body!(memalign_body, Op::Memalign, memalign);

/// # Safety
/// The C `valloc` contract.
unsafe extern "C" fn valloc_body(size: size_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        return bootstrap_alloc(size, 4096);
    };
    traced(
        Entry { sp, bp },
        Call::alloc(size as u64),
        // SAFETY: forwarding.
        || unsafe { (r.valloc)(size) },
        |p| Event {
            op: Op::Valloc,
            size: size as u64,
            ret: addr(p),
            ..Event::default()
        },
    )
}

/// # Safety
/// The C `pvalloc` contract.
unsafe extern "C" fn pvalloc_body(size: size_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        return bootstrap_alloc(size.next_multiple_of(4096), 4096);
    };
    let page = 4096;
    let call = || match r.pvalloc {
        // SAFETY: forwarding.
        Some(f) => unsafe { f(size) },
        // SAFETY: pvalloc is valloc of the size rounded up to pages.
        None => unsafe { (r.valloc)(size.next_multiple_of(page)) },
    };
    traced(Entry { sp, bp }, Call::alloc(size as u64), call, |p| {
        Event {
            op: Op::Pvalloc,
            size: size as u64,
            ret: addr(p),
            ..Event::default()
        }
    })
}
