//! Compiles the C half of the recorder: the bodies of `execl`, `execlp` and
//! `execle`, which are C-variadic (stable Rust cannot define those).

fn main() {
    println!("cargo:rerun-if-changed=c/exec_variadic.c");
    cc::Build::new()
        .file("c/exec_variadic.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .compile("exec_variadic");
}
