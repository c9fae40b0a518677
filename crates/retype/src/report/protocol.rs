//! The protocol latency study (`retype bench protocol`) in the
//! thesis's form: each operation's latency against capabilities per node
//! (median, with the 90th percentile dashed; Figures 4.8–4.30), CNode
//! deletion against occupied slots (Figure 4.19), and the breakdown of
//! every case at 4096 capabilities (Figures 4.10–4.32).

use std::path::Path;

use super::chart::{self, Axes, Line, Stack};
use super::table::{Cell, Table};
use super::{jsonl, Body, Figure, Part, Section, Summary};
use crate::protocol::cases::CNODE_SLOTS;
use crate::protocol::latency::Row;

/// Reads the lines of `retype bench protocol --json`; a bad line is
/// named by file and line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Row>> {
    jsonl::read(path, "bench protocol --json", |v| Row::from_json(&v))
}

/// The database size the breakdowns are drawn at: 4096, as the thesis's,
/// or the measured size nearest it.
fn reference_size(rows: &[Row]) -> u32 {
    let off = |c: u32| (c as f64 / 4096.0).ln().abs();
    rows.iter()
        .map(|r| r.caps)
        .min_by(|&a, &b| off(a).total_cmp(&off(b)))
        .unwrap_or(4096)
}

