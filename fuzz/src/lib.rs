//! Fuzz targets for every reader and decoder of retype (issue #46): each is
//! a function of the input's bytes that panics only on a bug, so that
//! libFuzzer (`fuzz_targets/`, run by `scripts/fuzz`) and the plain test
//! (`tests/corpus.rs`, run by `scripts/test`) call the same code.
//!
//! Beyond "no panic", the targets check what the readers promise: an error
//! names the file and the line or byte offset ([`place`]), a trace reads back
//! as it was written, a file cut short reads as a prefix of the whole.
//!
//! - [`trace`]: the `.rtr` reader (whole, and cut at every byte) and the
//!   importers of `trace convert` (malloc-lab `.rep`, valgrind, wee_alloc, CSV);
//! - [`study`]: CantripOS logs, request scripts and a sweep grid's cells;
//! - [`symbols`]: the symbolizer's ELF/DWARF input;
//! - [`cheri`]: `retype cheri decode`.
//!
//! [`scratch`] holds the files that path-taking entry points read.

pub mod cheri;
pub mod place;
pub mod scratch;
pub mod study;
pub mod symbols;
pub mod trace;

/// A fuzz target: its name (its binary's and its corpus directory's) and
/// its function.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, as `fuzz/fuzz_targets/` and `fuzz/corpus/` name them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "rtr",
        run: trace::rtr,
    },
    Target {
        name: "rtr_cut",
        run: trace::rtr_cut,
    },
    Target {
        name: "rep",
        run: trace::rep,
    },
    Target {
        name: "valgrind",
        run: trace::valgrind,
    },
    Target {
        name: "wee_alloc",
        run: trace::wee_alloc,
    },
    Target {
        name: "csv",
        run: trace::csv,
    },
    Target {
        name: "cantrip_log",
        run: study::cantrip_log,
    },
    Target {
        name: "script",
        run: study::script,
    },
    Target {
        name: "grid_cell",
        run: study::grid_cell,
    },
    Target {
        name: "symbolize",
        run: symbols::symbolize,
    },
    Target {
        name: "cheri_decode",
        run: cheri::cheri_decode,
    },
];
