//! A trace compiled for replay: its requests with block ids turned into dense
//! slots, the peak of live requested bytes (mdriver's `max_total_size`), and
//! for a recording the trace itself, read once, for the report's figures.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Result};
use retype_trace::malloclab::{self, Op};
use retype_trace::Trace;

/// One request with ids turned into dense slots, ready to run.
#[derive(Clone, Copy)]
pub enum Step {
    Alloc {
        slot: usize,
        size: usize,
        align: usize,
    },
    Realloc {
        slot: usize,
        size: usize,
    },
    Free {
        slot: usize,
    },
}

/// A trace compiled for replay.
pub struct Program {
    /// How tables and the report name it: its file name, or its path when
    /// another trace of the same run has the same file name.
    pub name: String,
    pub path: String,
    pub steps: Vec<Step>,
    /// The line (or request number) of each step, for error messages.
    pub lines: Vec<usize>,
    pub slots: usize,
    /// mdriver's `max_total_size`.
    pub peak_live: u64,
    /// The recording this program was made from; `None` for a `.rep` file.
    pub recorded: Option<Trace>,
}

/// Compiles every trace; traces that share a file name are named by path.
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

/// A `.rep` file, or any trace `retype trace` reads as requests: threads
/// serialized by timestamp, numbered from 1 in error messages.
fn compile(path: &Path) -> Result<Program> {
    let (trace, recorded) = if path.extension().is_none_or(|e| e != "rep") {
        let t = retype_trace::format::load(path, None)?;
        let (ops, _) = retype_trace::rep::to_malloclab(&t);
        let requests = malloclab::Trace {
            lines: (1..=ops.len()).collect(),
            ops,
            ..malloclab::Trace::default()
        };
        (requests, Some(t))
    } else {
        (malloclab::read(path)?, None)
    };
    let file = path.display().to_string();
    let mut slot_of: HashMap<u32, usize> = HashMap::new();
    let mut live: Vec<u64> = Vec::new();
    let (mut total, mut peak) = (0u64, 0u64);
    let mut steps = Vec::with_capacity(trace.ops.len());
    for (op, &line) in trace.ops.iter().zip(&trace.lines) {
        let fit = |n: u64| {
            usize::try_from(n)
                .map_err(|_| anyhow!("{file}:{line}: size {n} does not fit this machine"))
        };
        let id = match *op {
            Op::Alloc { id, .. } | Op::Realloc { id, .. } | Op::Free { id } => id,
        };
        let next = slot_of.len();
        let slot = *slot_of.entry(id).or_insert(next);
        if slot == live.len() {
            live.push(0);
        }
        steps.push(match *op {
            Op::Alloc { size, align, .. } => {
                total += size;
                live[slot] = size;
                Step::Alloc {
                    slot,
                    size: fit(size)?,
                    align: align as usize,
                }
            }
            Op::Realloc { size, .. } => {
                total = total - live[slot] + size;
                live[slot] = size;
                Step::Realloc {
                    slot,
                    size: fit(size)?,
                }
            }
            Op::Free { .. } => {
                total -= live[slot];
                Step::Free { slot }
            }
        });
        peak = peak.max(total);
    }
    Ok(Program {
        name: path
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned()),
        path: file,
        steps,
        lines: trace.lines,
        slots: live.len(),
        peak_live: peak,
        recorded,
    })
}
