//! Inputs the fuzz targets (fuzz/, docs/reliability.md) found a fault on,
//! kept under tests/fuzz/, each read as `retype trace convert` reads it.

use std::path::{Path, PathBuf};

use retype_trace::format::{self, Format};

/// The inputs named `PREFIX*` under tests/fuzz/.
fn inputs(prefix: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fuzz")
        .map(|e| e.expect("a readable directory").path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert!(!out.is_empty(), "no {prefix}* inputs in {}", dir.display());
    out.sort();
    out
}

/// A `.rep` file that ends inside its 4-integer header, or right after it,
/// was refused naming the file but no line (`FILE: truncated header: expected
/// 4 integers, found 2`); it names the line where the file ends, as every
/// other error does.
#[test]
fn a_rep_header_cut_short_is_refused_naming_its_line() {
    for path in inputs("rep-") {
        let e = format::load(&path, Some(Format::Rep)).expect_err("a cut header");
        let message = format!("{e:#}");
        let at = format!("{}:", path.display());
        let line = message.strip_prefix(&at).unwrap_or("");
        assert!(
            line.starts_with(|c: char| c.is_ascii_digit()),
            "no line after the file name: {message}"
        );
    }
}
