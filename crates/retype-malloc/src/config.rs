//! Settings read once from the environment at start-up (see the crate documentation for the
//! list). Reading uses `getenv`, which does not allocate.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use crate::consts::{EARLY_SLOTS, SEGMENT_SIZE};

/// Back segments with transparent huge pages (`RETYPE_MALLOC_HUGEPAGES`, default on).
pub(crate) static HUGE_PAGES: AtomicBool = AtomicBool::new(true);
/// Large blocks of 2 MiB or more start on a 2 MiB boundary and are advised for huge pages
/// (see `large`; `RETYPE_MALLOC_HUGEPAGES_LARGE`, default: as `RETYPE_MALLOC_HUGEPAGES`).
pub(crate) static HUGE_LARGE: AtomicBool = AtomicBool::new(true);
/// Segments in use before huge pages start (`RETYPE_MALLOC_HUGEPAGES_MIN_MIB` / 2, default
/// 24 = 48 MiB, at most [`EARLY_SLOTS`]; more with many thread heaps, see `segment`).
pub(crate) static HUGE_MIN_SEGMENTS: AtomicUsize = AtomicUsize::new(24);
/// Validate every free and realloc, catching double and invalid frees: on with
/// `RETYPE_MALLOC_HARDENED`, `RETYPE_MALLOC_SECURE` and with any of the measures below, which
/// rely on it.
pub(crate) static HARDENED: AtomicBool = AtomicBool::new(false);
/// Secure mode (`RETYPE_MALLOC_SECURE`, with no measure on but guard pages and realloc
/// moves, and no statistics): the free checks without the liveness bitmap and its atomic
/// instructions, a double free told by the freed block's free-list link, which only a free
/// block holds (see `hardened::check_not_free`); malloc and free have fast paths of their
/// own (see `secure`).
pub(crate) static SECURE: AtomicBool = AtomicBool::new(false);
/// Canaries after blocks, checked on free and realloc (`RETYPE_MALLOC_CANARY`, default: as
/// `RETYPE_MALLOC_HARDENED`).
pub(crate) static CANARY: AtomicBool = AtomicBool::new(false);
/// Guard pages around large blocks (`RETYPE_MALLOC_GUARD`, default: on in hardened and
/// secure mode).
pub(crate) static GUARD: AtomicBool = AtomicBool::new(false);
/// `malloc(0)` returns a pointer that faults on any access (`RETYPE_MALLOC_ZERO_FAULT`,
/// default: as `RETYPE_MALLOC_HARDENED`).
pub(crate) static ZERO_FAULT: AtomicBool = AtomicBool::new(false);
/// Freed small and medium blocks are zeroed (and freshly carved ones), and checked still zero
/// when handed out again (`RETYPE_MALLOC_ZERO_ON_FREE`, default: as `RETYPE_MALLOC_HARDENED`;
/// see `freed`).
pub(crate) static ZERO_ON_FREE: AtomicBool = AtomicBool::new(false);
/// Every block is zeroed when handed out (`RETYPE_MALLOC_ZERO_ON_MALLOC`, default: as
/// `RETYPE_MALLOC_HARDENED`).
pub(crate) static ZERO_ON_MALLOC: AtomicBool = AtomicBool::new(false);
/// `realloc` always moves the block, so it never hands back the address it frees
/// (`RETYPE_MALLOC_REALLOC_MOVES`, default: as `RETYPE_MALLOC_HARDENED`).
pub(crate) static REALLOC_MOVES: AtomicBool = AtomicBool::new(false);
/// The calling thread's quarantine is checked at exit (`RETYPE_MALLOC_EXIT_CHECK`, default: as
/// `RETYPE_MALLOC_HARDENED`).
pub(crate) static EXIT_CHECK: AtomicBool = AtomicBool::new(false);
/// Milliseconds an empty segment or large block is cached with its pages before they go
/// back to the OS (`RETYPE_MALLOC_PURGE_DELAY`, default 100; see `cache`).
pub(crate) static PURGE_DELAY_MS: AtomicU64 = AtomicU64::new(100);
/// Bytes of retired mappings the cache keeps with their pages at least before it returns the
/// oldest ones' pages (`RETYPE_MALLOC_CACHE_MIB`, default 128 MiB; see `cache` for the rest).
pub(crate) static CACHE_BYTES: AtomicUsize = AtomicUsize::new(128 << 20);
/// Byte bound of each thread's quarantine of freed blocks, 0 for none
/// (`RETYPE_MALLOC_QUARANTINE_BYTES`, default: [`HARDENED_QUARANTINE_BYTES`] in hardened mode).
pub(crate) static QUARANTINE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Milliseconds a freed block stays in quarantine at most (`RETYPE_MALLOC_QUARANTINE_MS`).
pub(crate) static QUARANTINE_MS: AtomicU64 = AtomicU64::new(1000);
/// Hardened mode's default quarantine bound in bytes.
const HARDENED_QUARANTINE_BYTES: u64 = 1 << 20;
/// Bytes mapped and faulted in at start-up for segments and large blocks, never returned to
/// the OS (`RETYPE_MALLOC_RESERVE`, default 0).
pub(crate) static RESERVE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Descriptor for the statistics report at exit, or -1 (`RETYPE_MALLOC_STATS`).
pub(crate) static STATS_FD: AtomicI32 = AtomicI32::new(-1);
/// The report at exit in JSON (`RETYPE_MALLOC_STATS=json`, or a path ending in `.json`).
pub(crate) static STATS_JSON: AtomicBool = AtomicBool::new(false);
/// Count live bytes for the report: every malloc and free takes the slow path (on with
/// `RETYPE_MALLOC_STATS`).
pub(crate) static COUNTED: AtomicBool = AtomicBool::new(false);

