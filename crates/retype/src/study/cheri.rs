//! Seed 000's study under CHERI (`retype study --cheri FORMAT`): what exact
//! bounds would cost a capability-based memory manager, measured from a
//! run's placements rather than assumed.
//!
//! Three kinds of capability are sized in the format ([`exact_bounds`]: the
//! length rounded up to CRRL, the base aligned with CRAM):
//! - every seL4 object the run retypes, at the address the kernel gave it;
//! - the untyped slabs the manager starts with, at their boot addresses;
//! - each served request as one capability over all its objects, as a
//!   manager handing an application one bounded region per request would
//!   need (its base aligned as its largest object is).
//!
//! The objects' padding, live at each request, is counted as alignment
//! fragmentation; the run's figures so counted stand beside the plain run's.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};

use anyhow::{bail, Context};
use retype_core::cheri::Format;
use retype_core::heap::cheri::{exact_bounds, ExactBounds, Padding, SizeRange};
use retype_core::mm::{Layout, MemoryManager, ObjDesc};
use retype_core::objects::Config;
use retype_core::workload::{drive, Op, Outcome, Step, Workload};

use super::data::{self, Prepared};
use super::spec::PolicySpec;
use super::summary::{kib, Summary};
use retype_core::mm::Accounting;

/// One run's capabilities in one format.
#[derive(Clone, Debug)]
pub struct CheriFigures {
    pub format: Format,
    /// Every object retyped, by size range.
    pub objects: Padding,
    /// The slabs of the layout.
    pub slabs: Padding,
    /// Every served request as one capability.
    pub requests: Padding,
    /// The largest padding of the requests live at once.
    pub requests_peak_live_padding: u64,
    /// The run's figures with the live objects' padding counted as
    /// alignment fragmentation (time left out).
    pub summary: Summary,
}

/// A capability of `size` bytes at a base aligned to `align`, recorded in
/// `into`; its padding, or an error where the format cannot address it.
fn record(
    into: &mut Padding,
    format: Format,
    what: &dyn Fn() -> String,
    size: u64,
    align: u64,
) -> anyhow::Result<ExactBounds> {
    let bounds = exact_bounds(format, size)
        .with_context(|| format!("{}: {size} bytes exceed {format}'s address space", what()))?;
    into.record(size, align, &bounds, 1);
    Ok(bounds)
}

/// The largest power of two dividing `address` (its alignment).
fn alignment_of(address: u64) -> u64 {
    1u64.checked_shl(address.trailing_zeros()).unwrap_or(0)
}

/// The slabs of `layout` as capabilities in `format`.
fn slabs(format: Format, layout: &Layout) -> anyhow::Result<Padding> {
    let mut p = Padding::default();
    for (base, bits) in layout.regions() {
        let size = 1u64 << bits;
        if u128::from(base) + u128::from(size) > format.max_top() {
            bail!("the slab at {base:#x} of {size} bytes lies beyond {format}'s address space");
        }
        record(
            &mut p,
            format,
            &|| format!("slab at {base:#x}"),
            size,
            alignment_of(base),
        )?;
    }
    Ok(p)
}

/// The request a workload asked for last, seen on its way to the manager.
struct Watched<'a> {
    inner: Box<dyn Workload>,
    /// The allocation's id and descriptors, until the step that served it.
    last: &'a RefCell<Option<(u32, Vec<ObjDesc>)>>,
    /// Ids freed by the last request.
    freed: &'a RefCell<Vec<u32>>,
}

impl Workload for Watched<'_> {
    fn next_op(&mut self) -> Option<Op> {
        let op = self.inner.next_op()?;
        match &op {
            Op::Alloc { id, request } => *self.last.borrow_mut() = Some((*id, request.clone())),
            Op::Free { ids } => *self.freed.borrow_mut() = ids.clone(),
        }
        Some(op)
    }

    fn refused(&mut self, id: u32) {
        self.inner.refused(id);
    }
}

