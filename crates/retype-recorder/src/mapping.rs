//! The program's mapping calls: exported `mmap`, `mmap64`, `munmap`,
//! `mremap`, `brk` and `sbrk`, each forwarded to the next definition (libc's)
//! and, when it succeeded and changed something, written to the trace as one
//! mapping record (address, length, prot and flags, the time, the thread,
//! the stack if stacks are on). They are kept out of the heap: the analyses
//! show them as the bytes the program mapped, beside its RSS.
//!
//! Whose calls are recorded: the program's and its libraries', through their
//! PLT or GOT. Not recorded: calls made inside the recorder (its buffers and
//! tables are not the program's memory) or inside the allocator it forwards
//! to while it serves a call (a preloaded jemalloc's own mmaps), which the
//! thread's busy mark tells; and glibc's malloc, which maps its large blocks
//! and moves the break with internal calls no preloaded library sees. Those
//! blocks are the program's memory all the same, counted once: as the heap
//! blocks they are. A failed call, or an `sbrk(0)` that only asks, changes
//! nothing and is not recorded.

use libc::{c_int, c_long, c_void, intptr_t, off_t, size_t};
use retype_trace::{codec, MapOp, Mapping};

use crate::hooks::{enter, export, stack};
use crate::real::real;
use crate::stacks::Entry;
use crate::{gate, rss, settings, stack_table, sys};

/// Runs `call`, and writes the mapping `mapping` makes of its result, if any
/// and if the call is recorded; `at` is where the program called from.
#[inline(always)]
fn traced<T: Copy>(
    at: Entry,
    call: impl FnOnce() -> T,
    mapping: impl FnOnce(T) -> Option<Mapping>,
) -> T {
    let Some((l, _busy)) = enter() else {
        return call();
    };
    let stack = stack(l, settings::get(), at);
    let t0 = rss::tick(sys::ticks());
    let v = call();
    if let Some(m) = mapping(v) {
        write(&Mapping {
            thread: sys::gettid(),
            time_ns: sys::TickScale::now().time_ns(t0),
            stack,
            ..m
        });
    }
    v
}

/// Writes a mapping record, after the stack record it names.
fn write(m: &Mapping) {
    if m.stack != 0 {
        stack_table::flush(false);
    }
    let mut rec = [0u8; codec::MAX_VARINT_RECORD];
    if let Some(n) = codec::varint_record(&mut rec, codec::TAG_MAPPING, &codec::mapping_fields(m)) {
        gate::write(&rec[..n]);
    }
}

/// Exports C function `$name` of five or six arguments, whose body takes
/// them and then the [`Entry`] registers: there is no free argument
/// register left, so on x86-64 a naked trampoline passes them on the stack
/// (a call, not a jump: the stack keeps 16-byte alignment).
macro_rules! export_spilled {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $body:ident) => {
        /// # Safety
        /// The C contract of the function of this name.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($(_: $ty),*) -> $ret {
            core::arch::naked_asm!(
                "sub rsp, 8",
                "push rbp",
                "lea rax, [rsp + 16]",
                "push rax",
                "call {}",
                "add rsp, 24",
                "ret",
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

export_spilled!(mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void = mmap_body);
export_spilled!(mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void = mmap_body);
// The sixth argument pads the fifth (read only with MREMAP_FIXED) to a whole register set.
export_spilled!(mremap(old: *mut c_void, old_len: size_t, len: size_t, flags: c_int, new: *mut c_void, pad: usize) -> *mut c_void = mremap_body);
export!(munmap(addr: *mut c_void, len: size_t) -> c_int = munmap_body, "rdx", "rcx");
export!(brk(addr: *mut c_void) -> c_int = brk_body, "rsi", "rdx");
export!(sbrk(increment: intptr_t) -> *mut c_void = sbrk_body, "rsi", "rdx");

/// The raw system call `nr`, for a call made while this thread resolves the
/// next definitions (see [`real`]).
fn raw(nr: c_long, args: [usize; 6]) -> usize {
    // SAFETY: the caller's arguments, passed on as the kernel takes them.
    unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]) as usize }
}

