//! A run's per-request series as named columns: the `--csv` file's columns
//! and the Python module's DataFrame, from one list.

use retype_core::workload::{Outcome, Step};

/// One column of the series.
pub enum Column {
    Counts(Vec<u64>),
    /// What each request did: `alloc`, `free` or `oom`.
    Outcomes(Vec<&'static str>),
}

impl Column {
    /// How many requests it covers.
    pub fn rows(&self) -> usize {
        match self {
            Column::Counts(v) => v.len(),
            Column::Outcomes(v) => v.len(),
        }
    }

    /// Row `i` as CSV text.
    pub fn cell(&self, i: usize) -> String {
        match self {
            Column::Counts(v) => v[i].to_string(),
            Column::Outcomes(v) => v[i].to_string(),
        }
    }
}

fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Alloc => "alloc",
        Outcome::Free => "free",
        Outcome::OutOfMemory => "oom",
    }
}

/// The series of `steps`, request by request.
pub fn columns(steps: &[Step]) -> Vec<(&'static str, Column)> {
    let counts = |f: fn(&Step) -> u64| Column::Counts(steps.iter().map(f).collect());
    vec![
        ("op", Column::Counts((0..steps.len() as u64).collect())),
        (
            "outcome",
            Column::Outcomes(steps.iter().map(|s| outcome(s.outcome)).collect()),
        ),
        ("bytes_in_use", counts(|s| s.stats.bytes_in_use)),
        ("objects_in_use", counts(|s| s.stats.objects_in_use)),
        ("bytes_requested", counts(|s| s.stats.bytes_requested)),
        ("slab_resets", counts(|s| s.stats.slab_resets)),
        ("failed_retypes", counts(|s| s.stats.failed_retypes)),
        ("ooms", counts(|s| s.stats.ooms)),
        ("frag_watermark", counts(|s| s.stats.frag_watermark)),
        ("frag_alignment", counts(|s| s.stats.frag_alignment)),
        ("ns", counts(|s| s.ticks)),
    ]
}
