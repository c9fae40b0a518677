//! Clocks and raw I/O that never allocate.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_int, timespec};
pub use retype_stackstr::StackStr;

/// Tick-to-ns conversion of the time-stamp counter: `ns = BASE_NS +
/// ((tsc - BASE_TSC) * MULT) >> 32`. MULT is 0 until calibrated, or when the
/// CPU has no invariant TSC; then [`now_ns`] reads CLOCK_MONOTONIC.
static MULT: AtomicU64 = AtomicU64::new(0);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
/// The clock's resolution in whole ns (at least 1): one tick of the
/// time-stamp counter rounded up, or `clock_getres` of CLOCK_MONOTONIC.
static RESOLUTION_NS: AtomicU64 = AtomicU64::new(1);

/// How long calibration watches both clocks.
const CALIBRATION_NS: u64 = 2_000_000;

/// Now in ns on the CLOCK_MONOTONIC time line.
pub fn now_ns() -> u64 {
    TickScale::now().time_ns(ticks())
}

/// Now in clock ticks: the time-stamp counter when it is invariant (rdtsc
/// costs less than half of clock_gettime in a VM, and every hook reads the
/// clock twice), else CLOCK_MONOTONIC ns. The hooks keep ticks and the
/// buffers convert them when they encode a batch, off the hot path.
#[inline(always)]
pub fn ticks() -> u64 {
    if MULT.load(Ordering::Relaxed) == 0 {
        return clock_ns(libc::CLOCK_MONOTONIC);
    }
    rdtsc()
}

/// The conversion of [`ticks`] into ns, read once for a batch of events.
#[derive(Clone, Copy)]
pub struct TickScale {
    /// 0: ticks are ns already.
    mult: u64,
    base_tsc: u64,
    base_ns: u64,
    resolution_ns: u64,
}

impl TickScale {
    pub fn now() -> TickScale {
        TickScale {
            mult: MULT.load(Ordering::Relaxed),
            base_tsc: BASE_TSC.load(Ordering::Relaxed),
            base_ns: BASE_NS.load(Ordering::Relaxed),
            resolution_ns: RESOLUTION_NS.load(Ordering::Relaxed),
        }
    }

    /// The time of [`ticks`] value `t`, in ns on the CLOCK_MONOTONIC time line.
    #[inline(always)]
    pub fn time_ns(self, t: u64) -> u64 {
        if self.mult == 0 {
            return t;
        }
        self.base_ns + self.span_ns(t.saturating_sub(self.base_tsc))
    }

    /// The [`ticks`] in `ns` nanoseconds, rounded down (at least 1).
    pub fn ticks_in(self, ns: u64) -> u64 {
        if self.mult == 0 {
            return ns.max(1);
        }
        let t = (u128::from(ns) << 32) / u128::from(self.mult);
        u64::try_from(t).unwrap_or(u64::MAX).max(1)
    }

    /// The length in ns of a span of `d` [`ticks`], rounded down.
    #[inline(always)]
    fn span_ns(self, d: u64) -> u64 {
        if self.mult == 0 {
            return d;
        }
        ((u128::from(d) * u128::from(self.mult)) >> 32) as u64
    }

    /// The latency in ns of a call measured as `d` [`ticks`]: rounded up, and
    /// at least the clock's resolution, since the call took some time even
    /// when both clock reads fell in one tick. So a measured latency is never
    /// 0, which the trace format keeps for "not measured".
    #[inline(always)]
    pub fn latency_ns(self, d: u64) -> u64 {
        let ns = if self.mult == 0 {
            d
        } else {
            ((u128::from(d) * u128::from(self.mult) + u128::from(u32::MAX)) >> 32) as u64
        };
        ns.max(self.resolution_ns)
    }
}

/// The clock's resolution in ns, as [`TickScale::latency_ns`] rounds to
/// (written into the trace's `clock_resolution_ns` meta record).
pub fn resolution_ns() -> u64 {
    RESOLUTION_NS.load(Ordering::Relaxed)
}

