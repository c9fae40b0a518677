//! The heap replays in CHERI mode (`retype report --cheri FORMAT`, seed 004's
//! capability half): what exactly representable bounds on every block cost
//! each trace on each heap, beside its plain run, and by size range.

use retype_core::heap::cheri::SizeRange;

use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::replay::cheri::CheriRun;
use crate::replay::rows::ScoreRow;

/// Per trace and heap: utilization plain and in CHERI mode, and what the
/// exact bounds cost.
fn runs(rows: &[&ScoreRow]) -> Table {
    let head = [
        "trace",
        "heap",
        "util plain (%)",
        "util CHERI (%)",
        "requests",
        "rounded",
        "realigned",
        "padding (B)",
        "alignment frag (B)",
    ]
    .map(Cell::new)
    .to_vec();
    let rows = rows
        .iter()
        .filter_map(|r| {
            let c = r.cheri.as_ref()?;
            Some(vec![
                Cell::new(r.name.clone()),
                Cell::new(r.heap),
                Cell::new(format!("{:.1}", 100.0 * r.util)),
                Cell::new(format!("{:.1}", 100.0 * c.util)),
                Cell::new(c.requests.to_string()),
                Cell::new(c.rounded.to_string()),
                Cell::new(c.realigned.to_string()),
                Cell::new(c.padding.to_string()),
                Cell::new(c.alignment_fragmentation.to_string()),
            ])
        })
        .collect();
    Table { head, rows }
}

/// Every run's requests by size range, summed over traces and heaps (the
/// ranges that had requests, smallest first).
fn by_size(rows: &[&ScoreRow]) -> Table {
    let mut bands: Vec<(&'static str, [u64; 5])> =
        SizeRange::all().map(|r| (r.label(), [0; 5])).collect();
    for b in rows
        .iter()
        .filter_map(|r| r.cheri.as_ref())
        .flat_map(|c| &c.by_size)
    {
        let sums = bands
            .iter_mut()
            .find(|(range, _)| *range == b.range)
            .map(|(_, sums)| sums)
            .expect("a run's size range is one of SizeRange::all()");
        let values = [b.requests, b.rounded, b.realigned, b.requested, b.padding];
        for (sum, v) in sums.iter_mut().zip(values) {
            *sum += v;
        }
    }
    let head = [
        "size range",
        "requests",
        "rounded",
        "realigned",
        "requested (B)",
        "padding (B)",
    ]
    .map(Cell::new)
    .to_vec();
    let rows = bands
        .into_iter()
        .filter(|(_, sums)| sums[0] > 0)
        .map(|(range, sums)| {
            let mut row = vec![Cell::new(range)];
            row.extend(sums.map(|v| Cell::new(v.to_string())));
            row
        })
        .collect();
    Table { head, rows }
}

/// The part: a summary line with the totals, then the runs and the size ranges.
pub fn part(format: &str, rows: &[&ScoreRow]) -> Part {
    let cheri: Vec<_> = rows.iter().filter_map(|r| r.cheri.as_ref()).collect();
    let total = |f: fn(&CheriRun) -> u64| cheri.iter().map(|c| f(c)).sum::<u64>();
    let summary = format!(
        "Each trace on each heap once more with {format} capabilities, every block's bounds exactly representable (a model: no tag is checked on this machine). \
         Over {} runs: {} of {} requests rounded, {} realigned, {} bytes of padding, {} bytes of alignment fragmentation.",
        cheri.len(),
        total(|c| c.rounded),
        total(|c| c.requests),
        total(|c| c.realigned),
        total(|c| c.padding),
        cheri.iter().map(|c| c.alignment_fragmentation).sum::<i64>(),
    );
    Part {
        id: "cheri".into(),
        title: format!("Heaps in CHERI mode ({format})"),
        summary: vec![Summary::Line(summary)],
        sections: vec![
            Section {
                title: "Per trace and heap".into(),
                notes: Vec::new(),
                figures: vec![Figure {
                    title: "utilization plain and in CHERI mode".into(),
                    body: Body::Table(runs(rows)),
                    caption: "Rounded: requests whose length grew to the format's representable length (CRRL); realigned: those whose base needed more alignment (CRAM) than the heap's least; alignment fragmentation: heap growth beyond the plain run that padding does not explain (negative where the realigned layout packed better).".into(),
                }],
            },
            Section {
                title: "By size range".into(),
                notes: Vec::new(),
                figures: vec![Figure {
                    title: "requests and padding by size range".into(),
                    body: Body::Table(by_size(rows)),
                    caption: "Summed over every trace and heap.".into(),
                }],
            },
        ],
    }
}