/// # Safety
/// The C `mmap` contract.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mmap_body(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
    sp: u64,
    bp: u64,
) -> *mut c_void {
    let Some(r) = real() else {
        let args = [
            addr as usize,
            len,
            prot as usize,
            flags as usize,
            fd as usize,
            off as usize,
        ];
        return raw(libc::SYS_mmap, args) as *mut c_void;
    };
    traced(
        Entry { sp, bp },
        // SAFETY: forwarding the caller's arguments.
        || unsafe { (r.mmap)(addr, len, prot, flags, fd, off) },
        |p| {
            (p != libc::MAP_FAILED).then_some(Mapping {
                op: MapOp::Mmap,
                addr: p as u64,
                len: len as u64,
                prot: prot as u32,
                flags: flags as u32,
                ..Mapping::default()
            })
        },
    )
}

/// # Safety
/// The C `mremap` contract.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mremap_body(
    old: *mut c_void,
    old_len: size_t,
    len: size_t,
    flags: c_int,
    new: *mut c_void,
    _pad: usize,
    sp: u64,
    bp: u64,
) -> *mut c_void {
    let Some(r) = real() else {
        let args = [old as usize, old_len, len, flags as usize, new as usize, 0];
        return raw(libc::SYS_mremap, args) as *mut c_void;
    };
    traced(
        Entry { sp, bp },
        // SAFETY: forwarding.
        || unsafe { (r.mremap)(old, old_len, len, flags, new) },
        |p| {
            (p != libc::MAP_FAILED).then_some(Mapping {
                op: MapOp::Mremap,
                addr: p as u64,
                len: len as u64,
                old_addr: old as u64,
                old_len: old_len as u64,
                flags: flags as u32,
                ..Mapping::default()
            })
        },
    )
}

/// # Safety
/// The C `munmap` contract.
unsafe extern "C" fn munmap_body(addr: *mut c_void, len: size_t, sp: u64, bp: u64) -> c_int {
    let Some(r) = real() else {
        return raw(libc::SYS_munmap, [addr as usize, len, 0, 0, 0, 0]) as c_int;
    };
    traced(
        Entry { sp, bp },
        // SAFETY: forwarding.
        || unsafe { (r.munmap)(addr, len) },
        |rc| {
            (rc == 0).then_some(Mapping {
                op: MapOp::Munmap,
                addr: addr as u64,
                len: len as u64,
                ..Mapping::default()
            })
        },
    )
}

/// The break moved from `old` to `new`, if it moved.
fn moved(old: *mut c_void, new: u64) -> Option<Mapping> {
    (old as u64 != new).then_some(Mapping {
        op: MapOp::Brk,
        addr: new,
        old_addr: old as u64,
        ..Mapping::default()
    })
}

/// A call to the break functions while this thread resolves them: refused.
fn no_break() {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
}

/// # Safety
/// The C `brk` contract.
unsafe extern "C" fn brk_body(addr: *mut c_void, sp: u64, bp: u64) -> c_int {
    let Some(r) = real() else {
        no_break();
        return -1;
    };
    let (rc, _) = traced(
        Entry { sp, bp },
        // SAFETY: forwarding; sbrk(0) only reads the break (before the call).
        || unsafe {
            let old = (r.sbrk)(0);
            ((r.brk)(addr), old)
        },
        |(rc, old)| moved(old, addr as u64).filter(|_| rc == 0),
    );
    rc
}

/// # Safety
/// The C `sbrk` contract.
unsafe extern "C" fn sbrk_body(increment: intptr_t, sp: u64, bp: u64) -> *mut c_void {
    let Some(r) = real() else {
        no_break();
        return usize::MAX as *mut c_void;
    };
    traced(
        Entry { sp, bp },
        // SAFETY: forwarding.
        || unsafe { (r.sbrk)(increment) },
        |old| {
            let failed = old as usize == usize::MAX;
            moved(old, (old as u64).wrapping_add(increment as u64)).filter(|_| !failed)
        },
    )
}
