//! `retype bench mm`'s page: nanoseconds per request for each policy and
//! number of slabs, as grouped bars and a table.

use super::chart::{self, Axes, Group};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::study::spec::PolicySpec;

/// The part: `per_op[k][c]` is policy `k`'s ns per request at `counts[c]`
/// slabs, over `requests` requests of the generator's `seed`.
pub fn part(
    policies: &[PolicySpec],
    counts: &[usize],
    per_op: Vec<Vec<f64>>,
    requests: usize,
    seed: u64,
) -> Part {
    let groups: Vec<Group> = policies
        .iter()
        .zip(per_op)
        .enumerate()
        .map(|(k, (p, values))| Group {
            name: p.to_string(),
            color: chart::color(k),
            values,
        })
        .collect();
    let labels: Vec<String> = counts.iter().map(|n| format!("{n} slabs")).collect();
    let figure = Figure {
        title: "time per request".into(),
        body: Body::Chart(chart::grouped_bars(&Axes { x: "slabs", y: "ns per request", log_y: false }, &labels, &groups)),
        caption: format!("{} requests of seed 000's uniform generator (seed {}, 52 % frees) per policy and number of slabs.", requests, seed),
    };
    let mut head = vec![Cell::new("policy (ns per request)")];
    head.extend(labels.iter().map(|l| Cell::new(l.clone())));
    let rows = groups
        .iter()
        .map(|g| {
            let mut row = vec![Cell::new(g.name.clone())];
            row.extend(g.values.iter().map(|v| Cell::new(format!("{v:.1}"))));
            row
        })
        .collect();
    Part {
        id: "mm-cost".into(),
        title: "Memory-manager request cost".into(),
        summary: vec![Summary::Table(Table { head, rows })],
        sections: vec![Section {
            title: "Time per request".into(),
            notes: Vec::new(),
            figures: vec![figure],
        }],
    }
}
