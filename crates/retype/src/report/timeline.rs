//! A recording's live heap bytes over time, as `retype trace timeline`
//! gives them: a bar per moment, its top sites stacked in bands (hovering
//! one names its site), and the table of the bands.

use super::chart::{self, Axes, Stack};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::sites::timeline::SiteTimeline;

/// `ns` as milliseconds, for the moments' labels.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The part of recording `name` whose timeline is `t`.
pub fn part(name: &str, t: &SiteTimeline) -> Part {
    let categories: Vec<String> = t.moments.iter().map(|m| ms(m.time_ns)).collect();
    let bands: Vec<Stack> = t
        .bands
        .iter()
        .enumerate()
        .map(|(i, b)| Stack {
            name: b.site.clone(),
            color: chart::color(i),
            values: vec![t.moments.iter().map(|m| m.bands[i] as f64).collect()],
        })
        .collect();
    let axes = Axes {
        x: "time after the first event",
        y: "live heap bytes",
        log_y: false,
    };
    let peak = t.moments.iter().map(|m| m.live_bytes).max().unwrap_or(0);
    let table = Table {
        head: ["site", "its highest live bytes"].map(Cell::new).to_vec(),
        rows: t
            .bands
            .iter()
            .map(|b| {
                vec![
                    Cell::new(b.site.clone()),
                    Cell::new(b.peak_bytes.to_string()),
                ]
            })
            .collect(),
    };
    Part {
        id: "timeline".into(),
        title: format!("Live heap bytes over time: {name}"),
        summary: vec![Summary::Line(format!(
            "{name}: at most {peak} live heap bytes; {} sites, the top {} in their own bands.",
            t.sites_total,
            t.bands.len().min(t.sites_total)
        ))],
        sections: vec![Section {
            title: name.to_string(),
            notes: vec!["Each bar is one moment: of each span of time, the one with the most live bytes and the last. Its bands are the sites' live bytes then; they add up to the process's.".into()],
            figures: vec![
                Figure {
                    title: "Live heap bytes per site".into(),
                    body: Body::Chart(chart::stacked_bars(
                        &axes,
                        &categories,
                        &["live bytes".to_string()],
                        &bands,
                        false,
                    )),
                    caption: "Hover a band for its site and bytes; click a legend entry to hide a site.".into(),
                },
                Figure {
                    title: "The bands".into(),
                    body: Body::Table(table),
                    caption: "Sites ranked by their own highest live bytes in the window.".into(),
                },
            ],
        }],
    }
}
