//! The functions we forward to: the next definitions in the lookup order
//! (`dlsym(RTLD_NEXT)`), resolved once on first use. A recorder loaded into a
//! running process is not in the program's lookup order at all: there the
//! program's own definitions (`dlsym(RTLD_DEFAULT)`, which does not see a
//! library dlopen'ed locally) are the ones to forward to.
//!
//! dlsym itself may call malloc or calloc (dlerror's message for a missing
//! symbol). Those nested calls, made while this thread resolves, are served
//! from a static bootstrap arena whose blocks are never freed.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use libc::{c_char, c_int, c_void, pid_t, size_t};

pub type Malloc = unsafe extern "C" fn(size_t) -> *mut c_void;
pub type Calloc = unsafe extern "C" fn(size_t, size_t) -> *mut c_void;
pub type Realloc = unsafe extern "C" fn(*mut c_void, size_t) -> *mut c_void;
pub type Free = unsafe extern "C" fn(*mut c_void);
pub type PosixMemalign = unsafe extern "C" fn(*mut *mut c_void, size_t, size_t) -> c_int;
pub type AlignedAlloc = unsafe extern "C" fn(size_t, size_t) -> *mut c_void;
pub type Fork = unsafe extern "C" fn() -> pid_t;
pub type Execve =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
pub type Execv = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
pub type Fexecve = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
pub type Exit = unsafe extern "C" fn(c_int) -> !;
pub type Mmap =
    unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, libc::off_t) -> *mut c_void;
pub type Munmap = unsafe extern "C" fn(*mut c_void, size_t) -> c_int;
/// `mremap` is C-variadic for its fifth argument, which it reads only with
/// `MREMAP_FIXED`: passed always, as a plain argument.
pub type Mremap =
    unsafe extern "C" fn(*mut c_void, size_t, size_t, c_int, *mut c_void) -> *mut c_void;
pub type Brk = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type Sbrk = unsafe extern "C" fn(libc::intptr_t) -> *mut c_void;
pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
pub type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> c_int;

/// The next allocator, the process functions and the mapping calls we wrap.
pub struct Real {
    pub malloc: Malloc,
    pub calloc: Calloc,
    pub realloc: Realloc,
    pub free: Free,
    pub posix_memalign: PosixMemalign,
    pub aligned_alloc: AlignedAlloc,
    pub memalign: AlignedAlloc,
    pub valloc: Malloc,
    pub pvalloc: Option<Malloc>,
    pub fork: Fork,
    pub pthread_create: PthreadCreate,
    pub execve: Execve,
    pub execv: Execv,
    pub execvp: Execv,
    pub execvpe: Execve,
    pub fexecve: Fexecve,
    pub exit: Exit,
    pub exit_upper: Exit,
    pub mmap: Mmap,
    pub munmap: Munmap,
    pub mremap: Mremap,
    pub brk: Brk,
    pub sbrk: Sbrk,
}

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const READY: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNRESOLVED);
/// Resolve in the program's lookup order (the recorder was loaded late).
static LATE: AtomicBool = AtomicBool::new(false);

/// Whether the program's `malloc` is ours: the recorder was preloaded, not
/// loaded into the running process later.
pub fn interposed() -> bool {
    // SAFETY: the name is NUL-terminated; dlsym and dladdr do not allocate on success.
    unsafe {
        let found = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        same_object(found, (&raw const STATE).cast())
    }
}

/// Whether addresses `a` and `b` lie in the same loaded object.
fn same_object(a: *const c_void, b: *const c_void) -> bool {
    // SAFETY: all-zero Dl_info structs are valid; dladdr fills them.
    unsafe {
        let (mut ia, mut ib): (libc::Dl_info, libc::Dl_info) =
            (std::mem::zeroed(), std::mem::zeroed());
        !a.is_null()
            && libc::dladdr(a, &mut ia) != 0
            && libc::dladdr(b, &mut ib) != 0
            && ia.dli_fbase == ib.dli_fbase
    }
}

/// Forwards to the program's own definitions: called before the first
/// [`real`] by a recorder loaded into a running process.
pub fn resolve_late() {
    LATE.store(true, Ordering::Release);
}

struct Slot(UnsafeCell<Option<Real>>);
// SAFETY: written once by the resolving thread before STATE becomes READY
// (Release), read only after observing READY (Acquire).
unsafe impl Sync for Slot {}
static REAL: Slot = Slot(UnsafeCell::new(None));

thread_local! {
    /// This thread is inside dlsym: its nested allocations use the arena.
    static IN_DLSYM: Cell<bool> = const { Cell::new(false) };
}

/// The forwarding targets, or `None` while this very thread is resolving them
/// (the caller then serves the request from the bootstrap arena).
#[inline]
pub fn real() -> Option<&'static Real> {
    if STATE.load(Ordering::Acquire) == READY {
        // SAFETY: READY is stored after the slot is written (not `as_ref`:
        // the slot is never `None` then, and that check is every call's).
        return Some(unsafe { resolved() });
    }
    resolve_slow()
}

