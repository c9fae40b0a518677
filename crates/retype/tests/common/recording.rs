//! Recording real programs in the tests: building the recorder, compiling
//! our C and C++ test programs, `retype record`, and valgrind's own count.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

use retype_trace::{valgrind, Trace};

use super::retype_cmd;

/// Brings libretype_recorder.so beside the retype binary up to date: a test
/// run of this package alone does not build another package's cdylib.
pub fn recorder_built() {
    static BUILD: Once = Once::new();
    BUILD.call_once(|| {
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_retype"));
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "-p", "retype-recorder"]);
        if exe.components().any(|c| c.as_os_str() == "release") {
            cargo.arg("--release");
        }
        assert!(
            cargo.status().unwrap().success(),
            "cannot build retype-recorder"
        );
    });
}

/// Compiles one of our C or C++ test programs (`crates/retype-recorder/tests/c`)
/// into `dir`, with debug information.
pub fn compile(source: &str, dir: &Path) -> PathBuf {
    let stem = source.trim_end_matches(".cpp").trim_end_matches(".c");
    build(source, &[], &dir.join(stem))
}

/// Compiles one of our C test libraries (`crates/retype-recorder/tests/c`) into
/// `dir` as `libSTEM.so`, for `retype record --allocator`.
pub fn compile_library(source: &str, dir: &Path) -> PathBuf {
    let stem = source.trim_end_matches(".c");
    build(
        source,
        &["-shared", "-fPIC"],
        &dir.join(format!("lib{stem}.so")),
    )
}

/// `cc` (`c++` for `.cpp`) `-O1 -g -pthread EXTRA -o OUT SOURCE`.
fn build(source: &str, extra: &[&str], out: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../retype-recorder/tests/c")
        .join(source);
    let compiler = if source.ends_with(".cpp") {
        "c++"
    } else {
        "cc"
    };
    let ok = Command::new(compiler)
        .args(["-O1", "-g", "-pthread"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{compiler} runs: {e}"));
    assert!(ok.success(), "{compiler} {}", src.display());
    out.to_path_buf()
}

/// `retype record EXTRA -o DIR/NAME -- CMD`, run in `dir`, and the trace it wrote.
pub fn record(dir: &Path, name: &str, extra: &[&str], cmd: &[&str]) -> (Trace, Output) {
    recorder_built();
    let out = dir.join(name);
    let o = retype_cmd()
        .arg("record")
        .args(extra)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    let trace = Trace::read_file(&out)
        .unwrap_or_else(|e| panic!("{e:#}\nstderr: {}", String::from_utf8_lossy(&o.stderr)));
    (trace, o)
}

/// The same run under valgrind, parsed.
pub fn valgrind_trace(dir: &Path, cmd: &[&str]) -> Trace {
    let o = Command::new("valgrind")
        .args(["--trace-malloc=yes", "--run-libc-freeres=no"])
        .args(cmd)
        .current_dir(dir)
        .output()
        .expect("valgrind is installed (scripts/test installs it)");
    assert!(
        o.status.success(),
        "valgrind {cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    valgrind::parse("valgrind stderr", &String::from_utf8_lossy(&o.stderr)).unwrap()
}