/// Measures the time-stamp counter against CLOCK_MONOTONIC (once per program
/// image, before recording starts, so that ticks never change meaning under
/// buffered events; a fork child inherits the result).
pub fn calibrate_clock() {
    if MULT.load(Ordering::Relaxed) != 0 {
        return;
    }
    let mut res = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid out-pointer; clock_getres does not allocate.
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut res) } == 0 {
        let ns = res.tv_sec as u64 * 1_000_000_000 + res.tv_nsec as u64;
        RESOLUTION_NS.store(ns.max(1), Ordering::Relaxed);
    }
    if !usable_tsc() {
        return;
    }
    let (ns0, tsc0) = (clock_ns(libc::CLOCK_MONOTONIC), rdtsc());
    let (mut ns1, mut tsc1) = (ns0, tsc0);
    while ns1 - ns0 < CALIBRATION_NS {
        (ns1, tsc1) = (clock_ns(libc::CLOCK_MONOTONIC), rdtsc());
    }
    if tsc1 <= tsc0 {
        return;
    }
    let mult = (u128::from(ns1 - ns0) << 32) / u128::from(tsc1 - tsc0);
    BASE_TSC.store(tsc1, Ordering::Relaxed);
    BASE_NS.store(ns1, Ordering::Relaxed);
    // One tick in ns, rounded up (1 on any counter faster than 1 GHz).
    RESOLUTION_NS.store(
        ((mult + u128::from(u32::MAX)) >> 32).max(1) as u64,
        Ordering::Relaxed,
    );
    MULT.store(u64::try_from(mult).unwrap_or(0), Ordering::Release);
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc exists on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether the TSC ticks at one rate (invariant) and the kernel keeps time with it.
#[cfg(target_arch = "x86_64")]
fn usable_tsc() -> bool {
    // Leaf 0x80000007 is valid when the maximum extended leaf reaches it.
    use core::arch::x86_64::__cpuid;
    let invariant =
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    invariant && kernel_uses_tsc()
}

/// Whether the kernel keeps time with the TSC: it stops doing so when it finds
/// the counters of different cores out of step, and then so must we, or a
/// thread moved to another core would see time run backwards.
#[cfg(target_arch = "x86_64")]
fn kernel_uses_tsc() -> bool {
    let mut buf = [0u8; 32];
    let n = read_file(
        b"/sys/devices/system/clocksource/clocksource0/current_clocksource\0",
        &mut buf,
    );
    buf[..n].trim_ascii_end() == b"tsc"
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn usable_tsc() -> bool {
    false
}

pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; clock_gettime does not allocate.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Registers this process for [`membarrier`]; false if the kernel (or a
/// seccomp filter) refuses.
pub fn membarrier_register() -> bool {
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
        ) == 0
    }
}

/// A full memory barrier in every running thread of this process (after
/// [`membarrier_register`]).
pub fn membarrier() {
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) };
}

