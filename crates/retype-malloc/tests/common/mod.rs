//! What the test binaries of retype-malloc share.

/// Runs every other test of this test binary again in a child process with `env` set (read
/// by retype-malloc at start-up, so it cannot change inside this process), and asserts that
/// they ran and passed.
pub fn rerun_with(skip: &str, env: &[(&str, &str)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--skip", skip])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok") && !stdout.contains(" 0 passed"),
        "run with {env:?}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