/// The cases in order of first appearance, as (op, case).
fn cases(rows: &[Row]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.op.clone(), r.case.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The CNode sweep's cases but one: the one with 4 slots stands for CNode
/// deletion against database size.
fn in_sweep_only(op: &str, case: &str) -> bool {
    op == "delete-cnode" && case != "occupied-4"
}

/// One figure of a row.
type Pick = fn(&Row) -> f64;

fn label(op: &str, case: &str) -> String {
    format!("{op} {case}")
}

pub fn part(rows: &[Row]) -> Part {
    let at = reference_size(rows);
    let mut part = Part {
        id: "protocol".into(),
        title: "Capability protocol latency (seed 001 §4.7)".into(),
        summary: Vec::new(),
        sections: vec![against_size(rows), sweep(rows, at), breakdown(rows, at)],
    };
    let here: Vec<&Row> = rows.iter().filter(|r| r.caps == at).collect();
    let goals: Vec<bool> = here.iter().filter_map(|r| r.goal_met()).collect();
    let first = here.first();
    part.summary = vec![
        Summary::Line(format!(
            "Median latency in TSC cycles at {at} capabilities per node, {} nodes on threads of their own ({} samples); {} of {} goals met (single-node cases: a fifth of the thesis's cycles; cross-node: their round trips of {:.0} cycles each plus their local work).",
            first.map_or(0, |r| r.nodes),
            first.map_or(0, |r| r.samples),
            goals.iter().filter(|&&m| m).count(),
            goals.len(),
            first.map_or(0.0, |r| r.round_trip),
        )),
        Summary::Table(goal_table(&here, &part.section_id(2))),
    ];
    part
}

fn goal_table(rows: &[&Row], link: &str) -> Table {
    let head = ["operation", "median", "thesis", "goal", "met"]
        .map(Cell::new)
        .to_vec();
    let rows = rows
        .iter()
        .filter(|r| r.goal.is_some())
        .map(|r| {
            vec![
                Cell::link(label(&r.op, &r.case), link),
                Cell::new(format!("{:.0}", r.median)),
                Cell {
                    reference: true,
                    ..Cell::new(r.thesis.clone())
                },
                Cell::new(r.goal.map_or("-".into(), |g| format!("{g:.0}"))),
                Cell::new(match r.goal_met() {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }),
            ]
        })
        .collect();
    Table { head, rows }
}

/// Median (solid) and 90th percentile (dashed) of each case of an
/// operation against capabilities per node.
fn against_size(rows: &[Row]) -> Section {
    let mut ops: Vec<String> = Vec::new();
    for (op, _) in cases(rows) {
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    let figures = ops
        .iter()
        .map(|op| {
            let mut lines = Vec::new();
            let mine = cases(rows).into_iter().filter(|(o, c)| o == op && !in_sweep_only(o, c));
            for (i, (_, case)) in mine.enumerate() {
                let of_case: Vec<&Row> = rows.iter().filter(|r| &r.op == op && r.case == case).collect();
                for (dashed, pick) in [(false, (|r: &Row| r.median) as Pick), (true, |r: &Row| r.p90)] {
                    lines.push(Line {
                        name: format!("{case} {}", if dashed { "p90" } else { "median" }),
                        color: chart::color(i),
                        points: of_case.iter().map(|r| (r.caps as f64, pick(r))).collect(),
                        dashed,
                    });
                }
            }
            let axes = Axes {
                x: "capabilities per node",
                y: "cycles",
                log_y: true,
            };
            Figure {
                title: format!("{op}: latency against capabilities per node"),
                body: Body::Chart(chart::lines(&axes, &lines, &[]).with_log_x()),
                caption: format!("Median (solid) and 90th percentile (dashed) in TSC cycles of each case of {op}, timed on node 0; both axes logarithmic, as the database sizes double."),
            }
        })
        .collect();
    Section {
        title: "Latency against capabilities per node".into(),
        notes: vec!["Figures 4.8–4.30 of the thesis show the same cases as box plots against the database size; the thesis's figures are in the table of the breakdown section.".into()],
        figures,
    }
}

/// CNode deletion against the slots it holds (Figure 4.19).
fn sweep(rows: &[Row], at: u32) -> Section {
    let mut lines = Vec::new();
    for (dashed, name) in [(false, "median"), (true, "p90")] {
        let points = CNODE_SLOTS
            .iter()
            .filter_map(|(slots, case)| {
                let r = rows
                    .iter()
                    .find(|r| r.op == "delete-cnode" && r.case == *case && r.caps == at)?;
                Some((*slots as f64, if dashed { r.p90 } else { r.median }))
            })
            .collect();
        lines.push(Line {
            name: name.into(),
            color: chart::color(0),
            points,
            dashed,
        });
    }
    let axes = Axes {
        x: "occupied slots",
        y: "cycles",
        log_y: false,
    };
    Section {
        title: "Deleting a CNode against its occupied slots".into(),
        notes: vec![format!("The last copy of an L2 CNode (256 slots) with 1 to 256 slots holding RAM capabilities, at {at} capabilities per node; the thesis (Figure 4.19): about 50 kcycles for a few slots, 1.7 Mcycles for 256.")],
        figures: vec![Figure {
            title: "delete-cnode: latency against occupied slots".into(),
            body: Body::Chart(chart::lines(&axes, &lines, &[])),
            caption: "Median (solid) and 90th percentile (dashed) in TSC cycles.".into(),
        }],
    }
}

/// Local work, messages and waiting of every case at size `at`, as
/// stacked bars (single-node and cross-node cases apart: their scales
/// differ a hundredfold), and every figure in a table.
fn breakdown(rows: &[Row], at: u32) -> Section {
    let here: Vec<&Row> = rows
        .iter()
        .filter(|r| r.caps == at && !in_sweep_only(&r.op, &r.case))
        .collect();
    let bars = |remote: bool| {
        let of: Vec<&&Row> = here
            .iter()
            .filter(|r| (r.round_trips > 0) == remote)
            .collect();
        let names: Vec<String> = of.iter().map(|r| label(&r.op, &r.case)).collect();
        let parts: [(&str, Pick); 3] = [
            ("local", |r| r.breakdown.local),
            ("messages", |r| r.breakdown.messages),
            ("waiting", |r| r.breakdown.waiting),
        ];
        let stacks: Vec<Stack> = parts
            .iter()
            .enumerate()
            .map(|(i, (name, f))| Stack {
                name: name.to_string(),
                color: chart::color(i),
                values: vec![of.iter().map(|r| f(r)).collect()],
            })
            .collect();
        let axes = Axes {
            x: "operation",
            y: "cycles (medians)",
            log_y: false,
        };
        let kind = if remote { "cross-node" } else { "single-node" };
        Figure {
            title: format!("breakdown at {at} capabilities: {kind} cases"),
            body: Body::Chart(chart::stacked_bars(&axes, &names, &[format!("{at} capabilities")], &stacks, false)),
            caption: "The median of each part: time inside Node::step on any node for the operation (local), its request and messages on channels (messages), and the rest (waiting).".into(),
        }
    };
    let head = [
        "operation",
        "median",
        "p90",
        "local",
        "messages",
        "waiting",
        "messages sent",
        "round trip",
        "thesis",
        "figure",
    ]
    .map(Cell::new)
    .to_vec();
    let table = here
        .iter()
        .map(|r| {
            let n = |v: f64| Cell::new(format!("{v:.0}"));
            let thesis = |t: &str| Cell {
                reference: true,
                ..Cell::new(if t.is_empty() { "-" } else { t })
            };
            vec![
                Cell::new(label(&r.op, &r.case)),
                n(r.median),
                n(r.p90),
                n(r.breakdown.local),
                n(r.breakdown.messages),
                n(r.breakdown.waiting),
                n(r.messages),
                n(r.round_trip),
                thesis(&r.thesis),
                thesis(&r.figure),
            ]
        })
        .collect();
    let mut figures = vec![bars(false)];
    if here.iter().any(|r| r.round_trips > 0) {
        figures.push(bars(true));
    }
    figures.push(Figure {
        title: format!("every case at {at} capabilities"),
        body: Body::Table(Table { head, rows: table }),
        caption: "TSC cycles; the thesis's figure at 4096 capabilities, or its range over database sizes, in grey.".into(),
    });
    Section {
        title: format!("Breakdown at {at} capabilities per node"),
        notes: Vec::new(),
        figures,
    }
}
