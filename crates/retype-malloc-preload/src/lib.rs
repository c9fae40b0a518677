//! `libretype_malloc_preload.so`: the C malloc family over retype-malloc, for
//! `LD_PRELOAD=target/release/libretype_malloc_preload.so program`.
//!
//! Only the C shims live here (exact C and glibc semantics: errno, EINVAL, NULL cases); the
//! allocator itself is the `retype-malloc` crate. Nothing may depend on this crate as a Rust
//! library: linked in, its `malloc` would replace the host program's.

use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use libc::{c_int, size_t};
use retype_malloc as rm;

const OS_PAGE: usize = 4096;

fn set_errno(e: c_int) {
    // SAFETY: errno is the calling thread's own.
    unsafe { *libc::__errno_location() = e };
}

/// Initialises the allocator at load time, so settings and the statistics descriptor are taken
/// at start-up.
extern "C" fn init() {
    rm::init();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

/// C `malloc`.
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: size_t) -> *mut c_void {
    // SAFETY: plain allocation; it sets errno itself, so this is a tail call.
    unsafe { rm::malloc(size) }.cast()
}

/// C `free`; `free(NULL)` does nothing.
///
/// # Safety
/// `p` must be NULL or a live pointer from this allocator.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: caller's contract.
    unsafe { rm::free(p.cast()) }
}

/// C `calloc`: NULL and ENOMEM when `n * size` overflows.
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: size_t, size: size_t) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: plain allocation.
        Some(total) => rm::enomem_if_null(unsafe { rm::malloc_zeroed(total) }).cast(),
        None => rm::enomem_if_null(ptr::null_mut()).cast(),
    }
}

/// C `realloc`: `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and returns
/// NULL (glibc's behaviour); on failure `p` is left untouched.
///
/// # Safety
/// `p` must be NULL or a live pointer from this allocator.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: size_t) -> *mut c_void {
    // SAFETY: caller's contract.
    unsafe {
        if p.is_null() {
            return malloc(size);
        }
        if size == 0 {
            rm::free(p.cast());
            return ptr::null_mut();
        }
        rm::enomem_if_null(rm::realloc(p.cast(), size)).cast()
    }
}

/// C `reallocarray`: `realloc(p, n * size)` with overflow reported as ENOMEM.
///
/// # Safety
/// As [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: size_t, size: size_t) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: caller's contract.
        Some(total) => unsafe { realloc(p, total) },
        None => rm::enomem_if_null(ptr::null_mut()).cast(),
    }
}

/// Allocates with a power-of-two alignment, setting ENOMEM on failure.
fn aligned(align: usize, size: usize) -> *mut c_void {
    // SAFETY: `align` is a power of two.
    rm::enomem_if_null(unsafe { rm::malloc_aligned(size, align) }).cast()
}

/// C `posix_memalign`: EINVAL unless `align` is a power of two multiple of `sizeof(void *)`;
/// ENOMEM when out of memory; errno is not touched.
///
/// # Safety
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(
    out: *mut *mut c_void,
    align: size_t,
    size: size_t,
) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    // SAFETY: `align` is a power of two.
    let p = unsafe { rm::malloc_aligned(size, align) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: caller's contract.
    unsafe { *out = p.cast() };
    0
}

/// C11 `aligned_alloc`: EINVAL and NULL unless `align` is a power of two.
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: size_t, size: size_t) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `memalign`: like glibc, an alignment that is not a power of two is rounded up to one;
/// EINVAL when that is impossible.
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: size_t, size: size_t) -> *mut c_void {
    match align.max(1).checked_next_power_of_two() {
        Some(a) if a <= isize::MAX as usize => aligned(a, size),
        _ => {
            set_errno(libc::EINVAL);
            ptr::null_mut()
        }
    }
}

/// `valloc`: page-aligned memory.
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: size_t) -> *mut c_void {
    aligned(OS_PAGE, size)
}

/// `pvalloc`: page-aligned memory, size rounded up to whole pages (one page for 0).
///
/// # Safety
/// C ABI entry point.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: size_t) -> *mut c_void {
    match size.max(1).checked_add(OS_PAGE - 1) {
        Some(s) => aligned(OS_PAGE, s & !(OS_PAGE - 1)),
        None => rm::enomem_if_null(ptr::null_mut()).cast(),
    }
}

/// `malloc_usable_size`: the exact number of bytes usable at `p` (0 for NULL).
///
/// # Safety
/// `p` must be NULL or a live pointer from this allocator.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> size_t {
    if p.is_null() {
        return 0;
    }
    // SAFETY: caller's contract.
    unsafe { rm::usable_size(p.cast()) }
}

/// `mallopt`: accepted and ignored (retype-malloc is tuned by environment variables).
#[no_mangle]
pub extern "C" fn mallopt(_param: c_int, _value: c_int) -> c_int {
    1
}

