//! Inputs the fuzz targets (fuzz/, docs/reliability.md) found a hang or a
//! blow-up on, kept under tests/fuzz/: each now reads in its ordinary time and
//! memory.

use std::path::Path;

use retype::api::Study;
use retype::sites::symbols::Symbolizer;
use retype_trace::{Module, Trace};

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

/// An object whose `.debug_info`, 280 bytes compressed, claims 2.5 GB
/// uncompressed (found by `symbolize`): the loader reserved and cleared all of
/// it before inflating. The symbolizer now refuses the file, naming the section
/// and the sizes, and its frames stay module+offset.
#[test]
fn a_compressed_section_claiming_gigabytes_is_refused() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/compressed-claim/object.so");
    let trace = Trace {
        modules: vec![Module {
            path: path.display().to_string(),
            base: 0,
            start: 0,
            end: u64::MAX,
            build_id: Vec::new(),
            segment: 0,
        }],
        ..Trace::default()
    };
    let mut symbolizer = Symbolizer::new(&trace);
    let frames = symbolizer.frames(0, 0x1001);
    assert!(frames.iter().all(|f| !f.resolved), "{frames:?}");
    let warning = symbolizer.warnings.join("\n");
    assert!(
        warning.contains(".debug_info claims 2550137282 bytes uncompressed from 280 compressed"),
        "{warning}"
    );
}
