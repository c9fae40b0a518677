//! The process's life: start (constructor, or a recorder loaded into a
//! running process), fork, exec, and every exit path we can catch (`exit`
//! through the library destructor, `_exit`/`_Exit`, fatal signals, and the
//! detach that ends a loaded recorder's trace while the process runs on).
//! SIGKILL cannot be caught: its trace ends without an end record.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use libc::{c_char, c_int, pid_t};
use retype_trace::codec::{self, thread_fields};

use crate::real::real;
use crate::thread::local::{local, Busy};
use crate::thread::{buffer, cost, exit};
use crate::{
    control, gate, kept, modules, output, phase_stats, rseq, rss, settings, stack_table, sys,
};

/// The process whose trace the state belongs to (a vfork child shares our
/// memory but has another pid: it must not touch the trace).
static OWNER: AtomicU32 = AtomicU32::new(0);
/// The current segment has been ended.
static FINISHED: AtomicBool = AtomicBool::new(true);

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn init() {
    // A recorder loaded late (dlopen) is not the program's malloc: it starts
    // only when attached (see `crate::attach`).
    if crate::real::interposed() {
        start();
    }
}

/// Whether [`start`] has run (or is running).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts recording, once: from the library constructor, or from the first
/// malloc-family call if another library's constructor calls first.
pub fn start() {
    launch(false);
}

/// Starts recording in a process the recorder was loaded into while it ran,
/// with the settings given (once per process); false if it had started.
pub fn attach() -> bool {
    launch(true)
}

fn launch(attached: bool) -> bool {
    if STARTED.swap(true, Ordering::AcqRel) {
        return false;
    }
    let Some(_busy) = Busy::enter() else {
        return false;
    };
    real();
    // The environment is read now, once (unless the attach gave the settings).
    let paused = settings::get().paused();
    exit::init();
    buffer::enable_fast_path();
    control::init(attached);
    begin(false, !paused, if attached { b"attach" } else { b"start" });
    catch_fatal_signals();
    true
}

/// Whether [`start`] still has to run.
#[inline]
pub fn not_started() -> bool {
    !STARTED.load(Ordering::Relaxed)
}

extern "C" fn fini() {
    finish(false, b"exit");
}

/// Opens the trace; starts recording if `on` (a window that opens for `reason`).
fn begin(forked: bool, on: bool, reason: &[u8]) {
    OWNER.store(sys::getpid(), Ordering::Release);
    // Before the trace opens: its meta records give the clock's resolution.
    sys::calibrate_clock();
    rseq::init();
    if output::start(forked) {
        if settings::get().records_stacks() {
            // The segment names its own objects and stacks.
            stack_table::new_generation(forked);
            modules::scan(true);
        }
        kept::begin(forked);
        FINISHED.store(false, Ordering::Release);
        gate::open();
        rss::restart();
        control::begin(on, reason);
    }
}

/// Ends the segment for `reason` (`exit`, `exec`, `detach`): writes every
/// buffer, a summary for each thread still alive, the end of the open window
/// and the end record. Once per segment; a no-op in a vfork child. `None` if
/// it did nothing, else whether it was recording.
fn end_segment(in_signal: bool, reason: &[u8]) -> Option<bool> {
    if OWNER.load(Ordering::Acquire) != sys::getpid() || FINISHED.swap(true, Ordering::AcqRel) {
        return None;
    }
    let on = control::end().unwrap_or(false);
    let _busy = Busy::enter();
    if settings::get().records_stacks() && !in_signal {
        // Libraries opened since the last scan, for the stacks that name them.
        modules::scan(false);
    }
    let me = sys::gettid();
    let own = exit::claim_own_summary();
    let events = buffer::drain(in_signal, |tid, start_ns| {
        if tid != me || own {
            let mut rec = [0u8; 1 + 8 * codec::MAX_VARINT];
            let s = cost::summary(tid, start_ns, tid == me);
            if let Some(n) = s
                .and_then(|s| codec::varint_record(&mut rec, codec::TAG_THREAD, &thread_fields(&s)))
            {
                output::write(&rec[..n]);
            }
        }
    });
    stack_table::flush(in_signal);
    kept::end(in_signal);
    let dropped = stack_table::take_dropped();
    if dropped > 0 {
        let mut num = sys::StackStr::<32>::new();
        num.push_num(dropped);
        output::meta(b"stacks_dropped", num.as_bytes());
    }
    rss::last(on);
    gate::close(in_signal);
    // After the events: the window holds every one of them.
    if on {
        control::ended(reason);
    }
    output::end(events);
    Some(on)
}

