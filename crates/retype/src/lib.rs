//! The retype laboratory as a library: the command line's subcommands
//! (`cmd`) and, for embedding (the Python module), [`api`]: one study run or
//! one replay, with the same figures and JSON keys as the command line.

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
mod check;
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
