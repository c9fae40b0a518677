//! What the test binaries of retype-malloc share.

/// Marks a child process of [`rerun_with`], which does not rerun tests again.
const CHILD: &str = "RETYPE_MALLOC_TEST_CHILD";

/// Runs every other test of this test binary again in a child process with `env` set (read
/// by retype-malloc at start-up, so it cannot change inside this process), and asserts that
/// they ran and passed. In such a child it does nothing: a binary with two such tests would
/// otherwise rerun itself without end.
pub fn rerun_with(skip: &str, env: &[(&str, &str)]) {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--skip", skip])
        .env(CHILD, "1")
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
