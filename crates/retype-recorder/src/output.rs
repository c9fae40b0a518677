//! The trace file.
//!
//! The settings' trace file (`RETYPE_TRACE_FILE`) names it. The first process to record takes that name;
//! any other (a forked child, or a program whose file was lost) takes
//! `NAME.PID`, or `NAME.PID.N` if that exists; a character device (`/dev/null`)
//! is written as it is. The descriptor is moved to a fixed
//! high number (a fork child puts its own file at that same number), kept open
//! across exec: an exec'd image whose descriptor there holds a trace begun by
//! its own pid appends to it (a new segment). The environment is left alone:
//! changing it would allocate behind the program's back.
//! Every record goes out with one `write(2)` on an `O_APPEND` descriptor, so
//! threads never interleave inside a record.
//!
//! Recording stops for good in this process (and in the children it forks
//! later) when the trace cannot be created or a write fails (a full disk, an
//! I/O error, the file-size limit: a write past it fails with EFBIG, never
//! with the SIGXFSZ that would kill the program), and when the program has
//! closed the descriptor or reused its number for a file of its own: each
//! write first checks that the descriptor still names the trace's file, so
//! the recorder never writes into the program's files. The program runs on
//! untouched; one line on stderr says why (if its descriptor 2 is still the
//! stderr it started with: the program may have reused that number too). A
//! trace that stops so is cut short: it reads up to its last whole record.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use libc::c_int;
use retype_trace::codec::{self, HEADER_LEN};

use crate::sys::{self, FileId, StackStr};
use crate::{recording, rseq, settings};

/// The descriptor number the trace lives at, out of programs' usual way (below
/// the usual limit of 1024) and the same in every process, so an exec'd image
/// finds it.
const SLOT: c_int = 989;

/// The trace descriptor, or -1.
static FD: AtomicI32 = AtomicI32::new(-1);
/// The file the trace descriptor names.
static TRACE: Identity = Identity::none();
/// The stderr this process image started with.
static STDERR: Identity = Identity::none();
/// The trace's path, for the line that says why recording stopped.
static PATH: Mutex<StackStr<4097>> = Mutex::new(StackStr::new());
/// Recording has stopped for good in this process.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// A file's identity, kept in atomics: a descriptor names it only while it
/// names the same device and inode.
struct Identity {
    dev: AtomicU64,
    ino: AtomicU64,
}

