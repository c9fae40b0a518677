//! The calling thread's heap pointer, the one piece of thread-local state.
//!
//! On x86-64 Linux it lives in the static TLS block and is read with the initial-exec model
//! (`mov` relative to `%fs`), which stable Rust cannot request for a cdylib: its
//! `thread_local!` would call `__tls_get_addr` on every malloc and free. Elsewhere it falls
//! back to `thread_local!`. The initial value is null.
//!
//! The slot is untyped: `heap` stores its heap here and casts it back, so this module needs
//! no other (and `heap` may sit above it).

use core::ffi::c_void;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use super::c_void;
    use core::arch::{asm, global_asm};

    global_asm!(
        ".section .tbss.retype_malloc_heap,\"awT\",@nobits",
        ".globl retype_malloc_heap",
        ".hidden retype_malloc_heap",
        ".p2align 3",
        ".type retype_malloc_heap,@object",
        ".size retype_malloc_heap,8",
        "retype_malloc_heap:",
        ".zero 8",
        ".text",
    );

    #[inline(always)]
    pub(crate) fn get() -> *mut c_void {
        let v: *mut c_void;
        // SAFETY: reads this thread's 8-byte slot at its static-TLS offset from %fs.
        unsafe {
            asm!(
                "mov {off}, qword ptr [rip + retype_malloc_heap@GOTTPOFF]",
                "mov {v}, qword ptr fs:[{off}]",
                off = out(reg) _,
                v = lateout(reg) v,
                options(nostack, readonly, preserves_flags),
            )
        };
        v
    }

    pub(crate) fn set(h: *mut c_void) {
        // SAFETY: writes this thread's own slot.
        unsafe {
            asm!(
                "mov {off}, qword ptr [rip + retype_malloc_heap@GOTTPOFF]",
                "mov qword ptr fs:[{off}], {h}",
                off = out(reg) _,
                h = in(reg) h,
                options(nostack, preserves_flags),
            )
        };
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::c_void;
    use core::cell::Cell;

    thread_local! {
        static CURRENT: Cell<*mut c_void> = const { Cell::new(core::ptr::null_mut()) };
    }

    #[inline(always)]
    pub(crate) fn get() -> *mut c_void {
        CURRENT.with(|c| c.get())
    }

    pub(crate) fn set(h: *mut c_void) {
        CURRENT.with(|c| c.set(h))
    }
}

pub(crate) use imp::{get, set};