/// Process exit (or detach, `reason`): ends the segment and closes the trace.
fn finish(in_signal: bool, reason: &[u8]) {
    if end_segment(in_signal, reason).is_some() {
        output::close();
    }
}

/// Ends a loaded recorder's trace; the process runs on, its calls forwarded
/// unrecorded.
pub fn detach() {
    finish(false, b"detach");
}

/// Ends the trace and leaves through `pick(real)`: the next `_exit` or `_Exit`.
fn exit_now(status: c_int, pick: fn(&crate::real::Real) -> crate::real::Exit) -> ! {
    finish(false, b"exit");
    match real() {
        // SAFETY: forwarding.
        Some(r) => unsafe { pick(r)(status) },
        // SAFETY: the raw system call needs no libc state.
        None => unsafe {
            libc::syscall(libc::SYS_exit_group, status);
            libc::abort()
        },
    }
}

/// # Safety
/// The C `_exit` contract.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    exit_now(status, |r| r.exit)
}

/// # Safety
/// The C `_Exit` contract.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(status, |r| r.exit_upper)
}

/// # Safety
/// The C `fork` contract.
#[no_mangle]
pub unsafe extern "C" fn fork() -> pid_t {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    let pid = unsafe { (r.fork)() };
    if pid == 0 {
        let _busy = Busy::enter();
        cost::started_now();
        // The parent's trace was open (recording or paused): the child's opens alike.
        let open = control::end();
        modules::after_fork_child();
        buffer::after_fork_child(local().buf.get());
        phase_stats::after_fork_child();
        if let Some(on) = open {
            begin(true, on, b"fork");
        }
    }
    pid
}

/// Runs an exec function: the segment ends before it (the new image appends
/// its own), and a new segment begins if the exec fails.
fn exec(call: impl FnOnce() -> c_int) -> c_int {
    let ended = end_segment(false, b"exec");
    let rc = call();
    if let Some(on) = ended {
        let _busy = Busy::enter();
        begin(false, on, b"exec");
    }
    rc
}

type Argv = *const *const c_char;

/// # Safety
/// The C `execve` contract.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    exec(|| unsafe { (r.execve)(path, argv, envp) })
}

/// # Safety
/// The C `execv` contract.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    exec(|| unsafe { (r.execv)(path, argv) })
}

/// # Safety
/// The C `execvp` contract.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    exec(|| unsafe { (r.execvp)(file, argv) })
}

/// # Safety
/// The C `execvpe` contract.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    exec(|| unsafe { (r.execvpe)(file, argv, envp) })
}

/// # Safety
/// The C `fexecve` contract.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    let Some(r) = real() else { return -1 };
    // SAFETY: forwarding.
    exec(|| unsafe { (r.fexecve)(fd, argv, envp) })
}

extern "C" {
    fn retype_execl(path: *const c_char, arg: *const c_char, ...) -> c_int;
    fn retype_execlp(file: *const c_char, arg: *const c_char, ...) -> c_int;
    fn retype_execle(path: *const c_char, arg: *const c_char, ...) -> c_int;
}

/// Exports a C-variadic exec function whose body is in `c/exec_variadic.c`:
/// a naked function that jumps there, leaving the caller's registers and
/// stack (the variadic arguments) as they were.
macro_rules! variadic_exec {
    ($name:ident, $body:ident) => {
        /// # Safety
        /// The C contract of the function of this name.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!("jmp {}", sym $body);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("b {}", sym $body);
        }
    };
}

variadic_exec!(execl, retype_execl);
variadic_exec!(execlp, retype_execlp);
variadic_exec!(execle, retype_execle);

/// Signals whose default action ends the process.
const FATAL: [c_int; 10] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
];

/// Installs our handler for each fatal signal left at its default action
/// (a program that ignores or handles a signal keeps doing so).
fn catch_fatal_signals() {
    for sig in FATAL {
        // SAFETY: querying and setting dispositions with valid sigaction structs.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fatal_signal as *const () as usize;
            act.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// Ends the trace, then lets the signal do what it would have done.
extern "C" fn on_fatal_signal(sig: c_int) {
    finish(true, b"exit");
    // SAFETY: SA_RESETHAND restored the default action; raising it again ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
