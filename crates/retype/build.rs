//! Tells the tests whether the shared workloads (`../shared/data`, beside the
//! repository) are there, so that a test that needs them is reported as
//! ignored, with the reason, rather than passing without running.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shared_data)");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if data.is_dir() {
        println!("cargo::rustc-cfg=shared_data");
        // Looked at again if the folder goes away.
        println!("cargo::rerun-if-changed={}", data.display());
    } else {
        // Not watched while absent (a missing path would rerun this script, and
        // rebuild the crate, on every build): `cargo clean -p retype` looks again.
        println!("cargo::rerun-if-changed=build.rs");
    }
}
