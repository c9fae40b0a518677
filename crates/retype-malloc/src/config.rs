//! Settings read once from the environment at start-up (see the crate documentation for the
//! list). Reading uses `getenv`, which does not allocate.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// Back segments with transparent huge pages (`RETYPE_MALLOC_HUGEPAGES`, default on).
pub(crate) static HUGE_PAGES: AtomicBool = AtomicBool::new(true);
/// Detect double and invalid frees (`RETYPE_MALLOC_HARDENED`, default off).
pub(crate) static HARDENED: AtomicBool = AtomicBool::new(false);
/// Milliseconds an empty segment or large block is kept before it goes back to the OS
/// (`RETYPE_MALLOC_PURGE_DELAY`, default 100).
pub(crate) static PURGE_DELAY_MS: AtomicU64 = AtomicU64::new(100);
/// Descriptor for the statistics report at exit, or -1 (`RETYPE_MALLOC_STATS`).
pub(crate) static STATS_FD: AtomicI32 = AtomicI32::new(-1);

#[inline]
pub(crate) fn hardened() -> bool {
    HARDENED.load(Ordering::Relaxed)
}

/// The value of environment variable `name` (NUL-terminated) as bytes, if set.
fn env(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv returns a pointer into the environment block,
    // which lives as long as the process unless the program edits it.
    unsafe {
        let v = libc::getenv(name.as_ptr().cast());
        if v.is_null() {
            None
        } else {
            Some(core::ffi::CStr::from_ptr(v).to_bytes())
        }
    }
}

fn flag(name: &[u8], default: bool) -> bool {
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
    v.iter().try_fold(0u64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as u64))
}

/// Reads every setting; opens the statistics descriptor now, at start-up, because programs
/// may close their standard streams before exit.
pub(crate) fn load() {
    HUGE_PAGES.store(flag(b"RETYPE_MALLOC_HUGEPAGES\0", true), Ordering::Relaxed);
    HARDENED.store(flag(b"RETYPE_MALLOC_HARDENED\0", false), Ordering::Relaxed);
    if let Some(ms) = env(b"RETYPE_MALLOC_PURGE_DELAY\0").and_then(number) {
        PURGE_DELAY_MS.store(ms, Ordering::Relaxed);
    }
    match env(b"RETYPE_MALLOC_STATS\0") {
        None | Some(b"") | Some(b"0") => {}
        // SAFETY: duplicating descriptor 2 has no memory-safety preconditions.
        Some(b"1") => STATS_FD.store(unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) }, Ordering::Relaxed),
        Some(_) => {
            let path = env(b"RETYPE_MALLOC_STATS\0").map(|_| {
                // SAFETY: getenv's result is NUL-terminated.
                unsafe { libc::getenv(b"RETYPE_MALLOC_STATS\0".as_ptr().cast()) }
            });
            if let Some(path) = path {
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
                // SAFETY: `path` is a NUL-terminated string from the environment.
                let fd = unsafe { libc::open(path, flags, 0o644) };
                STATS_FD.store(fd, Ordering::Relaxed);
            }
        }
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
}
