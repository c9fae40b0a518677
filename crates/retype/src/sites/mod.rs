//! Allocation sites: a recording's stacks symbolized ([`symbols`]) and
//! grouped by the function or source line that called the allocator, or by
//! whole stack, with their calls, bytes, live bytes at the peak and bytes
//! leaked at exit; and the stacks for other tools ([`export`], [`pprof`]).
//!
//! The site of a stack is its innermost frame that is not an allocator's
//! own wrapper (C++'s `operator new`, Rust's allocation shims, CPython's
//! allocator API): so a C++ program's sites are the functions that call
//! `new`, not `operator new` itself. `By::Stack` keeps whole stacks.

pub mod export;
pub mod gate;
pub mod massif;
pub mod pprof;
pub mod symbols;
pub mod timeline;
pub mod tree;

use std::collections::HashMap;
use std::path::Path;

use clap::ValueEnum;
use retype_trace::sites::{per_stack, SiteStats};
use retype_trace::window::Window;
use retype_trace::{Kind, Trace};

use symbols::{Frame, Symbolizer};

/// What `--by` groups stacks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, strum::Display)]
#[strum(serialize_all = "lowercase")]
pub enum By {
    /// The function that called the allocator
    Function,
    /// The source line of that call
    Line,
    /// The whole call stack
    Stack,
}

/// Functions that only pass an allocation on: a site is never one of them.
const WRAPPERS: &[&str] = &[
    "operator new",
    "std::__new_allocator<",
    "__gnu_cxx::new_allocator<",
    "std::allocator<",
    "std::allocator_traits<",
    "__rust_alloc",
    "__rust_realloc",
    "__rdl_",
    "alloc::alloc::",
    "PyMem_",
    "_PyMem_",
    "PyObject_Malloc",
    "PyObject_Calloc",
    "PyObject_Realloc",
    "_PyObject_Malloc",
    "_PyObject_Calloc",
    "_PyObject_Realloc",
];

/// The malloc family itself, as a frame above the recorded call (ld.so's
/// inlined `calloc` that calls through its pointer to the real one).
const FAMILY: &[&str] = &["malloc", "calloc", "realloc", "reallocarray", "free"];

fn is_wrapper(f: &Frame) -> bool {
    WRAPPERS.iter().any(|w| f.function.starts_with(w)) || FAMILY.contains(&f.function.as_str())
}

/// One stack of a trace, symbolized, with its figures.
pub struct Resolved {
    /// Innermost first, inlined functions expanded; empty for events
    /// recorded without a stack.
    pub frames: Vec<Frame>,
    /// The index in `frames` of the site (the first frame not a wrapper).
    pub site: usize,
    /// The stack was deeper than the recording's depth.
    pub truncated: bool,
    pub stats: SiteStats,
}

/// A trace's stacks (element 0: the events without one) and their total.
pub struct Analysis {
    pub stacks: Vec<Resolved>,
    pub total: SiteStats,
    /// Objects that could not be symbolized, and why.
    pub warnings: Vec<String>,
    /// Whether the trace was recorded with stacks.
    pub has_stacks: bool,
    /// The kind of recording the figures come from (a sampled one's are estimates).
    pub kind: Kind,
}

impl Analysis {
    /// The whole trace's stacks.
    pub fn of(trace: &Trace) -> Analysis {
        Analysis::in_window(trace, Window::ALL)
    }

    /// The stacks' figures in `window` (see [`per_stack`]).
    pub fn in_window(trace: &Trace, window: Window) -> Analysis {
        let stats = per_stack(trace, window);
        let mut sym = Symbolizer::new(trace);
        let mut total = SiteStats::default();
        let stacks = stats
            .into_iter()
            .enumerate()
            .map(|(k, stats)| {
                total.add(&stats);
                let stack = k.checked_sub(1).map(|i| &trace.stacks[i]);
                let frames = stack.map_or_else(Vec::new, |s| sym.stack(s));
                let site = frames
                    .iter()
                    .position(|f| !is_wrapper(f))
                    .unwrap_or(frames.len().saturating_sub(1));
                Resolved {
                    frames,
                    site,
                    truncated: stack.is_some_and(|s| s.truncated),
                    stats,
                }
            })
            .collect();
        Analysis {
            stacks,
            total,
            warnings: sym.warnings,
            has_stacks: !trace.stacks.is_empty(),
            kind: Kind::of(trace),
        }
    }

