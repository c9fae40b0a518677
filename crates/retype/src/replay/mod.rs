//! Replaying malloc-lab traces and recordings on our heaps, scored as the
//! CS:APP malloc-lab driver (mdriver) does, one concern per module:
//! - [`program`]: a trace read as requests on dense ids (recordings: threads
//!   serialized by timestamp, requests numbered from 1 in errors);
//! - [`check`]: running a program on a heap, validated as mdriver validates;
//! - [`placement`]: seed 003's holes at the peak and reallocs moved;
//! - [`score`]: utilization, fragmentation #4, throughput, performance index;
//! - [`cheri`]: the CHERI mode's run of a trace on a heap, beside the plain one;
//! - [`figures`]: what the report draws of a trace;
//! - [`rows`]: the results as typed rows, which the command line prints and the API returns.

pub mod check;
pub mod cheri;
pub mod figures;
pub mod placement;
pub mod program;
pub mod rows;
pub mod score;

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use retype_core::cheri::Format;
use retype_core::heap::{Arena, HeapKind};

use figures::{HeapRun, TraceFigures};
use placement::Placement;
use rows::{Row, ScoreRow, TotalRow};
use score::Timing;

/// Virtual size of the arena a replay runs in; untouched pages cost nothing.
const ARENA: usize = 4 << 30;

/// One replay: traces, heaps and how to time them.
pub struct Replay {
    pub traces: Vec<PathBuf>,
    pub heaps: Vec<HeapKind>,
    pub timing: Timing,
    /// Also run each trace on each heap in this CHERI format (see [`cheri`]).
    pub cheri: Option<Format>,
}

/// What a replay found besides its rows.
pub struct Outcome {
    /// What a report shows of each trace, in the order given.
    pub figures: Vec<TraceFigures>,
    /// The placement of each recorded trace on each heap, named by trace.
    pub placements: Vec<(String, HeapKind, Placement)>,
}

impl Replay {
    /// Replays every trace on every heap, handing each row to `row` as soon as it is
    /// scored (a long run shows its progress); each heap's total follows its traces.
    pub fn run(&self, row: &mut dyn FnMut(Row) -> Result<()>) -> Result<Outcome> {
        let programs = program::compile_all(&self.traces)?;
        let mut arena =
            Arena::new(ARENA).ok_or_else(|| anyhow!("cannot reserve a {ARENA}-byte arena"))?;
        let mut cheri_arena = self.cheri.map(|f| cheri::arena_for(f, ARENA)).transpose()?;
        let mut placements = Vec::new();
        let mut figures: Vec<TraceFigures> = programs.iter().map(figures::trace_figures).collect();
        let mut progress =
            crate::progress::Progress::new((self.heaps.len() * programs.len()) as u64, "replay");
        for &heap in &self.heaps {
            let (mut util_sum, mut ops, mut secs) = (0.0, 0usize, 0.0);
            for (prog, fig) in programs.iter().zip(&mut figures) {
                progress.step(&format!("{} on {heap}", prog.name));
                let s = score::score(&mut arena, heap, prog, self.timing)?;
                fig.heaps.push(HeapRun {
                    heap,
                    util: s.util,
                    map: s.placement.map.clone(),
                });
                if prog.recorded.is_some() {
                    placements.push((prog.name.clone(), heap, s.placement.clone()));
                }
                util_sum += s.util;
                ops += s.ops;
                secs += s.secs;
                let cheri = match (self.cheri, cheri_arena.as_mut()) {
                    (Some(f), Some(a)) => Some(cheri::run(a, heap, prog, f, s.heap_size)?),
                    _ => None,
                };
                row(Row::Score(Box::new(ScoreRow::new(
                    prog,
                    heap.name(),
                    &s,
                    cheri,
                ))))?;
            }
            if programs.len() > 1 {
                let util = util_sum / programs.len() as f64;
                let kops = score::kops(ops, secs);
                row(Row::Total(TotalRow::new(
                    heap.name(),
                    programs.len(),
                    ops,
                    util,
                    kops,
                )))?;
            }
        }
        Ok(Outcome {
            figures,
            placements,
        })
    }
}
