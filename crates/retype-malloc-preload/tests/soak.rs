//! The 64-thread soak (`tests/c/soak.c`: random sizes, blocks handed across threads, forks,
//! threads exiting and started again, every block's pattern checked at free) on
//! retype-malloc with its heap checks on, in the default and the hardened mode.
//!
//! The library is built with debug assertions and overflow checks (in its own target folder,
//! `<target>/checked`), so the allocator checks its page queues and pages as they change
//! (`os::debug_verify`) and aborts on the first inconsistency; hardened mode adds its canary,
//! quarantine and exit checks. Each mode runs `RETYPE_SOAK_SECONDS` (default 60) seconds;
//! `RETYPE_SOAK_SEED` fixes the program's random numbers (default: the clock; the seed is
//! printed). Any corruption, crash, hang or non-zero exit fails the test.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const THREADS: u32 = 64;

/// `libretype_malloc_preload.so` built with debug assertions and overflow checks.
fn checked_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // <target>/<profile>/deps/soak-…
        let target = exe.ancestors().nth(3).expect("target directory");
        let checked = target.join("checked");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "-p",
                "retype-malloc-preload",
                "--target-dir",
            ])
            .arg(&checked)
            .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")
            .env("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "true")
            .status()
            .expect("run cargo build");
        assert!(
            status.success(),
            "cargo build of the checked library failed"
        );
        checked.join("release/libretype_malloc_preload.so")
    })
}

fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("retype-malloc-preload-soak");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn soak_program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/soak.c");
        let exe = dir().join("soak");
        let out = Command::new("gcc")
            .args(["-O1", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("gcc must be installed");
        assert!(
            out.status.success(),
            "gcc {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    })
}

fn seconds() -> u64 {
    std::env::var("RETYPE_SOAK_SECONDS").map_or(60, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("RETYPE_SOAK_SECONDS={s:?}: not a number of seconds"))
    })
}

/// Runs the soak on the checked library with the extra environment `env`, and fails on
/// anything but a clean exit that printed OK within the time allowed.
fn soak(mode: &str, env: &[(&str, &str)]) {
    let secs = seconds();
    let mut cmd = Command::new(soak_program());
    cmd.arg(secs.to_string()).arg(THREADS.to_string());
    if let Ok(seed) = std::env::var("RETYPE_SOAK_SEED") {
        cmd.arg(seed);
    }
    // Files rather than pipes: a child that fills a pipe nobody reads yet would block.
    let out_path = dir().join(format!("{mode}.stdout"));
    let err_path = dir().join(format!("{mode}.stderr"));
    let mut child = cmd
        .env("LD_PRELOAD", checked_lib())
        .envs(env.iter().copied())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("start the soak");
    // The threads stop at the time set; joining them, and forks under way, end soon after
    // on any machine. Beyond this the soak hangs.
    let limit = Duration::from_secs(secs * 3 + 300);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the soak") {
            break Some(status);
        }
        if start.elapsed() > limit {
            child.kill().expect("kill the hung soak");
            child.wait().expect("reap the soak");
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = String::from_utf8_lossy(&std::fs::read(&out_path).unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&std::fs::read(&err_path).unwrap()).into_owned();
    eprintln!("soak, {mode} mode, in {:.0?}:\n{stdout}", start.elapsed());
    let status = status.unwrap_or_else(|| {
        panic!("soak, {mode} mode: still running after {limit:?}, killed\n{stdout}\n{stderr}")
    });
    assert!(
        status.success() && stdout.ends_with("OK\n"),
        "soak, {mode} mode: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn soak_default_mode() {
    soak("default", &[]);
}

#[test]
fn soak_hardened_mode() {
    soak("hardened", &[("RETYPE_MALLOC_HARDENED", "1")]);
}
