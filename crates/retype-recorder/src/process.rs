//! The process's life: start (constructor), fork, exec, and every exit path we
//! can catch (`exit` through the library destructor, `_exit`/`_Exit`, fatal
//! signals). SIGKILL cannot be caught: its trace ends without an end record.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use libc::{c_char, c_int, pid_t};
use retype_trace::codec::{self, thread_fields};

use crate::real::real;
use crate::thread::local::{local, Busy};
use crate::thread::{buffer, cost, exit};
use crate::{modules, output, recording, rseq, settings, stack_table, sys};

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
    start();
}

/// Whether [`start`] has run (or is running).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts recording, once: from the library constructor, or from the first
/// malloc-family call if another library's constructor calls first.
pub fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Some(_busy) = Busy::enter() else { return };
    real();
    // The environment is read now, once.
    settings::get();
    exit::init();
    buffer::enable_fast_path();
    begin(false);
    catch_fatal_signals();
}

/// Whether [`start`] still has to run.
#[inline]
pub fn not_started() -> bool {
    !STARTED.load(Ordering::Relaxed)
}

extern "C" fn fini() {
    finish(false);
}

/// Opens the trace and starts recording.
fn begin(forked: bool) {
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
        FINISHED.store(false, Ordering::Release);
        recording::switch_on();
    }
}

/// Ends the segment: writes every buffer, a summary for each thread still
/// alive, and the end record. Once per segment; a no-op in a vfork child.
fn end_segment(in_signal: bool) -> bool {
    if OWNER.load(Ordering::Acquire) != sys::getpid() || FINISHED.swap(true, Ordering::AcqRel) {
        return false;
    }
    recording::switch_off();
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
    let dropped = stack_table::take_dropped();
    if dropped > 0 {
        let mut num = sys::StackStr::<32>::new();
        num.push_num(dropped);
        output::meta(b"stacks_dropped", num.as_bytes());
    }
    output::end(events);
    true
}

/// Process exit: ends the segment and closes the trace.
fn finish(in_signal: bool) {
    if end_segment(in_signal) {
        output::close();
    }
}

/// Ends the trace and leaves through `pick(real)`: the next `_exit` or `_Exit`.
fn exit_now(status: c_int, pick: fn(&crate::real::Real) -> crate::real::Exit) -> ! {
    finish(false);
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
        let was_recording = recording::switch_off();
        modules::after_fork_child();
        buffer::after_fork_child(local().buf.get());
        if was_recording {
            begin(true);
        }
    }
    pid
}

/// Runs an exec function: the segment ends before it (the new image appends
/// its own), and a new segment begins if the exec fails.
fn exec(call: impl FnOnce() -> c_int) -> c_int {
    let ended = end_segment(false);
    let rc = call();
    if ended {
        let _busy = Busy::enter();
        begin(false);
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
    finish(true);
    // SAFETY: SA_RESETHAND restored the default action; raising it again ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
