//! The retype laboratory as a library: the command line's subcommands
//! (`cmd`) and, for embedding (the Python module), [`api`]: one study run or
//! one replay, with the same figures and JSON keys as the command line.
//!
//! Three layers, each using only those below it:
//!
//! 1. The experiments, which compute typed results and print nothing: `study`
//!    (seed 000), `tlm` (seed 003), `cheri_study` (seed 004's capabilities), `replay`, [`sites`], `protocol`, `bench`,
//!    and what they share: `preload` (the allocators a program runs on),
//!    `attach` (the recorder loaded into a running process),
//!    `trace_info`, `names`, `progress`, `timing`.
//! 2. `report`: the page kit (page, chart, table, the `--json` lines reader)
//!    and one renderer per experiment, drawing the experiment's results.
//! 3. [`cmd`] (arguments, text and JSON, calling the experiments and the
//!    renderers) and [`api`], which calls the experiments, never `cmd`.

/// `print!` to standard output that returns the write's error instead of
/// panicking, so that a reader that goes away (`retype … | head`) ends the
/// command quietly (see `main`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)?
    }};
}

/// [`out!`] with a newline, as `println!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

pub mod api;
mod attach;
mod bench;
mod cheri_study;
pub mod cmd;
mod names;
mod preload;
mod progress;
mod protocol;
mod replay;
mod report;
pub mod sites;
mod study;
mod timing;
mod tlm;
mod trace_info;
