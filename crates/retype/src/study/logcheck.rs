//! How closely a run reproduces a CantripOS log, op by op.

use retype_core::workload::Step;
use retype_recovery::{LogCounters, LoggedOp};

/// Per-counter agreement between a run and a log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    pub ops: usize,
    pub bytes_in_use: usize,
    pub slab_resets: usize,
    pub frag_watermark: usize,
    pub frag_alignment: usize,
    pub failed_retypes: usize,
    pub ooms: usize,
    /// Ops where bytes in use, slab resets and both fragmentations all agree.
    pub exact: usize,
    /// The first op where they do not.
    pub first_difference: Option<usize>,
}

impl Agreement {
    /// Compares step `i` of a run with record `i` of the log.
    pub fn of(steps: &[Step], log: &[LoggedOp]) -> Agreement {
        let mut a = Agreement {
            ops: steps.len().min(log.len()),
            ..Agreement::default()
        };
        for (i, (step, rec)) in steps.iter().zip(log).enumerate() {
            let ours = LogCounters::of(&step.stats);
            let theirs = &rec.after;
            let eq = |f: fn(&LogCounters) -> u64| (f(&ours) == f(theirs)) as usize;
            a.bytes_in_use += eq(|c| c.bytes_in_use);
            a.slab_resets += eq(|c| c.slab_resets);
            a.frag_watermark += eq(|c| c.frag_watermark);
            a.frag_alignment += eq(|c| c.frag_alignment);
            a.failed_retypes += eq(|c| c.failed_retypes);
            a.ooms += eq(|c| c.ooms);
            let all = eq(|c| c.bytes_in_use)
                & eq(|c| c.slab_resets)
                & eq(|c| c.frag_watermark)
                & eq(|c| c.frag_alignment);
            a.exact += all;
            if all == 0 && a.first_difference.is_none() {
                a.first_difference = Some(i);
            }
        }
        if steps.len() != log.len() && a.first_difference.is_none() {
            a.first_difference = Some(a.ops);
        }
        a
    }

    pub fn exact_fraction(&self) -> f64 {
        self.exact as f64 / self.ops.max(1) as f64
    }
}