#[inline]
pub(crate) fn hardened() -> bool {
    HARDENED.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn secure() -> bool {
    SECURE.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn counted() -> bool {
    COUNTED.load(Ordering::Relaxed)
}

/// Whether every malloc and free must take the slow path (hardened or counted mode).
#[inline]
pub(crate) fn no_fast_path() -> bool {
    hardened() || counted()
}

#[inline]
pub(crate) fn huge_large() -> bool {
    HUGE_LARGE.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn canary() -> bool {
    CANARY.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn quarantine() -> bool {
    QUARANTINE_BYTES.load(Ordering::Relaxed) > 0
}

#[inline]
pub(crate) fn zero_fault() -> bool {
    ZERO_FAULT.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn guard() -> bool {
    GUARD.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn zero_on_free() -> bool {
    ZERO_ON_FREE.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn zero_on_malloc() -> bool {
    ZERO_ON_MALLOC.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn realloc_moves() -> bool {
    REALLOC_MOVES.load(Ordering::Relaxed)
}

#[inline]
pub(crate) fn exit_check() -> bool {
    EXIT_CHECK.load(Ordering::Relaxed)
}

/// The value of environment variable `name` as bytes, if set.
fn env(name: &core::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv gives null or an environment C string, alive unless the program edits it.
    unsafe {
        let v = libc::getenv(name.as_ptr());
        if v.is_null() {
            None
        } else {
            Some(core::ffi::CStr::from_ptr(v).to_bytes())
        }
    }
}

fn flag(name: &core::ffi::CStr, default: bool) -> bool {
    match env(name) {
        Some(b"0") | Some(b"no") | Some(b"off") | Some(b"false") => false,
        Some(b"") | None => default,
        Some(_) => true,
    }
}

fn number(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as u64)
    })
}

/// A size: a number of bytes, or of KiB, MiB or GiB with a suffix `K`, `M` or `G`.
fn size(v: &[u8]) -> Option<usize> {
    let (digits, shift) = match v.last()?.to_ascii_uppercase() {
        b'K' => (&v[..v.len() - 1], 10),
        b'M' => (&v[..v.len() - 1], 20),
        b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    (number(digits)? as usize).checked_mul(1 << shift)
}

/// Reads every setting; opens the statistics descriptor now, at start-up, because programs
/// may close their standard streams before exit.
pub(crate) fn load() {
    let huge = flag(c"RETYPE_MALLOC_HUGEPAGES", true);
    HUGE_PAGES.store(huge, Ordering::Relaxed);
    HUGE_LARGE.store(
        flag(c"RETYPE_MALLOC_HUGEPAGES_LARGE", huge),
        Ordering::Relaxed,
    );
    // `RETYPE_MALLOC_HARDENED` is the default of each measure; each may be set on its own.
    let all = flag(c"RETYPE_MALLOC_HARDENED", false);
    // Secure mode is the free checks and guard pages alone; hardened mode holds it.
    let secure = flag(c"RETYPE_MALLOC_SECURE", false) && !all;
    let canary = flag(c"RETYPE_MALLOC_CANARY", all);
    let guard = flag(c"RETYPE_MALLOC_GUARD", all || secure);
    let zero_fault = flag(c"RETYPE_MALLOC_ZERO_FAULT", all);
    let zero_on_free = flag(c"RETYPE_MALLOC_ZERO_ON_FREE", all);
    let zero_on_malloc = flag(c"RETYPE_MALLOC_ZERO_ON_MALLOC", all);
    let realloc_moves = flag(c"RETYPE_MALLOC_REALLOC_MOVES", all);
    let exit_check = flag(c"RETYPE_MALLOC_EXIT_CHECK", all);
    CANARY.store(canary, Ordering::Relaxed);
    GUARD.store(guard, Ordering::Relaxed);
    ZERO_FAULT.store(zero_fault, Ordering::Relaxed);
    ZERO_ON_FREE.store(zero_on_free, Ordering::Relaxed);
    ZERO_ON_MALLOC.store(zero_on_malloc, Ordering::Relaxed);
    REALLOC_MOVES.store(realloc_moves, Ordering::Relaxed);
    EXIT_CHECK.store(exit_check, Ordering::Relaxed);
    let default_bytes = if all { HARDENED_QUARANTINE_BYTES } else { 0 };
    let bytes = env(c"RETYPE_MALLOC_QUARANTINE_BYTES").and_then(number);
    let bytes = bytes.unwrap_or(default_bytes) as usize;
    QUARANTINE_BYTES.store(bytes, Ordering::Relaxed);
    if let Some(ms) = env(c"RETYPE_MALLOC_QUARANTINE_MS").and_then(number) {
        QUARANTINE_MS.store(ms, Ordering::Relaxed);
    }
    let others = canary || zero_fault || bytes > 0 || zero_on_free || zero_on_malloc || exit_check;
    let stats_fd = open_stats();
    SECURE.store(secure && !others && stats_fd < 0, Ordering::Relaxed);
    let any = all || secure || guard || realloc_moves || others;
    HARDENED.store(any, Ordering::Relaxed);
    if let Some(mib) = env(c"RETYPE_MALLOC_HUGEPAGES_MIN_MIB").and_then(number) {
        let segments = (mib as usize).div_ceil(SEGMENT_SIZE >> 20);
        HUGE_MIN_SEGMENTS.store(segments.min(EARLY_SLOTS), Ordering::Relaxed);
    }
    if let Some(ms) = env(c"RETYPE_MALLOC_PURGE_DELAY").and_then(number) {
        PURGE_DELAY_MS.store(ms, Ordering::Relaxed);
    }
    if let Some(bytes) = env(c"RETYPE_MALLOC_RESERVE").and_then(size) {
        RESERVE_BYTES.store(bytes, Ordering::Relaxed);
    }
    if let Some(mib) = env(c"RETYPE_MALLOC_CACHE_MIB").and_then(number) {
        CACHE_BYTES.store((mib as usize) << 20, Ordering::Relaxed);
    }
    STATS_FD.store(stats_fd, Ordering::Relaxed);
    COUNTED.store(stats_fd >= 0, Ordering::Relaxed);
}

/// Lowest descriptor number for the statistics descriptor: programs that close and reopen
/// their standard streams must not take it over.
const STATS_FD_MIN: i32 = 200;

/// Opens the statistics destination named by `RETYPE_MALLOC_STATS`: `1` (or `json`, for the
/// JSON form) is a copy of stderr, anything else a file path (in JSON if it ends in
/// `.json`); -1 when unset or unusable.
fn open_stats() -> i32 {
    // SAFETY: getenv returns null or a NUL-terminated string from the environment.
    let raw = unsafe { libc::getenv(c"RETYPE_MALLOC_STATS".as_ptr()) };
    let fd = match env(c"RETYPE_MALLOC_STATS") {
        None | Some(b"") | Some(b"0") => return -1,
        Some(b"1") => 2,
        Some(b"json") => {
            STATS_JSON.store(true, Ordering::Relaxed);
            2
        }
        Some(path) => {
            STATS_JSON.store(path.ends_with(b".json"), Ordering::Relaxed);
            // SAFETY: `raw` is the NUL-terminated path just read from the environment.
            unsafe {
                libc::open(
                    raw,
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                    0o644,
                )
            }
        }
    };
    if fd < 0 {
        return -1;
    }
    // SAFETY: plain descriptor operations on a descriptor we own (or stderr, which we keep).
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, STATS_FD_MIN);
        if fd != 2 {
            libc::close(fd);
        }
        high
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_parse_digits_only() {
        assert_eq!(super::number(b"250"), Some(250));
        assert_eq!(super::number(b"0"), Some(0));
        assert_eq!(super::number(b"1x"), None);
        assert_eq!(super::number(b""), None);
    }

    #[test]
    fn sizes_take_a_unit() {
        assert_eq!(super::size(b"4096"), Some(4096));
        assert_eq!(super::size(b"64M"), Some(64 << 20));
        assert_eq!(super::size(b"2g"), Some(2 << 30));
        assert_eq!(super::size(b"3K"), Some(3 << 10));
        assert_eq!(super::size(b"M"), None);
        assert_eq!(super::size(b"12X"), None);
    }
}
