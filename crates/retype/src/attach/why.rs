//! Why a process may not be traced, in words that say how to allow it: the
//! kernel answers a refused `PTRACE_SEIZE` with EPERM whatever the cause, so
//! the causes are looked up one by one (another tracer, another user, Yama's
//! ptrace_scope, then what is left: a container or a security module).

use std::io;

/// The explanation of `err`, the error of seizing process `pid`.
pub fn refused(pid: i32, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ESRCH) => format!("no process {pid}"),
        Some(libc::EPERM) => format!("cannot trace process {pid}: {}", eperm(pid)),
        _ => format!("cannot trace process {pid}: {err}"),
    }
}

/// The first cause of an EPERM that applies.
fn eperm(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
    };
    if let Some(thread) = field("TracerPid:").filter(|&t| t != 0) {
        // The tracer is a thread: name its process.
        let tracer = std::fs::read_to_string(format!("/proc/{thread}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse::<u32>().ok())
            })
            .unwrap_or(thread);
        let comm = std::fs::read_to_string(format!("/proc/{tracer}/comm")).unwrap_or_default();
        return format!(
            "it is traced already by process {tracer} ({}); a process has one tracer at a \
             time: detach that one (quit gdb, strace, another retype) and try again",
            comm.trim()
        );
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if let Some(uid) = field("Uid:").filter(|&u| u != me && me != 0) {
        return format!(
            "it runs as user {uid} and retype as user {me}: only the same user (or root, \
             or a holder of CAP_SYS_PTRACE) may trace it: run retype as that user or with sudo"
        );
    }
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let allow = "allow it until the next boot with \
                 `echo 0 | sudo tee /proc/sys/kernel/yama/ptrace_scope`, or give retype \
                 the capability: `sudo setcap cap_sys_ptrace+ep $(command -v retype)`, or run it with sudo";
    match yama {
        Some(1) => format!(
            "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope): a process may \
             trace only its own descendants; {allow}"
        ),
        Some(2) => "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope): only a \
             holder of CAP_SYS_PTRACE may trace: run retype with sudo, or \
             `sudo setcap cap_sys_ptrace+ep $(command -v retype)`"
            .to_string(),
        Some(3) => "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process \
             may be traced, and it cannot be lowered until the next boot"
            .to_string(),
        _ => "the kernel refused it (EPERM): the process may have made itself undumpable \
              (prctl PR_SET_DUMPABLE), or a container's seccomp profile or a security module \
              (SELinux, AppArmor) forbids ptrace; in Docker, run with --cap-add=SYS_PTRACE"
            .to_string(),
    }
}