/// Runs `w` under `policy` as [`super::run::run_one`] does (the thesis's
/// accounting) and sizes every capability in `format`.
pub fn measure(
    w: &Prepared,
    policy: PolicySpec,
    config: Config,
    layout: &Layout,
    format: Format,
) -> anyhow::Result<CheriFigures> {
    let slabs = slabs(format, layout)?;
    let mut objects = Padding::default();
    let mut requests = Padding::default();
    let mut live_requests: BTreeMap<u32, u64> = BTreeMap::new();
    let mut requests_peak_live_padding = 0;
    let mut steps = Vec::new();
    let mut before: HashSet<(u64, u64)> = HashSet::new();
    let mut failure = None;
    let last = RefCell::new(None);
    let freed = RefCell::new(Vec::new());
    let mut workload = Watched {
        inner: w.workload(),
        last: &last,
        freed: &freed,
    };
    let mut mm = data::manager(config, layout, policy, Accounting::THESIS);
    let mut each = |s: &Step, mm: &MemoryManager| -> anyhow::Result<()> {
        // Objects are named by address: no two live ones share one.
        let now = live_objects(mm);
        let mut live_padding = 0;
        for &(address, size) in &now {
            let what = || format!("object of {size} bytes at {address:#x}");
            let mut scratch = Padding::default();
            let bounds = record(&mut scratch, format, &what, size, alignment_of(address))?;
            live_padding += bounds.padding(size);
            if !before.contains(&(address, size)) {
                record(&mut objects, format, &what, size, alignment_of(address))?;
            }
        }
        before = now;
        match s.outcome {
            Outcome::Alloc => {
                let (id, request) = last.borrow_mut().take().expect("an allocation was asked");
                let bits: Vec<u32> = request
                    .iter()
                    .map(|d| config.object_bits(d.ty, d.size_bits).expect("served"))
                    .collect();
                let size: u64 = request
                    .iter()
                    .zip(&bits)
                    .map(|(d, &b)| u64::from(d.count) << b)
                    .sum();
                let align = 1u64 << bits.iter().max().expect("a served request has objects");
                let what = || format!("request {id}");
                let bounds = record(&mut requests, format, &what, size, align)?;
                live_requests.insert(id, bounds.padding(size));
            }
            Outcome::Free => {
                for id in freed.borrow_mut().drain(..) {
                    live_requests.remove(&id);
                }
            }
            Outcome::OutOfMemory => {
                last.borrow_mut().take();
            }
        }
        requests_peak_live_padding =
            requests_peak_live_padding.max(live_requests.values().sum::<u64>());
        let mut counted = *s;
        counted.stats.frag_alignment += live_padding;
        counted.ticks = 0;
        steps.push(counted);
        Ok(())
    };
    drive(
        &mut mm,
        &mut workload,
        || 0,
        |s, mm| {
            if failure.is_none() {
                failure = each(s, mm).err();
            }
        },
    )
    .with_context(|| format!("workload {}", w.name))?;
    if let Some(e) = failure {
        return Err(e.context(format!("workload {} in {format}", w.name)));
    }
    Ok(CheriFigures {
        format,
        objects,
        slabs,
        requests,
        requests_peak_live_padding,
        summary: Summary::of(&steps),
    })
}

/// `(address, size)` of every live object of `mm`.
fn live_objects(mm: &MemoryManager) -> HashSet<(u64, u64)> {
    mm.live_objects()
        .iter()
        .zip(mm.slabs())
        .flat_map(|(objects, slab)| objects.iter().map(|&(o, size)| (slab.base() + o, size)))
        .collect()
}

/// A count of capabilities as JSON: how many, rounded, realigned, padding,
/// and by size range those that had any.
fn padding_json(p: &Padding) -> serde_json::Value {
    let t = p.total();
    let by_size: Vec<serde_json::Value> = SizeRange::all()
        .zip(&p.by_range)
        .filter(|(_, r)| r.requests > 0)
        .map(|(range, r)| {
            serde_json::json!({
                "range": range.label(),
                "count": r.requests,
                "rounded": r.rounded,
                "realigned": r.realigned,
                "bytes": r.requested,
                "padding": r.padding,
            })
        })
        .collect();
    serde_json::json!({
        "count": t.requests,
        "rounded": t.rounded,
        "realigned": t.realigned,
        "bytes": t.requested,
        "padding": t.padding,
        "by_size": by_size,
    })
}

/// The `cheri` object of a run's `--json` line.
pub fn json(c: &CheriFigures) -> serde_json::Value {
    let s = &c.summary;
    serde_json::json!({
        "format": c.format.name(),
        "objects": padding_json(&c.objects),
        "slabs": padding_json(&c.slabs),
        "requests": padding_json(&c.requests),
        "requests_peak_live_padding": c.requests_peak_live_padding,
        "peak_frag_total_kib": kib(s.peak_frag_total as f64),
        "avg_frag_total_kib": kib(s.avg_frag_total),
        "peak_frag_alignment_kib": kib(s.peak_frag_alignment as f64),
        "avg_frag_alignment_kib": kib(s.avg_frag_alignment),
    })
}
