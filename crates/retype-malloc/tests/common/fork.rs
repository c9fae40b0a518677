//! A check that must run alone in a process: a fault it expects ends only that process.

/// The signal that ended a child process that ran `f` (0: none). The caller's process must
/// run no other test (a child of `rerun_with`), so that no other thread holds a lock `f` needs.
pub fn signal_of(f: impl FnOnce()) -> i32 {
    // SAFETY: the child runs `f` and exits at once; no other thread of the caller's process
    // holds a lock (see above).
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            f();
            libc::_exit(0);
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            0
        }
    }
}
