//! The trace file.
//!
//! The settings' trace file (`RETYPE_TRACE_FILE`) names it. The first process to record takes that name;
//! any other (a forked child, or a program whose file was lost) takes
//! `NAME.PID`, or `NAME.PID.N` if that exists. The descriptor is moved to a fixed
//! high number (a fork child puts its own file at that same number), kept open
//! across exec: an exec'd image whose descriptor there holds a trace begun by
//! its own pid appends to it (a new segment). The environment is left alone:
//! changing it would allocate behind the program's back.
//! Every record goes out with one `write(2)` on an `O_APPEND` descriptor, so
//! threads never interleave inside a record.

use std::sync::atomic::{AtomicI32, Ordering};

use libc::c_int;
use retype_trace::codec::{self, HEADER_LEN};

use crate::sys::{self, StackStr};
use crate::{rseq, settings};

/// The descriptor number the trace lives at, out of programs' usual way (below
/// the usual limit of 1024) and the same in every process, so an exec'd image
/// finds it.
const SLOT: c_int = 989;

/// The trace descriptor, or -1.
static FD: AtomicI32 = AtomicI32::new(-1);

pub fn write(bytes: &[u8]) {
    let fd = FD.load(Ordering::Relaxed);
    if fd >= 0 {
        sys::write_all(fd, bytes);
    }
}

/// Opens (or continues) this process's trace. `forked`: we are a fork child
/// whose parent recorded to the descriptor in the slot.
/// Returns false if this process records nothing.
pub fn start(forked: bool) -> bool {
    let Some(name) = settings::get().trace_file() else {
        return false;
    };
    if !forked && continues(SLOT) {
        FD.store(SLOT, Ordering::Relaxed);
        write_meta(b"exec");
        return true;
    }
    let Some(mut fd) = create(name) else {
        return false;
    };
    // Into the slot: a fork child's slot holds its copy of the parent's trace;
    // otherwise only if the program does not use that number.
    // SAFETY: fcntl only queries; dup2/close act on our descriptors.
    unsafe {
        if (forked || libc::fcntl(SLOT, libc::F_GETFD) < 0) && libc::dup2(fd, SLOT) == SLOT {
            libc::close(fd);
            fd = SLOT;
        }
    }
    FD.store(fd, Ordering::Relaxed);
    write(&codec::header());
    write_meta(if forked { b"fork" } else { b"start" });
    true
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
/// image reads the header back, see [`continues`]).
fn create(name: &[u8]) -> Option<c_int> {
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
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND;
        // SAFETY: the path is NUL-terminated.
        let fd = unsafe { libc::open(sys::c_str(&mut path), flags, 0o644) };
        if fd >= 0 {
            return Some(fd);
        }
        if sys::errno() != libc::EEXIST {
            return None;
        }
    }
    None
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

/// Stops writing (after the final end record).
pub fn close() {
    let fd = FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: `fd` is the trace descriptor, no longer published.
        unsafe { libc::close(fd) };
    }
}