impl Identity {
    const fn none() -> Identity {
        Identity {
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    /// Takes the identity of the file `fd` names (none if it is not open).
    fn take(&self, fd: c_int) {
        let id = sys::file_id(fd).unwrap_or_default();
        self.dev.store(id.dev, Ordering::Relaxed);
        self.ino.store(id.ino, Ordering::Relaxed);
    }

    fn get(&self) -> FileId {
        FileId {
            dev: self.dev.load(Ordering::Relaxed),
            ino: self.ino.load(Ordering::Relaxed),
        }
    }
}

/// Why recording stopped.
#[derive(Clone, Copy)]
enum Why {
    /// A system call failed with this errno.
    Error(c_int),
    /// The program closed the trace's descriptor.
    Closed(c_int),
    /// The program closed it and opened a file of its own at that number.
    Reused(c_int),
}

pub fn write(bytes: &[u8]) {
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let why = match sys::file_id(fd) {
        None => Why::Closed(fd),
        Some(id) if id != TRACE.get() => Why::Reused(fd),
        Some(_) => match sys::write_all_to_file(fd, bytes) {
            Ok(()) => return,
            Err(e) => Why::Error(e),
        },
    };
    stop(fd, why);
}

/// Stops recording for good (once, whichever thread fails first) and says why.
fn stop(fd: c_int, why: Why) {
    STOPPED.store(true, Ordering::Release);
    if FD
        .compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    recording::switch_off();
    if let Why::Error(_) = why {
        // Still ours: kept open (another thread may be writing to it) but not
        // across exec, so that no image appends after a broken record.
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // The path /proc gave at start, else the name the settings give.
    let mut path = StackStr::<4097>::new();
    if let Ok(p) = PATH.try_lock() {
        path.push(p.as_bytes());
    }
    if path.as_bytes().is_empty() {
        path.push(settings::get().trace_file().unwrap_or_default());
    }
    say_stopped(path.as_bytes(), why);
}

/// Writes `retype-recorder: stopped recording: PATH: WHY` on stderr, if
/// descriptor 2 still names the stderr this image started with.
fn say_stopped(path: &[u8], why: Why) {
    if sys::file_id(2).is_none_or(|id| id != STDERR.get()) {
        return;
    }
    let mut text = StackStr::<64>::new();
    let mut line = StackStr::<4300>::new();
    line.push(b"retype-recorder: stopped recording: ")
        .push(path)
        .push(b": ");
    match why {
        Why::Error(e) => line.push(sys::error_text(e, &mut text)),
        Why::Closed(fd) => line
            .push(b"the program closed the trace's descriptor ")
            .push_num(fd as u64),
        Why::Reused(fd) => line
            .push(b"the program reused the trace's descriptor ")
            .push_num(fd as u64)
            .push(b" for another file"),
    };
    let _ = sys::write_all(2, line.push(b"\n").as_bytes());
}

/// Opens (or continues) this process's trace. `forked`: we are a fork child
/// whose parent recorded to the descriptor in the slot.
/// Returns false if this process records nothing.
pub fn start(forked: bool) -> bool {
    let Some(name) = settings::get().trace_file() else {
        return false;
    };
    if STOPPED.load(Ordering::Acquire) {
        return false;
    }
    STDERR.take(2);
    if !forked && continues(SLOT) {
        publish(SLOT);
        write_meta(b"exec");
        return true;
    }
    let mut fd = match create(name) {
        Ok(fd) => fd,
        Err(e) => {
            STOPPED.store(true, Ordering::Release);
            say_stopped(name, Why::Error(e));
            return false;
        }
    };
    // Into the slot: a fork child's slot holds its copy of the parent's trace
    // if the parent's trace was there and is still; otherwise only if the
    // program does not use that number.
    let parents =
        forked && FD.load(Ordering::Relaxed) == SLOT && sys::file_id(SLOT) == Some(TRACE.get());
    // SAFETY: fcntl only queries; dup2/close act on our descriptors.
    unsafe {
        if (parents || libc::fcntl(SLOT, libc::F_GETFD) < 0) && libc::dup2(fd, SLOT) == SLOT {
            libc::close(fd);
            fd = SLOT;
        }
    }
    publish(fd);
    write(&codec::header());
    write_meta(if forked { b"fork" } else { b"start" });
    true
}

/// Makes `fd` the trace descriptor, with the identity and path of its file.
fn publish(fd: c_int) {
    TRACE.take(fd);
    if let Ok(mut path) = PATH.try_lock() {
        let mut link = StackStr::<64>::new();
        link.push(b"/proc/self/fd/").push_num(fd as u64);
        let mut buf = [0u8; 4096];
        let n = sys::readlink(link.as_bytes_nul(), &mut buf);
        *path = StackStr::new();
        path.push(&buf[..n]);
    }
    FD.store(fd, Ordering::Release);
}

/// Whether `fd` holds a trace this process (same pid) began: its first record
/// is the `pid` meta record with our pid.
fn continues(fd: c_int) -> bool {
    let mut head = [0u8; HEADER_LEN + 32];
    // SAFETY: `head` is a valid buffer; pread does not move the offset.
    let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), head.len(), 0) };
    if n < (HEADER_LEN + 8) as isize || head[..8] != codec::MAGIC {
        return false;
    }
    let mut pid = StackStr::<32>::new();
    pid.push_num(u64::from(sys::getpid()));
    let mut expect = [0u8; 48];
    codec::meta_record(&mut expect, b"pid", pid.as_bytes())
        .is_some_and(|len| head.get(HEADER_LEN..HEADER_LEN + len) == Some(&expect[..len]))
}