/// Writes all of `buf` to `fd`; the errno of the write that failed, if one did.
pub fn write_all(fd: c_int, mut buf: &[u8]) -> Result<(), c_int> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(errno());
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// [`write_all`] to a file without the signal a file-size limit raises: a
/// write past `RLIMIT_FSIZE` sends SIGXFSZ, whose default action kills the
/// process, to the writing thread. Blocked for the write, the signal stays
/// pending and the write fails with EFBIG instead; the pending signal is then
/// taken back before the thread's mask is restored, so the program never sees it.
pub fn write_all_to_file(fd: c_int, buf: &[u8]) -> Result<(), c_int> {
    // SAFETY: sigset_t is plain data, filled by sigemptyset/sigaddset.
    let mut xfsz: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `old` is an out-parameter.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sigset pointers; the mask is this thread's.
    let blocked = unsafe {
        libc::sigemptyset(&mut xfsz);
        libc::sigaddset(&mut xfsz, libc::SIGXFSZ);
        libc::pthread_sigmask(libc::SIG_BLOCK, &xfsz, &mut old) == 0
            && libc::sigismember(&old, libc::SIGXFSZ) == 0
    };
    let r = write_all(fd, buf);
    if blocked {
        // SAFETY: as above; a zero timeout only takes a signal already pending.
        unsafe {
            if r == Err(libc::EFBIG) {
                let now = timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&xfsz, std::ptr::null_mut(), &now);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
    r
}

/// What a descriptor names: its file's device and inode (none is 0 and 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// The file `fd` names, or `None` if it is not open.
pub fn file_id(fd: c_int) -> Option<FileId> {
    // SAFETY: `st` is an out-parameter that fstat fills on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// Whether `path` (NUL-terminated) is a character device, such as /dev/null.
pub fn is_char_device(path: &[u8]) -> bool {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated; `st` is an out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let found = unsafe { libc::stat(path.as_ptr().cast(), &mut st) } == 0;
    found && st.st_mode & libc::S_IFMT == libc::S_IFCHR
}

extern "C" {
    /// glibc's English description of an errno value (never translated, so
    /// it neither allocates nor takes the locale's lock), or null.
    fn strerrordesc_np(errnum: c_int) -> *const libc::c_char;
}

/// The description of errno value `e` (`No space left on device`), or its number.
pub fn error_text(e: c_int, out: &mut StackStr<64>) -> &[u8] {
    // SAFETY: strerrordesc_np takes any value and returns a static string or null.
    let p = unsafe { strerrordesc_np(e) };
    if p.is_null() {
        out.push(b"error ").push_num(e as u64);
        return out.as_bytes();
    }
    // SAFETY: a NUL-terminated static string.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes()
}

/// Reads a whole small file (a NUL-terminated path) into `buf`; returns the bytes read.
pub fn read_file(path: &[u8], buf: &mut [u8]) -> usize {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return 0;
    }
    let mut n = 0;
    while n < buf.len() {
        // SAFETY: the range lies inside `buf`.
        let k = unsafe { libc::read(fd, buf[n..].as_mut_ptr().cast(), buf.len() - n) };
        if k <= 0 {
            break;
        }
        n += k as usize;
    }
    // SAFETY: `fd` was opened above.
    unsafe { libc::close(fd) };
    n
}

/// Reads the symbolic link `path` (NUL-terminated) into `buf`; returns its length.
pub fn readlink(path: &[u8], buf: &mut [u8]) -> usize {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated and `buf` valid for its length.
    let n = unsafe { libc::readlink(path.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    n.max(0) as usize
}

/// `text` if it is UTF-8 (the trace's text is), else a copy into `out` with
/// every byte outside ASCII turned into `?` (cut to `out`'s length).
pub fn utf8_or_ascii<'a>(text: &'a [u8], out: &'a mut [u8]) -> &'a [u8] {
    if std::str::from_utf8(text).is_ok() {
        return text;
    }
    let n = text.len().min(out.len());
    for (o, &t) in out.iter_mut().zip(&text[..n]) {
        *o = if t.is_ascii() { t } else { b'?' };
    }
    &out[..n]
}

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// `s` with a NUL terminator, for system calls.
pub fn c_str<const N: usize>(s: &mut StackStr<N>) -> *const libc::c_char {
    s.as_bytes_nul().as_ptr().cast()
}

/// Parses the decimal number at the start of `s`.
pub fn parse_num(s: &[u8]) -> Option<u64> {
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    s[..digits].iter().try_fold(0u64, |v, &d| {
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Reserves `bytes` of address space, backed by zero pages as touched.
pub fn map(bytes: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::{error_text, StackStr, TickScale};

    #[test]
    fn errors_read_as_glibcs_english_descriptions_or_numbers() {
        let mut text = StackStr::<64>::new();
        assert_eq!(
            error_text(libc::ENOSPC, &mut text),
            b"No space left on device"
        );
        let mut text = StackStr::<64>::new();
        assert_eq!(error_text(libc::EFBIG, &mut text), b"File too large");
        let mut text = StackStr::<64>::new();
        assert_eq!(error_text(100_000, &mut text), b"error 100000");
    }

    /// A counter of 2 GHz: 0.5 ns a tick.
    const SCALE: TickScale = TickScale {
        mult: 1 << 31,
        base_tsc: 1000,
        base_ns: 5_000,
        resolution_ns: 1,
    };

    #[test]
    fn a_call_within_one_tick_reads_as_the_resolution_not_zero() {
        assert_eq!(SCALE.latency_ns(0), 1);
        assert_eq!(SCALE.latency_ns(1), 1);
        // 3 ticks are 1.5 ns: rounded up.
        assert_eq!(SCALE.latency_ns(3), 2);
        assert_eq!(SCALE.latency_ns(2_000), 1_000);
        let coarse = TickScale {
            mult: 0,
            resolution_ns: 40,
            ..SCALE
        };
        assert_eq!(coarse.latency_ns(0), 40);
        assert_eq!(coarse.latency_ns(100), 100);
    }

    #[test]
    fn an_interval_in_ticks_spans_that_many_ns() {
        assert_eq!(SCALE.ticks_in(1_000), 2_000);
        assert_eq!(SCALE.span_ns(SCALE.ticks_in(10_000_000)), 10_000_000);
        assert_eq!(TickScale { mult: 0, ..SCALE }.ticks_in(77), 77);
    }

    #[test]
    fn times_stay_on_the_monotonic_line() {
        assert_eq!(SCALE.time_ns(1000), 5_000);
        assert_eq!(SCALE.time_ns(3_001), 6_000);
        assert_eq!(TickScale { mult: 0, ..SCALE }.time_ns(77), 77);
    }
}
