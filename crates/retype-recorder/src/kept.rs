//! What the recording keeps of each call ([`settings::Mode`]): every call as
//! an event (a full recording), the counters of an aggregate one
//! ([`aggregate`]), or the events of the allocations a sampled one picks
//! ([`crate::sample`]) and the frees of those blocks alone ([`blocks`] follows them).
//!
//! A hook of a full or sampled recording asks [`before`] the call what to
//! keep (so that nothing is timed or unwound for a call that is dropped, and
//! a freed block leaves the followed set before another thread can be handed
//! its address), and gives the event to [`after`]; an aggregate recording's
//! calls take a path of their own, [`counted_alloc`] (its frees
//! [`counted_free`], a realloc's old block [`realloc_freed`]).

use retype_trace::{Event, Op};

use crate::blocks::{self, Entry};
use crate::settings::{self, Mode};
use crate::thread::local::Local;
use crate::thread::own;
use crate::{aggregate, output, phase_stats, recording, rss, sys};

/// What a call does to blocks, as the hook sees it before making it.
#[derive(Clone, Copy)]
pub struct Call {
    /// The block it frees or moves (0: none).
    pub frees: u64,
    /// The bytes it asks for, if it allocates.
    pub asks: Option<u64>,
}

impl Call {
    pub fn alloc(size: u64) -> Call {
        Call {
            frees: 0,
            asks: Some(size),
        }
    }

    pub fn free(p: u64) -> Call {
        Call {
            frees: p,
            asks: None,
        }
    }
}

/// What to keep of one call of a full or sampled recording (an aggregate
/// one's calls are [`counted_alloc`] and [`counted_free`]).
#[derive(Clone, Copy)]
pub enum Keep {
    /// Its event (a full recording).
    All,
    /// Nothing: the call is only forwarded.
    Nothing,
    /// A sampled recording's part of it: the free of a sampled block
    /// (`old`), a sampled allocation (`new`).
    Sampled { old: bool, new: bool },
}

impl Keep {
    /// Whether its stack is taken: only a sampled allocation's is kept, unless every event is.
    pub fn stack(self) -> bool {
        match self {
            Keep::All => true,
            Keep::Nothing => false,
            Keep::Sampled { new, .. } => new,
        }
    }
}

/// What to keep of `call`, made by the thread whose state is `l`, in a
/// full or sampled recording (`mode`, the settings').
#[inline(always)]
pub fn before(l: &Local, mode: Mode, call: Call) -> Keep {
    match mode {
        Mode::Sampled { mean_bytes, seed } => {
            let old = call.frees != 0
                && blocks::may_hold(call.frees)
                && blocks::remove::<true>(call.frees).is_some();
            let new = call
                .asks
                .is_some_and(|size| l.gap.take(size, mean_bytes, seed));
            if old || new {
                Keep::Sampled { old, new }
            } else {
                Keep::Nothing
            }
        }
        // (An aggregate recording's calls are `counted` instead.)
        Mode::Full | Mode::Aggregate { .. } => Keep::All,
    }
}

/// Keeps what [`before`] chose of the call whose event is `e` (its time in
/// clock ticks). Not for [`Keep::All`], which the hook appends itself.
pub fn after(l: &Local, keep: Keep, e: Event) {
    if let Keep::Sampled { old, new } = keep {
        if let Some(e) = sampled(e, old, new) {
            own::append(l, || e);
        }
    }
}

/// An aggregate recording's allocation, after the call `op` (a `realloc`
/// after [`realloc_freed`]): a block of `size` bytes at `ret` (0: the call
/// failed), made by the thread whose state is `l` at the stack `stack`
/// gives, counted ([`aggregate::count`]) on a path of its own, apart from
/// [`before`] and [`after`], so that nothing a counted call does not need
/// (a latency, a choice of what to keep, the event passed whole) is made:
/// this is every call's cost while recording. `phases`: a phase may be
/// active (else its figures are not kept: see
/// [`recording::State::counts_only`]). Its time is taken after the call (a
/// coarse one: [`tick`]).
#[inline(always)]
pub fn counted_alloc(
    l: &Local,
    phases: bool,
    op: Op,
    size: u64,
    ret: u64,
    stack: impl FnOnce() -> u32,
) {
    // The new block's slot loads while its stack is found.
    blocks::prefetch(ret);
    let e = Event {
        op,
        size,
        ret,
        time_ns: tick(l),
        stack: stack(),
        ..Event::default()
    };
    if phases {
        phase_stats::allocated(&e);
    }
    let (tally, count_at) = own::counts(l);
    aggregate::count(tally, count_at, &e, &l.clock);
}

