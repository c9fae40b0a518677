//! Per-thread cost at thread exit, as seed 003's TLM measures it: CPU time in
//! user and kernel mode, wait time (lifetime − (user + kernel)) and context
//! switches; and when each thread started.
//!
//! The calling thread's figures come from `getrusage(RUSAGE_THREAD)` (µs);
//! another thread's from `/proc/self/task/TID/{stat,status}` (clock ticks, 10 ms).
//! A thread's start is read by the thread itself as it begins (we wrap
//! `pthread_create`); for other threads (the main one, raw clones) it comes from
//! the `/proc` start time, in clock ticks (10 ms).

use std::cell::Cell;

use libc::c_void;
use retype_trace::ThreadSummary;

use crate::real::{real, StartRoutine};
use crate::sys::{self, parse_num, StackStr};

thread_local! {
    /// When this thread started, if our `pthread_create` made it (else 0).
    static STARTED_AT: Cell<u64> = const { Cell::new(0) };
}

/// The summary of thread `tid`, ending now. `own`: `tid` is the calling thread.
/// `None` for another thread that /proc no longer knows (it has exited).
pub fn summary(tid: u32, start_ns: u64, own: bool) -> Option<ThreadSummary> {
    let mut s = ThreadSummary {
        thread: tid,
        start_ns,
        end_ns: sys::now_ns(),
        ..ThreadSummary::default()
    };
    if own {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid out-pointer.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
            s.user_ns = ns(ru.ru_utime);
            s.system_ns = ns(ru.ru_stime);
            s.voluntary_switches = ru.ru_nvcsw as u64;
            s.involuntary_switches = ru.ru_nivcsw as u64;
        }
    } else {
        let stat = proc_stat(tid)?;
        s.user_ns = stat.utime * tick_ns();
        s.system_ns = stat.stime * tick_ns();
        let mut buf = [0u8; 2048];
        let n = sys::read_file(task_path(tid, b"/status").as_bytes_nul(), &mut buf);
        let status = &buf[..n];
        s.voluntary_switches = field_after(status, b"\nvoluntary_ctxt_switches:").unwrap_or(0);
        s.involuntary_switches = field_after(status, b"\nnonvoluntary_ctxt_switches:").unwrap_or(0);
    }
    Some(s)
}

/// What a thread created through our `pthread_create` runs first.
struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
}

/// Wraps the program's `pthread_create` so that the new thread notes the exact
/// time it starts before running its routine. The small `Start` block comes from
/// the next allocator directly and is not recorded: it is the recorder's, not the
/// program's.
///
/// # Safety
/// The C `pthread_create` contract.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
) -> libc::c_int {
    let Some(r) = real() else { return libc::EAGAIN };
    // SAFETY: forwarding to the next allocator; the block is ours.
    let start = unsafe { (r.malloc)(std::mem::size_of::<Start>()) }.cast::<Start>();
    if start.is_null() {
        // SAFETY: forwarding unchanged.
        return unsafe { (r.pthread_create)(thread, attr, routine, arg) };
    }
    // SAFETY: `start` is a fresh block of the right size and alignment (malloc's 16).
    unsafe { start.write(Start { routine, arg }) };
    // SAFETY: forwarding, with our trampoline in front of the routine.
    let rc = unsafe { (r.pthread_create)(thread, attr, trampoline, start.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not created; the block is still ours.
        unsafe { (r.free)(start.cast()) };
    }
    rc
}

extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    started_now();
    // SAFETY: `p` is the `Start` block pthread_create wrote; we own it now.
    let Start { routine, arg } = unsafe { p.cast::<Start>().read() };
    if let Some(r) = real() {
        // SAFETY: the block came from this allocator.
        unsafe { (r.free)(p) };
    }
    routine(arg)
}

/// Notes that the calling thread starts now (a new thread, or a fork child's).
pub fn started_now() {
    STARTED_AT.set(sys::now_ns());
}

/// When thread `tid` (the calling thread) started, on CLOCK_MONOTONIC: exact
/// for threads made by `pthread_create`, else from /proc (now, if /proc does
/// not say).
pub fn start_ns(tid: u32) -> u64 {
    let exact = STARTED_AT.get();
    if exact != 0 {
        return exact;
    }
    let now = sys::now_ns();
    let Some(stat) = proc_stat(tid) else {
        return now;
    };
    // /proc counts from boot (CLOCK_BOOTTIME); shift to the monotonic clock.
    let age = sys::clock_ns(libc::CLOCK_BOOTTIME).saturating_sub(stat.start * tick_ns());
    now.saturating_sub(age)
}

struct Stat {
    utime: u64,
    stime: u64,
    start: u64,
}

/// Fields 14, 15 and 22 of `/proc/self/task/TID/stat`.
fn proc_stat(tid: u32) -> Option<Stat> {
    let mut buf = [0u8; 1024];
    let n = sys::read_file(task_path(tid, b"/stat").as_bytes_nul(), &mut buf);
    let text = &buf[..n];
    // The command name (field 2) may hold spaces and parentheses: skip past the last ')'.
    let close = text.iter().rposition(|&c| c == b')')?;
    let mut fields = text[close + 1..]
        .split(|&c| c == b' ')
        .filter(|f| !f.is_empty());
    // Field 3 is the first after ')'.
    let mut nth = |k: usize, from: &mut usize| {
        let f = fields.nth(k - *from);
        *from = k + 1;
        f.and_then(parse_num)
    };
    let mut at = 3;
    let utime = nth(14, &mut at)?;
    let stime = nth(15, &mut at)?;
    let start = nth(22, &mut at)?;
    Some(Stat {
        utime,
        stime,
        start,
    })
}

fn task_path(tid: u32, leaf: &[u8]) -> StackStr<64> {
    let mut p = StackStr::new();
    p.push(b"/proc/self/task/")
        .push_num(u64::from(tid))
        .push(leaf);
    p
}

fn field_after(text: &[u8], key: &[u8]) -> Option<u64> {
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &text[at..];
    let digits = rest.iter().position(|c| c.is_ascii_digit())?;
    parse_num(&rest[digits..])
}

fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000_000 / hz as u64
    } else {
        10_000_000
    }
}
