//! The allocation sites of recorded programs: for each recording with call
//! stacks, the flame graph of the bytes each stack allocated and the table
//! of the sites (source lines) that allocated most, as `retype trace sites`
//! and `retype trace flamegraph` show them.

use std::collections::BTreeMap;

use super::chart::{self, Axes, FlameFrame};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::sites::tree::StackTree;
use crate::sites::{Analysis, By};

/// Rows of each trace's sites table.
const TOP: usize = 15;
/// Frames narrower than this share of the total are left out of the flame graph.
const MIN_SHARE: f64 = 0.0005;

/// The flame graph's frames and names of `a`'s stacks weighted by bytes allocated.
fn flame_frames(a: &Analysis) -> (Vec<String>, Vec<FlameFrame>) {
    // Outermost function at the root.
    let mut root = StackTree::default();
    for r in a.stacks.iter().filter(|r| r.stats.bytes > 0) {
        let names: Vec<String> = if r.frames.is_empty() {
            vec!["(no stack recorded)".into()]
        } else {
            r.frames.iter().rev().map(|f| f.function.clone()).collect()
        };
        root.add(&names, r.stats.bytes);
    }
    let (mut names, mut index, mut frames) = (Vec::new(), BTreeMap::new(), Vec::new());
    let min = root.bytes as f64 * MIN_SHARE;
    let mut todo = vec![(0u32, 0.0, &root)];
    while let Some((depth, start, node)) = todo.pop() {
        let mut at = start;
        for (name, child) in &node.children {
            let width = child.bytes as f64;
            if width >= min {
                let next = names.len();
                let k = *index.entry(name.clone()).or_insert_with(|| {
                    names.push(name.clone());
                    next
                });
                frames.push(FlameFrame {
                    depth,
                    start: at,
                    width,
                    name: k,
                });
                todo.push((depth + 1, at, child));
            }
            at += width;
        }
    }
    (names, frames)
}

/// The sites table: the `TOP` source lines that allocated most.
fn sites_table(a: &Analysis) -> Table {
    let head = [
        "site (function, file:line)",
        "bytes allocated",
        "calls",
        "live at the peak",
        "leaked",
        "leaked blocks",
    ]
    .map(Cell::new)
    .to_vec();
    let rows = a
        .sites(By::Line)
        .iter()
        .take(TOP)
        .map(|s| {
            let st = &s.stats;
            let mut row = vec![Cell::new(s.key.clone())];
            row.extend(
                [
                    st.bytes,
                    st.calls,
                    st.peak_bytes,
                    st.leaked_bytes,
                    st.leaked_blocks,
                ]
                .map(|v| Cell::new(v.to_string())),
            );
            row
        })
        .collect();
    Table { head, rows }
}

/// The part: a section per recording (`(name, analysis)`).
pub fn part(traces: &[(String, Analysis)]) -> Part {
    let mut part = Part {
        id: "sites".into(),
        title: "Allocation sites of recorded programs".into(),
        summary: Vec::new(),
        sections: Vec::new(),
    };
    let mut summary = Table {
        head: [
            "recording",
            "sites (lines)",
            "bytes allocated",
            "live at the peak",
            "leaked",
            "top site",
        ]
        .map(Cell::new)
        .to_vec(),
        rows: Vec::new(),
    };
    for (i, (name, a)) in traces.iter().enumerate() {
        let sites = a.sites(By::Line);
        let t = &a.total;
        summary.rows.push(vec![
            Cell::link(name.clone(), &part.section_id(i)),
            Cell::new(sites.len().to_string()),
            Cell::new(t.bytes.to_string()),
            Cell::new(t.peak_bytes.to_string()),
            Cell::new(t.leaked_bytes.to_string()),
            Cell::new(sites.first().map_or("-".into(), |s| s.key.clone())),
        ]);
        let (names, frames) = flame_frames(a);
        let mut notes = vec![format!(
            "{} allocations of {} bytes in all from {} sites; {} bytes live at the trace's peak; {} bytes in {} blocks never freed.",
            t.calls,
            t.bytes,
            sites.len(),
            t.peak_bytes,
            t.leaked_bytes,
            t.leaked_blocks
        )];
        notes.extend(a.warnings.iter().map(|w| format!("Note: {w}")));
        part.sections.push(Section {
            title: name.clone(),
            notes,
            figures: vec![
                Figure {
                    title: format!("{name}: flame graph of bytes allocated"),
                    body: Body::Chart(chart::flame(
                        &Axes {
                            x: "bytes allocated",
                            y: "stack depth",
                            log_y: false,
                        },
                        "bytes allocated",
                        chart::color(1),
                        &names,
                        &frames,
                    )),
                    caption: "Each box is a function, as wide as the bytes allocated below it; callers below their callees, the allocator's caller on top. Hover for the bytes, click a box to zoom to it (reset zoom goes back).".into(),
                },
                Figure {
                    title: format!("{name}: top sites"),
                    body: Body::Table(sites_table(a)),
                    caption: format!(
                        "The {TOP} source lines that allocated the most bytes (retype trace sites --by line)."
                    ),
                },
            ],
        });
    }
    part.summary = vec![
        Summary::Line("Where each recorded program's memory went: its allocation sites ranked by bytes allocated, with the bytes live at the peak and never freed.".into()),
        Summary::Table(summary),
    ];
    part
}
