//! The signals behind [`crate::fault`]: SIGSEGV and SIGBUS in a registered
//! window reach that space's handler.
//!
//! The handler runs inside the signal handler but synchronously: the fault
//! comes from an application load or store to the window, never from inside
//! the allocator or a lock, so it may allocate and invoke the space. It runs
//! on the thread's own stack (no SA_ONSTACK), so a handler may do real work.
//! A fault the handler does not resolve, or one outside every window, goes to
//! the handler that was installed before ours for that signal (Rust's
//! stack-overflow report, or the default action: the process dies of the
//! signal as it would have).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Once, OnceLock};

use crate::fault::{Fault, Resolution};
use crate::shared::Shared;

/// Windows with a space, for the signal handler to find without locks.
struct Slot {
    space: AtomicPtr<Shared>,
    /// The window, readable without touching the space.
    base: AtomicUsize,
    len: AtomicUsize,
    /// Signal handlers using this slot now; unregistering waits for zero.
    busy: AtomicUsize,
}

impl Slot {
    fn covers(&self, addr: usize) -> bool {
        let base = self.base.load(SeqCst);
        addr >= base && addr - base < self.len.load(SeqCst)
    }
}

const SLOTS: usize = 256;
static REGISTRY: [Slot; SLOTS] = [const {
    Slot {
        space: AtomicPtr::new(ptr::null_mut()),
        base: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        busy: AtomicUsize::new(0),
    }
}; SLOTS];
/// Slots below this have been used: the handler looks no further.
static USED: AtomicUsize = AtomicUsize::new(0);
/// The handlers installed before ours: SIGSEGV's, SIGBUS's.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();
const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];
static INSTALL: Once = Once::new();

/// Makes faults in `[base, base + len)` reach the handler of `shared`;
/// returns the slot. `shared` must stay alive until [`unregister`] of that
/// slot returns.
pub(crate) fn register(shared: *const Shared, base: usize, len: usize) -> Option<usize> {
    INSTALL.call_once(install);
    let p = shared as *mut Shared;
    let i = (0..SLOTS).find(|&i| {
        REGISTRY[i]
            .space
            .compare_exchange(ptr::null_mut(), p, SeqCst, SeqCst)
            .is_ok()
    })?;
    REGISTRY[i].base.store(base, SeqCst);
    REGISTRY[i].len.store(len, SeqCst);
    USED.fetch_max(i + 1, SeqCst);
    Some(i)
}

/// Stops routing faults to the space in `slot`, once no signal handler
/// still uses it.
pub(crate) fn unregister(slot: usize) {
    REGISTRY[slot].len.store(0, SeqCst);
    REGISTRY[slot].space.store(ptr::null_mut(), SeqCst);
    while REGISTRY[slot].busy.load(SeqCst) != 0 {
        std::hint::spin_loop();
    }
}

fn install() {
    // SAFETY: a zeroed sigaction is a valid value to fill in.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_signal as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: sa_mask is a valid sigset to empty.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    let old = SIGNALS.map(|sig| {
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: installs our handler and saves the previous one.
        let rc = unsafe { libc::sigaction(sig, &sa, &mut old) };
        assert_eq!(rc, 0, "sigaction({sig})");
        old
    });
    PREVIOUS.set(old).expect("installed once");
}

#[cfg(target_arch = "x86_64")]
fn is_write(ctx: *mut libc::c_void) -> bool {
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    uc.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn is_write(_: *mut libc::c_void) -> bool {
    false
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV and SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let used = USED.load(SeqCst);
    let resolved = REGISTRY[..used].iter().any(|slot| {
        if !slot.covers(addr) {
            return false;
        }
        slot.busy.fetch_add(1, SeqCst);
        let p = slot.space.load(SeqCst);
        // SAFETY: a registered space stays alive while `busy` is non-zero;
        // the slot may have been given to another space meanwhile, so its
        // window is checked again on the space itself.
        let shared = (!p.is_null()).then(|| unsafe { &*p });
        let done = shared.is_some_and(|s| {
            s.window_contains(addr) && handle(s, sig, addr, is_write(ctx)) == Resolution::Retry
        });
        slot.busy.fetch_sub(1, SeqCst);
        done
    });
    if !resolved {
        chain(sig, info, ctx);
    }
}

/// Runs the space's handler, unless this thread already holds the space
/// (the fault came from inside an invocation or a handler: unresolvable).
fn handle(shared: &Shared, sig: libc::c_int, addr: usize, write: bool) -> Resolution {
    let Some(mut space) = shared.lock_from_fault() else {
        return Resolution::Fail;
    };
    // A window that fell behind its tables faults everywhere: rebuilt, the
    // access is tried again and faults only where the tables say so.
    match space.catch_up() {
        Ok(true) => return Resolution::Retry,
        Ok(false) => {}
        Err(_) => return Resolution::Fail,
    }
    let va = (addr - space.base()) as u64;
    if sig == libc::SIGBUS && space.refill(va) {
        return Resolution::Retry;
    }
    let Some(mut h) = space.handler.take() else {
        return Resolution::Fail;
    };
    let fault = Fault { va, addr, write };
    let r = catch_unwind(AssertUnwindSafe(|| h(&mut space, &fault))).unwrap_or(Resolution::Fail);
    space.handler = Some(h);
    r
}

/// Hands the signal to the previous handler, or restores the default
/// action so that returning re-runs the access and the process dies.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let previous = PREVIOUS.get().expect("installed before any fault");
    pass_on(&previous[usize::from(sig == libc::SIGBUS)], sig, info, ctx);
}

/// Hands a fault that is not its own from a SIGSEGV/SIGBUS handler to `old`,
/// the handler installed before it, or, when that is the default action or
/// ignores the signal, restores the default so that returning re-runs the
/// access and the process dies (a fault is never swallowed).
pub fn pass_on(
    old: &libc::sigaction,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let h = old.sa_sigaction;
    if h != libc::SIG_DFL && h != libc::SIG_IGN {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            type Action = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
            // SAFETY: the previous SA_SIGINFO handler has this signature.
            let f: Action = unsafe { std::mem::transmute(h) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a plain handler takes the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
        return;
    }
    // SAFETY: a zeroed sigaction with SIG_DFL restores the default action.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: sigaction is async-signal-safe.
    unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
}