/// Creates `name`, else `name.PID`, else `name.PID.N` (readable too: an exec'd
/// image reads the header back, see [`continues`]); opens `name` as it is if
/// it is a character device. The errno of the last try if none works.
fn create(name: &[u8]) -> Result<c_int, c_int> {
    let pid = u64::from(sys::getpid());
    for attempt in 0..1000u64 {
        let mut path = StackStr::<4096>::new();
        path.push(name);
        if attempt > 0 {
            path.push(b".").push_num(pid);
        }
        if attempt > 1 {
            path.push(b".").push_num(attempt - 1);
        }
        let device = attempt == 0 && sys::is_char_device(path.as_bytes_nul());
        let flags = if device {
            libc::O_WRONLY | libc::O_APPEND
        } else {
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND
        };
        // SAFETY: the path is NUL-terminated.
        let fd = unsafe { libc::open(sys::c_str(&mut path), flags, 0o644) };
        if fd >= 0 {
            return Ok(fd);
        }
        if sys::errno() != libc::EEXIST {
            return Err(sys::errno());
        }
    }
    Err(libc::EEXIST)
}

/// Writes the meta records that open a segment: pid first (see [`continues`]).
fn write_meta(how: &[u8]) {
    let mut num = StackStr::<32>::new();
    num.push_num(u64::from(sys::getpid()));
    meta(b"pid", num.as_bytes());
    let mut num = StackStr::<32>::new();
    // SAFETY: getppid has no preconditions.
    num.push_num(unsafe { libc::getppid() } as u64);
    meta(b"ppid", num.as_bytes());
    meta(b"segment", how);
    meta(b"clock", b"monotonic");
    let mut num = StackStr::<32>::new();
    num.push_num(sys::resolution_ns());
    meta(b"clock_resolution_ns", num.as_bytes());
    let mut num = StackStr::<32>::new();
    num.push_num(sys::now_ns());
    meta(b"start_ns", num.as_bytes());
    let mut cmd = [0u8; 4096];
    let n = sys::read_file(b"/proc/self/cmdline\0", &mut cmd);
    let cmd = &mut cmd[..n];
    if let Some((_, args)) = cmd.split_last_mut() {
        args.iter_mut().filter(|c| **c == 0).for_each(|c| *c = b' ');
    }
    meta(b"cmdline", cmd.strip_suffix(b"\0").unwrap_or(cmd));
    if let Some(a) = settings::get().allocator() {
        meta(b"allocator", a);
    }
    let mut num = StackStr::<32>::new();
    num.push_num(settings::get().stack_depth() as u64);
    meta(b"stack_depth", num.as_bytes());
    meta(b"descheduling", rseq::method());
}

/// Writes a meta record; bytes outside ASCII become `?` (meta text is UTF-8).
pub fn meta(key: &[u8], value: &[u8]) {
    let mut text = [0u8; 4096];
    let n = value.len().min(text.len());
    for (t, &v) in text.iter_mut().zip(&value[..n]) {
        *t = if v.is_ascii() { v } else { b'?' };
    }
    let mut rec = [0u8; 4096 + 64];
    if let Some(n) = codec::meta_record(&mut rec, key, &text[..n]) {
        write(&rec[..n]);
    }
}

/// Ends the segment with an end record counting `events`.
pub fn end(events: u64) {
    let mut rec = [0u8; 16];
    if let Some(n) = codec::varint_record(&mut rec, codec::TAG_END, &[events]) {
        write(&rec[..n]);
    }
}

/// Whether records go out: the trace is open and has not stopped for good.
pub fn writable() -> bool {
    FD.load(Ordering::Acquire) >= 0
}

/// Keeps the trace out of exec'd images (a recorder loaded into a running
/// process is not in the images it execs, so none would continue the trace).
pub fn close_on_exec() {
    let fd = FD.load(Ordering::Acquire);
    if fd >= 0 {
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// The trace's path as /proc named it when it opened: copied into `out`
/// (cut to fit); returns its length.
pub fn path(out: &mut [u8]) -> usize {
    let Ok(p) = PATH.try_lock() else { return 0 };
    let n = p.as_bytes().len().min(out.len());
    out[..n].copy_from_slice(&p.as_bytes()[..n]);
    n
}

/// Stops writing (after the final end record).
pub fn close() {
    let fd = FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: `fd` is the trace descriptor, no longer published.
        unsafe { libc::close(fd) };
    }
}
