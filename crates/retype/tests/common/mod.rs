//! What the CLI's test binaries share: running the built `retype`, the
//! repository's root, scratch directories, JSON-lines output, and opening a
//! report in headless Chromium (through [`browser`]). Each test binary compiles this module and uses
//! part of it, hence the `allow`.
#![allow(dead_code)]

pub mod browser;
pub mod recording;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built `retype` binary, to be given arguments.
pub fn retype_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_retype"))
}

/// Runs `retype ARGS…` in the repository's root, as the README does.
pub fn retype(args: &[&str]) -> Output {
    retype_cmd()
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the retype binary runs")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh scratch directory, private to this test process and `name`.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("retype-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON objects a successful run printed, one per line.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// Debian's Chromium, when installed (scripts/test installs it; CI must have it).
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(
        found.is_some() || std::env::var_os("CI").is_none(),
        "CI must have chromium (scripts/test installs it)"
    );
    if found.is_none() {
        eprintln!("chromium is not installed: the browser checks are skipped");
    }
    found
}

/// Each chart's count of data marks the browser drew with a size, by name.
pub const MARKS: &str = r#"(() => {
  const marks = {};
  for (const fig of document.querySelectorAll("figure.chart")) {
    marks[fig.dataset.name] = [...fig.querySelectorAll("svg .mark")]
      .filter((e) => { const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length;
  }
  return marks;
})()"#;

/// Loads `html` in the browser, checks that its script ran without errors,
/// and returns each chart's count of drawn marks.
pub fn marks_in_browser(browser: &str, html: &Path) -> serde_json::Map<String, serde_json::Value> {
    let mut page = browser::Page::open(browser, html, 1400, 1000);
    let errors = page.errors();
    assert!(errors.is_empty(), "script errors: {errors:?}");
    page.eval(MARKS).as_object().unwrap().clone()
}

/// `retype replay --heap HEAPS`, validated and timed once (the tests check
/// results, not speed), in the repository's root; add traces and flags.
pub fn quick_replay(heaps: &str) -> Command {
    let mut c = retype_cmd();
    c.args([
        "replay",
        "--heap",
        heaps,
        "--runs",
        "1",
        "--min-time-ms",
        "0",
    ])
    .current_dir(repo());
    c
}