/// `malloc_trim`: returns retired memory to the OS now.
#[no_mangle]
pub extern "C" fn malloc_trim(_pad: size_t) -> c_int {
    rm::trim();
    1
}

/// `mallinfo2`: the statistics in glibc's fields, as `retype_malloc::Mallinfo` defines them.
#[no_mangle]
pub extern "C" fn mallinfo2() -> libc::mallinfo2 {
    let m = rm::stats().mallinfo();
    libc::mallinfo2 {
        arena: m.arena,
        ordblks: m.ordblks,
        smblks: m.smblks,
        hblks: m.hblks,
        hblkhd: m.hblkhd,
        usmblks: m.usmblks,
        fsmblks: m.fsmblks,
        uordblks: m.uordblks,
        fordblks: m.fordblks,
        keepcost: m.keepcost,
    }
}

/// `mallinfo`: [`mallinfo2`]'s fields as C `int`s, each at most `INT_MAX` (glibc wraps them).
#[no_mangle]
pub extern "C" fn mallinfo() -> libc::mallinfo {
    let m = mallinfo2();
    let int = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
    libc::mallinfo {
        arena: int(m.arena),
        ordblks: int(m.ordblks),
        smblks: int(m.smblks),
        hblks: int(m.hblks),
        hblkhd: int(m.hblkhd),
        usmblks: int(m.usmblks),
        fsmblks: int(m.fsmblks),
        uordblks: int(m.uordblks),
        fordblks: int(m.fordblks),
        keepcost: int(m.keepcost),
    }
}

/// `malloc_info`: the statistics in glibc's XML form on `stream`, one `<heap>` per thread
/// heap (see `retype_malloc::Stats::write_xml`); EINVAL unless `options` is 0, as glibc.
///
/// # Safety
/// `stream` must be an open C stream.
#[no_mangle]
pub unsafe extern "C" fn malloc_info(options: c_int, stream: *mut libc::FILE) -> c_int {
    if options != 0 {
        return libc::EINVAL;
    }
    // Taken before anything is written: the stream may allocate its buffer.
    let stats = rm::stats();
    stats.write_xml(&mut |piece| {
        // SAFETY: the caller's stream; `piece` is valid for its length.
        unsafe { libc::fwrite(piece.as_ptr().cast(), 1, piece.len(), stream) };
    });
    0
}

/// `malloc_stats`: the statistics report, on standard error.
#[no_mangle]
pub extern "C" fn malloc_stats() {
    rm::print_stats(2);
}

/// The C library's `pthread_join`, found once (`dlsym(RTLD_NEXT)`, after this library).
static REAL_JOIN: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

type JoinFn = unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> c_int;

/// `pthread_join`: the calling thread parks its heap before it waits (see
/// `retype_malloc::park`), so a thread that hands its blocks to one it creates and joins
/// does not strand them (a chain of threads, each joining the next, kept every heap whole).
///
/// # Safety
/// As the C library's `pthread_join`.
#[no_mangle]
pub unsafe extern "C" fn pthread_join(thread: libc::pthread_t, ret: *mut *mut c_void) -> c_int {
    let mut join = REAL_JOIN.load(Ordering::Acquire);
    if join.is_null() {
        // SAFETY: a symbol lookup; the C library defines pthread_join.
        join = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_join".as_ptr()) };
        if join.is_null() {
            return libc::ENOSYS;
        }
        REAL_JOIN.store(join, Ordering::Release);
    }
    rm::park();
    // SAFETY: `join` is the C library's pthread_join, called with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, JoinFn>(join)(thread, ret) }
}

/// Defines `__libc_*` aliases: glibc exports them publicly, and memory a program obtains
/// through them must come from (and go back to) the same allocator as plain malloc.
macro_rules! libc_alias {
    ($($alias:ident => $target:ident ($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($alias), "`: same as `", stringify!($target), "`.")]
        ///
        /// # Safety
        /// As the function it aliases.
        #[no_mangle]
        pub unsafe extern "C" fn $alias($($arg: $ty),*) -> $ret {
            // SAFETY: forwarded with the caller's contract.
            unsafe { $target($($arg),*) }
        }
    )*};
}

libc_alias! {
    __libc_malloc => malloc(size: size_t) -> *mut c_void;
    __libc_free => free(p: *mut c_void) -> ();
    __libc_calloc => calloc(n: size_t, size: size_t) -> *mut c_void;
    __libc_realloc => realloc(p: *mut c_void, size: size_t) -> *mut c_void;
    __libc_memalign => memalign(align: size_t, size: size_t) -> *mut c_void;
    __libc_valloc => valloc(size: size_t) -> *mut c_void;
    __libc_pvalloc => pvalloc(size: size_t) -> *mut c_void;
}
