//! The goals of issue 17 for retype-malloc in this experiment: the lowest
//! p99.99 and maximum latency and the lowest kernel/user ratio of all the
//! allocators compared, at every thread count (and block size). retype-malloc
//! with a reserve, when it ran, is judged the same way, against the others but
//! retype-malloc.

use super::row::Row;

/// How retype-malloc is named in the rows (as `retype record` names it).
pub const OURS: &str = "retype";

/// How retype-malloc with a reserve (`study tlm --reserve`) is named in the rows.
pub const RESERVED: &str = "retype-reserve";

/// Whether `allocator` is one of ours.
fn ours(allocator: &str) -> bool {
    allocator == OURS || allocator == RESERVED
}

/// A figure compared across allocators; lower is better.
pub struct Metric {
    pub name: &'static str,
    pub of: fn(&Row) -> Option<f64>,
}

pub const METRICS: [Metric; 4] = [
    Metric {
        name: "p99.99 latency (ns)",
        of: |r| Some(r.latency.p9999_ns as f64),
    },
    Metric {
        name: "max latency (ns)",
        of: |r| Some(r.latency.max_ns as f64),
    },
    // The maximum is often one call whose worker was preempted (more workers than cores):
    // this one leaves out the calls during which the worker was descheduled.
    Metric {
        name: "max latency, worker running (ns)",
        of: |r| r.max_running_ns.map(|n| n as f64),
    },
    Metric {
        name: "kernel/user ratio",
        of: |r| r.kernel_user_ratio,
    },
];

/// One goal at one thread count and block size.
pub struct Verdict {
    /// Which of ours: [`OURS`] or [`RESERVED`].
    pub allocator: String,
    pub threads: u32,
    pub size: u64,
    pub metric: &'static str,
    /// retype-malloc's figure.
    pub ours: Option<f64>,
    /// The lowest figure of the other allocators, and whose it is.
    pub best_other: Option<(String, f64)>,
}

impl Verdict {
    /// Whether retype-malloc's figure is the lowest (a tie counts).
    pub fn met(&self) -> bool {
        match (self.ours, &self.best_other) {
            (Some(o), Some((_, b))) => o <= *b,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// Every goal at every thread count and size where retype-malloc ran, with
/// and without a reserve.
pub fn verdicts(rows: &[Row]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for mine in rows.iter().filter(|r| ours(&r.allocator)) {
        let others: Vec<&Row> = rows
            .iter()
            .filter(|r| !ours(&r.allocator) && r.threads == mine.threads && r.size == mine.size)
            .collect();
        for m in &METRICS {
            let best_other = others
                .iter()
                .filter_map(|r| Some((r.allocator.clone(), (m.of)(r)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            out.push(Verdict {
                allocator: mine.allocator.clone(),
                threads: mine.threads,
                size: mine.size,
                metric: m.name,
                ours: (m.of)(mine),
                best_other,
            });
        }
    }
    out
}