    /// The stacks grouped by `by`, most bytes allocated first.
    pub fn sites(&self, by: By) -> Vec<Site> {
        let mut groups: HashMap<String, Site> = HashMap::new();
        for r in self
            .stacks
            .iter()
            .filter(|r| r.stats != SiteStats::default())
        {
            let (key, frames) = r.site_of(by);
            let site = groups.entry(key.clone()).or_insert_with(|| Site {
                key,
                frames,
                truncated: by == By::Stack && r.truncated,
                stats: SiteStats::default(),
                stacks: 0,
            });
            site.stats.add(&r.stats);
            site.stacks += 1;
        }
        let mut sites: Vec<Site> = groups.into_values().collect();
        sites.sort_by(|a, b| {
            (b.stats.bytes, b.stats.calls, b.stats.leaked_bytes, &a.key).cmp(&(
                a.stats.bytes,
                a.stats.calls,
                a.stats.leaked_bytes,
                &b.key,
            ))
        });
        sites
    }
}

impl Resolved {
    /// The site it belongs to under `by`: its name and frames.
    pub fn site_of(&self, by: By) -> (String, Vec<Frame>) {
        let frames = match (by, self.frames.get(self.site)) {
            (_, None) => Vec::new(),
            (By::Stack, Some(_)) => self.frames.clone(),
            (_, Some(f)) => vec![f.clone()],
        };
        (site_key(by, &frames), frames)
    }
}

/// What identifies a site across recordings: function names (and lines),
/// never addresses.
fn site_key(by: By, frames: &[Frame]) -> String {
    if frames.is_empty() {
        return NO_STACK.to_string();
    }
    match by {
        By::Function => frames[0].function.clone(),
        By::Line => frames[0].label(),
        By::Stack => frames
            .iter()
            .map(|f| f.function.as_str())
            .collect::<Vec<_>>()
            .join(" ← "),
    }
}

/// The name of the events recorded without a stack.
pub const NO_STACK: &str = "(no stack recorded)";

/// A group of stacks.
pub struct Site {
    /// Its name: the function, `function (file:line)`, or the stack's functions.
    pub key: String,
    /// The site's frame, or the whole stack for `--by stack`; empty without a stack.
    pub frames: Vec<Frame>,
    pub stats: SiteStats,
    /// How many recorded stacks it gathers.
    pub stacks: usize,
    /// A whole stack (`--by stack`) whose outer frames were not recorded.
    pub truncated: bool,
}

/// Says why a trace has no sites to show.
pub fn require_stacks(file: &Path, a: &Analysis) -> anyhow::Result<()> {
    if a.has_stacks {
        return Ok(());
    }
    anyhow::bail!(
        "{}: recorded without call stacks (a trace before format 2, an import, or `retype record --no-stacks`); record it again with `retype record`",
        file.display()
    )
}

/// Refuses what an aggregate recording cannot give (`what`: the analysis
/// or option that needs events), naming the file and the kind.
pub fn require_events(file: &Path, trace: &Trace, what: &str) -> anyhow::Result<()> {
    if Kind::of(trace) != Kind::Aggregate {
        return Ok(());
    }
    anyhow::bail!(
        "{}: an aggregate recording (retype record --aggregate) keeps per-stack counters, not events: {what} needs a full or sampled recording",
        file.display()
    )
}

/// Each site of two analyses (by `by`) with its figures in both (zero where
/// it is absent), largest change of bytes allocated first.
pub fn pairs(a: &Analysis, b: &Analysis, by: By) -> Vec<(String, [SiteStats; 2])> {
    let mut rows: HashMap<String, [SiteStats; 2]> = HashMap::new();
    for (i, sites) in [a.sites(by), b.sites(by)].into_iter().enumerate() {
        for s in sites {
            rows.entry(s.key).or_default()[i] = s.stats;
        }
    }
    let change = |[x, y]: &[SiteStats; 2]| x.bytes.abs_diff(y.bytes);
    let mut rows: Vec<(String, [SiteStats; 2])> = rows.into_iter().collect();
    rows.sort_by(|(ka, a), (kb, b)| (change(b), ka).cmp(&(change(a), kb)));
    rows
}
