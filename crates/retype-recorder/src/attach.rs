//! The recorder loaded into a running process (`retype record --pid`): the
//! CLI stops one thread with ptrace, makes it call `dlopen` on this library
//! and then [`retype_attach`] with the settings, and lets it run on; later
//! [`retype_detach`], called the same way, ends the trace and leaves the
//! process running.
//!
//! The library's constructor starts nothing when it is loaded so (see
//! [`crate::real::interposed`]): [`retype_attach`] takes the settings from its
//! text, forwards to the program's own allocator, opens the trace and then
//! rewrites the loaded objects' GOT slots ([`got`]) so that the program's
//! calls reach the hooks. [`retype_detach`] ends the trace and puts the slots
//! back; the library stays mapped (another thread may be inside a hook, or may
//! hold a pointer to one), its hooks forwarding without a record.
//!
//! Both return codes the CLI reads: see [`Refused`].

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_char, c_void, size_t, ssize_t};

use crate::got::{self, Hook};
use crate::{output, process, real, settings};

/// Why an attach or a detach was refused (the negated value is returned).
#[repr(isize)]
enum Refused {
    /// The process runs with the recorder preloaded: its toggle signal
    /// starts and stops recording.
    Preloaded = 1,
    /// The recorder was attached to this process before (once per process).
    AttachedBefore = 2,
    /// The trace could not be created (the process's stderr says why).
    NoTrace = 3,
    /// No loaded object calls the malloc family through a GOT slot.
    NoSlots = 4,
    /// Detach: the recorder is not attached.
    NotAttached = 5,
}

/// Every function of ours the program's calls are redirected to.
const HOOKED: [&CStr; 28] = [
    c"malloc",
    c"calloc",
    c"realloc",
    c"reallocarray",
    c"free",
    c"posix_memalign",
    c"aligned_alloc",
    c"memalign",
    c"valloc",
    c"pvalloc",
    c"fork",
    c"execve",
    c"execv",
    c"execvp",
    c"execvpe",
    c"fexecve",
    c"execl",
    c"execlp",
    c"execle",
    c"_exit",
    c"_Exit",
    c"pthread_create",
    c"mmap",
    c"mmap64",
    c"munmap",
    c"mremap",
    c"brk",
    c"sbrk",
];

/// The recorder records in this process, attached.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Starts recording with the settings in `config` (`NAME=VALUE` lines, the
/// variables of `docs/environment.md`); 0, or a negated [`Refused`].
///
/// # Safety
/// `config` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn retype_attach(config: *const c_char) -> ssize_t {
    if real::interposed() {
        return -(Refused::Preloaded as ssize_t);
    }
    // SAFETY: per the contract.
    let text = unsafe { CStr::from_ptr(config) }.to_bytes();
    if !settings::set(text) {
        return -(Refused::AttachedBefore as ssize_t);
    }
    real::resolve_late();
    let Some((own, hooks)) = own_hooks() else {
        return -(Refused::NoSlots as ssize_t);
    };
    if !process::attach() || !output::writable() {
        return -(Refused::NoTrace as ssize_t);
    }
    output::close_on_exec();
    ATTACHED.store(true, Ordering::Release);
    if got::redirect(&hooks, own) == 0 {
        process::detach();
        return -(Refused::NoSlots as ssize_t);
    }
    0
}

/// Ends the trace, puts the program's calls back as they were and writes the
/// trace's path into `path` (at most `cap` bytes); its length, or a negated
/// [`Refused`].
///
/// # Safety
/// `path` has room for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn retype_detach(path: *mut c_char, cap: size_t) -> ssize_t {
    if !ATTACHED.swap(false, Ordering::AcqRel) {
        return -(Refused::NotAttached as ssize_t);
    }
    // SAFETY: per the contract.
    let out = unsafe { std::slice::from_raw_parts_mut(path.cast::<u8>(), cap) };
    let n = output::path(out);
    got::restore();
    process::detach();
    n as ssize_t
}

/// This library's base address and its definitions of [`HOOKED`] (looked
/// up in the library itself: a reference from Rust could resolve to the
/// program's definition of the same name).
fn own_hooks() -> Option<(usize, Vec<Hook>)> {
    // SAFETY: an all-zero Dl_info is valid; dladdr fills it; dlopen with
    // RTLD_NOLOAD only finds the library already loaded (this one).
    let handle = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr((&raw const ATTACHED).cast(), &mut info) == 0 {
            return None;
        }
        let handle = libc::dlopen(info.dli_fname, libc::RTLD_NOLOAD | libc::RTLD_NOW);
        (!handle.is_null()).then_some((info.dli_fbase as usize, handle))
    };
    let (base, handle) = handle?;
    let hooks = HOOKED
        .iter()
        .filter_map(|&name| {
            // SAFETY: `handle` is ours; the name is NUL-terminated.
            let to: *mut c_void = unsafe { libc::dlsym(handle, name.as_ptr()) };
            (!to.is_null()).then_some(Hook {
                name,
                to: to as usize,
            })
        })
        .collect();
    Some((base, hooks))
}