/// An aggregate recording's free of the block at `p` (0: none), made by
/// the thread whose state is `l`: counted before the free is forwarded
/// (nothing it counts depends on the call), and the block out of the table
/// before the allocator may hand its address to another thread.
#[inline(always)]
pub fn counted_free(l: &Local, p: u64) {
    count_freed(l, p, taken(p));
}

/// The followed block at `p` (0: none), out of the table: a free's or a
/// `realloc`'s, taken before the call.
#[inline(always)]
pub fn taken(p: u64) -> Option<Entry> {
    if p != 0 {
        blocks::remove::<false>(p)
    } else {
        None
    }
}

/// A `realloc` of the block at `p` (0: none; `old`, what [`taken`] took
/// out of the table before the call) to `size` bytes, which returned `ret`,
/// made by the thread whose state is `l`: the old block counted as freed if
/// the call moved or freed it, else put back (a failed realloc leaves its
/// block as it was). Whether it allocated (else it only freed: at size 0,
/// a null result is no failed allocation); its allocation is then
/// [`counted_alloc`], as the `retype_trace::heap` model counts a realloc: a
/// free of the old block, an allocation of the new one.
#[inline(always)]
pub fn realloc_freed(l: &Local, p: u64, old: Option<Entry>, size: u64, ret: u64) -> bool {
    let frees_only = size == 0 && ret == 0;
    match old {
        Some(b) if ret == 0 && !frees_only => {
            blocks::insert::<false>(p, b);
        }
        _ => count_freed(l, p, old),
    }
    !frees_only
}

/// [`counted_free`] of `old`, the block at `p` the caller took out of the table.
#[inline(always)]
fn count_freed(l: &Local, p: u64, old: Option<Entry>) {
    let Some(old) = old else {
        rss::poll();
        return;
    };
    tick(l);
    let (tally, count_at) = own::counts(l);
    aggregate::count_free(tally, count_at, p, old, &l.clock);
}

/// The time of a counted call, by the thread's coarse clock (state `l`).
/// Counters keep no latency, and their time is coarse: RSS is checked only
/// when the clock is read.
#[inline(always)]
fn tick(l: &Local) -> u64 {
    let now = l.clock.tick();
    if now.fresh {
        rss::tick(now.ticks);
    }
    now.ticks
}

/// The event a sampled recording keeps of `e`, whose old block was sampled
/// if `old` and whose new block is sampled if `new`; follows the new block.
fn sampled(e: Event, old: bool, new: bool) -> Option<Event> {
    if e.op == Op::Free {
        return old.then_some(e);
    }
    let frees_only = e.op == Op::Realloc && e.size == 0 && e.ret == 0;
    if frees_only {
        return old.then_some(e);
    }
    if e.ret == 0 && old {
        // A failed realloc leaves its block as it was.
        blocks::insert::<true>(e.ptr, Entry::default());
    }
    if new {
        if e.ret != 0 {
            blocks::insert::<true>(e.ret, Entry::default());
        }
        // An unsampled old block is none of the recording's.
        let ptr = if old { e.ptr } else { 0 };
        return Some(Event { ptr, ..e });
    }
    // The old block was sampled, the new one is not: its free alone.
    (old && e.ret != 0).then_some(Event {
        op: Op::Free,
        ptr: e.ptr,
        size: 0,
        ret: 0,
        stack: 0,
        ..e
    })
}

/// A segment begins: says what it keeps (meta `recording`, with
/// `latency_every`, `sample_bytes` or `snapshot_ms`) and starts counting
/// afresh.
pub fn begin(forked: bool) {
    let mut num = sys::StackStr::<32>::new();
    let mode = settings::get().mode();
    recording::set_aggregate(matches!(mode, Mode::Aggregate { .. }));
    match mode {
        Mode::Full => {
            output::meta(b"recording", b"full");
            num.push_num(settings::get().latency_every());
            output::meta(b"latency_every", num.as_bytes());
        }
        Mode::Sampled { mean_bytes, .. } => {
            output::meta(b"recording", b"sampled");
            num.push_num(mean_bytes);
            output::meta(b"sample_bytes", num.as_bytes());
            blocks::clear(forked);
        }
        Mode::Aggregate { snapshot_ms } => {
            output::meta(b"recording", b"aggregate");
            num.push_num(snapshot_ms);
            output::meta(b"snapshot_ms", num.as_bytes());
            aggregate::begin(forked, snapshot_ms);
        }
    }
}

/// The segment ends: an aggregate recording writes its counters.
pub fn end(in_signal: bool) {
    if let Mode::Aggregate { .. } = settings::get().mode() {
        aggregate::end(in_signal);
    }
}
