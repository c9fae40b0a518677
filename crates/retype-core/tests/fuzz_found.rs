//! Inputs the fuzz targets (fuzz/, docs/reliability.md) found a crash on,
//! kept under tests/fuzz/: each is now refused with an error.

use std::path::Path;

use retype_core::mm::Layout;

/// The inputs named `PREFIX*` under tests/fuzz/.
fn inputs(prefix: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/fuzz")
        .map(|e| e.expect("a readable directory").path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a readable input");
            (p.display().to_string(), text)
        })
        .collect();
    assert!(!out.is_empty(), "no {prefix}* inputs in {}", dir.display());
    out.sort();
    out
}

/// `--layout cantrip*K` with K times 22 slabs past memory (or past `usize`)
/// aborted on allocation; it is refused, naming the limit.
#[test]
fn layouts_of_too_many_slabs_are_refused() {
    for (path, text) in inputs("layout-") {
        let e = Layout::parse(&text).expect_err(&path);
        assert!(e.0.contains(&Layout::MAX_SLABS.to_string()), "{path}: {e}");
    }
    let most = Layout::MAX_SLABS / 22;
    assert_eq!(
        Layout::parse(&format!("cantrip*{most}")).unwrap().len(),
        most * 22
    );
    assert!(Layout::from_bits(vec![12; Layout::MAX_SLABS + 1]).is_err());
    assert!(Layout::from_bits(vec![12; Layout::MAX_SLABS]).is_ok());
}
