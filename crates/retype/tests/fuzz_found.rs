//! Inputs the fuzz targets (fuzz/, docs/reliability.md) found a hang on, kept
//! under tests/fuzz/: each now reads in its ordinary time.

use std::path::Path;

use retype::api::Study;

/// A CantripOS log whose line 140 claims 144,294,967,296 objects in use and
/// whose next line frees all but 13 of them: the recovery's sums of freed
/// objects before a per-slab dump added them one at a time (the plain fuzz
/// test's seed 1071 hung there for hours). The log reads, or is refused
/// naming itself, under both policies the fuzz target tries.
#[test]
fn a_free_of_billions_of_objects_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/billions-of-objects");
    let log = dir.join("run.log");
    assert!(dir.join("memory_stats_run.log").is_file());
    for policy in ["best-fit", "next-fit"] {
        if let Err(e) = Study::parse(&format!("log:{}", log.display()), policy, None, None) {
            let message = format!("{e:#}");
            assert!(
                message.contains(&log.display().to_string())
                    || message.contains("memory_stats_run.log"),
                "{policy}: {message}"
            );
        }
    }
}
