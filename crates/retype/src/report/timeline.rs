//! A recording's live heap bytes over time, as `retype trace timeline`
//! gives them: a bar per moment, its top sites stacked in bands (hovering
//! one names its site), and the table of the bands; beside them, when the
//! recording sampled them, the process's RSS and the bytes it mapped itself.

use retype_trace::timeline::Series;

use super::chart::{self, Axes, Line, Stack};
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
    let mut figures = vec![
        Figure {
            title: "Live heap bytes per site".into(),
            body: Body::Chart(chart::stacked_bars(
                &axes,
                &categories,
                &["live bytes".to_string()],
                &bands,
                false,
            )),
            caption: "Hover a band for its site and bytes; click a legend entry to hide a site."
                .into(),
        },
        Figure {
            title: "The bands".into(),
            body: Body::Table(table),
            caption: "Sites ranked by their own highest live bytes in the window.".into(),
        },
    ];
    if !t.rss.0.is_empty() || !t.mapped.0.is_empty() {
        figures.insert(1, beside_rss(t));
    }
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
            figures,
        }],
    }
}

/// Live heap bytes, RSS and mapped bytes as three lines over time (ms).
fn beside_rss(t: &SiteTimeline) -> Figure {
    let at_ms = |s: &Series| -> Vec<(f64, f64)> {
        s.0.iter()
            .map(|&(ns, b)| (ns as f64 / 1e6, b as f64))
            .collect()
    };
    let live = Series(
        t.moments
            .iter()
            .map(|m| (m.time_ns, m.live_bytes))
            .collect(),
    );
    let lines = [
        ("live heap bytes", at_ms(&live), false),
        ("RSS", at_ms(&t.rss), false),
        ("mapped (mmap, brk)", at_ms(&t.mapped), true),
    ]
    .into_iter()
    .enumerate()
    .filter(|(_, (_, points, _))| !points.is_empty())
    .map(|(i, (name, points, dashed))| Line {
        name: name.into(),
        color: chart::color(i),
        points,
        dashed,
    })
    .collect::<Vec<_>>();
    let axes = Axes {
        x: "ms after the first event",
        y: "bytes",
        log_y: false,
    };
    Figure {
        title: "RSS beside live heap bytes".into(),
        body: Body::Chart(chart::lines(&axes, &lines, &[])),
        caption: "RSS as the recorder sampled it (on the program's calls, at its interval); mapped: the bytes the program's own mmap, mremap and brk calls hold.".into(),
    }
}
