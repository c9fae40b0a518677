//! A trace made ready for replay: its requests with ids made dense (they index the table of
//! live blocks), the peak of live requested bytes (mdriver's `max_total_size`), and for a
//! recording the trace itself, read once, for the report's figures.

use std::path::Path;

use anyhow::{bail, Result};
use retype_trace::{format, Request, Requests, Trace};

/// A trace made ready for replay.
pub struct Program {
    /// How tables and the report name it: its file name, or its path when
    /// another trace of the same run has the same file name.
    pub name: String,
    pub path: String,
    /// Its requests; ids run from 0 below `slots`.
    pub requests: Requests,
    pub slots: usize,
    /// mdriver's `max_total_size`.
    pub peak_live: u64,
    /// The recording this program was made from; `None` for a `.rep` file.
    pub recorded: Option<Trace>,
}

/// Reads every trace; traces that share a file name are named by path.
pub fn compile_all(paths: &[impl AsRef<Path>]) -> Result<Vec<Program>> {
    let mut programs = paths
        .iter()
        .map(|p| compile(p.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = programs.iter().map(|p| p.name.clone()).collect();
    for p in &mut programs {
        if names.iter().filter(|&n| *n == p.name).count() > 1 {
            p.name = p.path.clone();
        }
    }
    Ok(programs)
}

/// A `.rep` file, or any trace `retype trace` reads (requests numbered from 1 in errors).
fn compile(path: &Path) -> Result<Program> {
    let (mut requests, recorded) = format::load_requests(path, None)?;
    let file = path.display().to_string();
    for (r, line) in requests.requests.iter().zip(&requests.lines) {
        if let Request::Alloc { size, .. } | Request::Realloc { size, .. } = *r {
            if usize::try_from(size).is_err() {
                bail!("{file}:{line}: size {size} does not fit this machine");
            }
        }
    }
    let slots = requests.dense();
    Ok(Program {
        name: path
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned()),
        path: file,
        peak_live: requests.peak_live(),
        requests,
        slots,
        recorded,
    })
}
