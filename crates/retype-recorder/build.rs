//! Compiles the C half of the recorder: `execl`, `execlp`, `execle`, which are
//! C-variadic (stable Rust cannot define those).

fn main() {
    println!("cargo:rerun-if-changed=c/exec_variadic.c");
    println!("cargo:rerun-if-changed=c/exec_variadic.map");
    cc::Build::new()
        .file("c/exec_variadic.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .compile("exec_variadic");
    // Nothing in Rust calls them: keep them in the library (-u) and export
    // them beside rustc's own list of exports (a second version script).
    for f in ["execl", "execlp", "execle"] {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-u,{f}");
    }
    let map = concat!(env!("CARGO_MANIFEST_DIR"), "/c/exec_variadic.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={map}");
}