/// The forwarding targets, without [`real`]'s check.
///
/// # Safety
/// They were resolved, and this thread has seen that (see
/// [`crate::recording::state`]).
#[inline(always)]
pub unsafe fn resolved() -> &'static Real {
    // SAFETY: resolved, the caller says: the slot holds them and is not written again.
    unsafe { (*REAL.0.get()).as_ref().unwrap_unchecked() }
}

#[cold]
fn resolve_slow() -> Option<&'static Real> {
    if IN_DLSYM.get() {
        return None;
    }
    if STATE
        .compare_exchange(UNRESOLVED, RESOLVING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        IN_DLSYM.set(true);
        let r = resolve();
        // SAFETY: only this thread writes, and no reader looks before READY.
        unsafe { *REAL.0.get() = Some(r) };
        IN_DLSYM.set(false);
        STATE.store(READY, Ordering::Release);
    }
    while STATE.load(Ordering::Acquire) != READY {
        std::hint::spin_loop();
    }
    // SAFETY: READY observed.
    unsafe { (*REAL.0.get()).as_ref() }
}

/// The definition of `name` (NUL-terminated) we forward to, or null.
fn next(name: &[u8]) -> *mut c_void {
    let handle = if LATE.load(Ordering::Acquire) {
        libc::RTLD_DEFAULT
    } else {
        libc::RTLD_NEXT
    };
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::dlsym(handle, name.as_ptr().cast()) }
}

macro_rules! required {
    ($name:literal, $ty:ty) => {{
        let p = next(concat!($name, "\0").as_bytes());
        if p.is_null() {
            let _ = crate::sys::write_all(
                2,
                concat!("retype recorder: no next definition of ", $name, "\n").as_bytes(),
            );
            // SAFETY: abort has no preconditions.
            unsafe { libc::abort() }
        }
        // SAFETY: the symbol is the C function of that name, whose type we declare.
        unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
    }};
}

macro_rules! optional {
    ($name:literal, $ty:ty) => {{
        let p = next(concat!($name, "\0").as_bytes());
        // SAFETY: as above; null becomes None.
        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, $ty>(p) })
    }};
}

fn resolve() -> Real {
    Real {
        malloc: required!("malloc", Malloc),
        calloc: required!("calloc", Calloc),
        realloc: required!("realloc", Realloc),
        free: required!("free", Free),
        posix_memalign: required!("posix_memalign", PosixMemalign),
        aligned_alloc: required!("aligned_alloc", AlignedAlloc),
        memalign: required!("memalign", AlignedAlloc),
        valloc: required!("valloc", Malloc),
        pvalloc: optional!("pvalloc", Malloc),
        fork: required!("fork", Fork),
        pthread_create: required!("pthread_create", PthreadCreate),
        execve: required!("execve", Execve),
        execv: required!("execv", Execv),
        execvp: required!("execvp", Execv),
        execvpe: required!("execvpe", Execve),
        fexecve: required!("fexecve", Fexecve),
        exit: required!("_exit", Exit),
        exit_upper: required!("_Exit", Exit),
        mmap: required!("mmap", Mmap),
        munmap: required!("munmap", Munmap),
        mremap: required!("mremap", Mremap),
        brk: required!("brk", Brk),
        sbrk: required!("sbrk", Sbrk),
    }
}

/// The bootstrap arena: enough for dlsym's few small allocations.
const ARENA: usize = 256 * 1024;
/// Each block starts with its size, keeping payloads 16-byte aligned.
const HEADER: usize = 16;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA]>);
// SAFETY: disjoint blocks are handed out by an atomic bump pointer.
unsafe impl Sync for Arena {}
static ARENA_BYTES: Arena = Arena(UnsafeCell::new([0; ARENA]));
static ARENA_TOP: AtomicUsize = AtomicUsize::new(0);

/// A zeroed block of `size` bytes aligned to `align` (≤ 4096) from the arena, or null.
pub fn bootstrap_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(HEADER);
    let base = ARENA_BYTES.0.get() as usize;
    let mut top = ARENA_TOP.load(Ordering::Relaxed);
    loop {
        let start = (base + top + HEADER).next_multiple_of(align) - base;
        let Some(end) = start
            .checked_add(size)
            .filter(|&e| e <= ARENA && align <= 4096)
        else {
            return std::ptr::null_mut();
        };
        match ARENA_TOP.compare_exchange_weak(top, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                // SAFETY: [start - HEADER, end) lies in the arena and belongs to this block only.
                unsafe { ((base + start - HEADER) as *mut usize).write(size) };
                return (base + start) as *mut c_void;
            }
            Err(t) => top = t,
        }
    }
}

/// The size of an arena block, if `p` is one.
pub fn bootstrap_size(p: *mut c_void) -> Option<usize> {
    let base = ARENA_BYTES.0.get() as usize;
    let p = p as usize;
    // One compare for `base + HEADER <= p < base + ARENA` (every free asks).
    // SAFETY: arena blocks are preceded by their size.
    (p.wrapping_sub(base + HEADER) < ARENA - HEADER)
        .then(|| unsafe { ((p - HEADER) as *const usize).read() })
}
