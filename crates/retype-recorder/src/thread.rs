//! Per-thread cost at thread exit, as seed 003's TLM measures it: CPU time in
//! user and kernel mode, wait time (lifetime − (user + kernel)) and context
//! switches.
//!
//! The calling thread's figures come from `getrusage(RUSAGE_THREAD)` (µs);
//! another thread's from `/proc/self/task/TID/{stat,status}` (clock ticks, 10 ms).
//! A thread's start comes from its `/proc` start time (clock ticks since boot),
//! so lifetimes and wait times are exact to 10 ms.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::c_void;
use retype_trace::codec::{self, thread_fields};
use retype_trace::ThreadSummary;

use crate::buffer::{self, ThreadBuf};
use crate::sys::{self, parse_num, StackStr};

/// The pthread key whose destructor tells us a thread exits (u32::MAX: none).
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

thread_local! {
    /// This thread's summary has been written.
    static SUMMARIZED: Cell<bool> = const { Cell::new(false) };
}

/// Creates the thread-exit key (once, from the constructor).
pub fn init() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; `on_exit` has the destructor's signature.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_exit)) } == 0 {
        KEY.store(key, Ordering::Release);
    }
}

/// Asks for `on_exit(b)` when this thread exits.
pub fn watch_exit(b: *mut c_void) {
    let key = KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: `key` was created by pthread_key_create.
        unsafe { libc::pthread_setspecific(key, b) };
    }
}

unsafe extern "C" fn on_exit(b: *mut c_void) {
    let _busy = crate::hooks::Busy::enter();
    let mut rec = [0u8; 1 + 8 * codec::MAX_VARINT];
    let mut n = 0;
    if !SUMMARIZED.replace(true) {
        // SAFETY: the destructor gets the buffer pointer we registered.
        let start_ns = unsafe { (*b.cast::<ThreadBuf>()).start_ns };
        if let Some(s) = summary(sys::gettid(), start_ns, true) {
            n = codec::varint_record(&mut rec, codec::TAG_THREAD, &thread_fields(&s)).unwrap_or(0);
        }
    }
    buffer::release(b.cast(), &rec[..n]);
}

/// Whether this thread has released its buffer at thread exit.
pub fn exiting() -> bool {
    SUMMARIZED.get()
}

/// Whether this thread's summary is still to be written (and now will be).
pub fn claim_own_summary() -> bool {
    !SUMMARIZED.replace(true)
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

/// When thread `tid` started, on CLOCK_MONOTONIC (now, if /proc does not say).
pub fn start_ns(tid: u32) -> u64 {
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
