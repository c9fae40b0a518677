//! Seed 000's tables: one column per policy, the thesis's published figures
//! beside ours where it has them; their rows, and the tables as text for
//! the terminal (the report draws the same rows in HTML).

use std::fmt::Write;

use super::logcheck::Agreement;
use super::summary::{kib, Summary};
use super::thesis::Published;

/// One column of a table.
pub struct Column {
    pub label: String,
    pub ours: Option<Summary>,
    pub published: Option<Published>,
}

/// The label of a column that repeats the run before it counted as its log
/// counts ([`retype_core::mm::Accounting::LOGS`]).
pub const LOGS_COUNT: &str = "(logs' count)";

/// How to fill one row's cell of a column (`None`: it has no figure).
pub type Cell = Box<dyn Fn(&Column) -> Option<String>>;

fn ours(f: impl Fn(&Summary) -> String + 'static) -> Cell {
    Box::new(move |c| c.ours.as_ref().map(&f))
}

fn both(
    f: impl Fn(&Summary) -> String + 'static,
    g: impl Fn(&Published) -> Option<String> + 'static,
) -> Cell {
    Box::new(move |c| {
        c.ours
            .as_ref()
            .map(&f)
            .or_else(|| c.published.as_ref().and_then(&g))
    })
}

fn frag(peak: bool, i: usize) -> Cell {
    both(
        move |s| {
            let v = match (peak, i) {
                (true, 0) => s.peak_frag_watermark as f64,
                (true, 1) => s.peak_frag_alignment as f64,
                (true, _) => s.peak_frag_total as f64,
                (false, 0) => s.avg_frag_watermark,
                (false, 1) => s.avg_frag_alignment,
                (false, _) => s.avg_frag_total,
            };
            format!("{:.2}", kib(v))
        },
        move |p| Some(format!("{:.2}", if peak { p.peak[i] } else { p.avg[i] })),
    )
}

/// The rows of a table: a name, and how to fill a column (none for a heading).
pub fn rows() -> Vec<(&'static str, Option<Cell>)> {
    vec![
        ("peak fragmentation (KiB)", None),
        ("  watermarking", Some(frag(true, 0))),
        ("  alignment", Some(frag(true, 1))),
        ("  total", Some(frag(true, 2))),
        ("average fragmentation (KiB)", None),
        ("  watermarking", Some(frag(false, 0))),
        ("  alignment", Some(frag(false, 1))),
        ("  total", Some(frag(false, 2))),
        (
            "slab resets",
            Some(both(
                |s| s.slab_resets.to_string(),
                |p| p.resets.map(|r| r.0.to_string()),
            )),
        ),
        (
            "  per 100 allocations",
            Some(both(
                |s| format!("{:.2}", s.resets_per_100_allocs()),
                |p| p.resets.map(|r| format!("{:.2}", r.1)),
            )),
        ),
        ("OOMs", Some(ours(|s| s.ooms.to_string()))),
        (
            "failed retypes",
            Some(ours(|s| s.failed_retypes.to_string())),
        ),
        (
            "peak bytes in use",
            Some(ours(|s| s.peak_bytes_in_use.to_string())),
        ),
        ("requests", Some(ours(|s| s.ops.to_string()))),
        (
            "mean time per op (ns)",
            Some(ours(|s| format!("{:.0}", s.mean_ns()))),
        ),
    ]
}

/// Renders a table of `columns`, with a title line.
pub fn render(title: &str, columns: &[Column]) -> String {
    let rows = rows();
    let width = columns
        .iter()
        .map(|c| c.label.len())
        .max()
        .unwrap_or(0)
        .max(9)
        + 2;
    let mut out = String::new();
    writeln!(out, "{title}").unwrap();
    write!(out, "{:30}", "").unwrap();
    for c in columns {
        write!(out, "{:>width$}", c.label).unwrap();
    }
    out.push('\n');
    for (name, cell) in &rows {
        write!(out, "{name:30}").unwrap();
        if let Some(cell) = cell {
            for c in columns {
                write!(out, "{:>width$}", cell(c).unwrap_or_else(|| "-".into())).unwrap();
            }
        }
        out.push('\n');
    }
    out
}

/// Differences from the thesis above this fraction of its figure are marked.
pub const NOTABLE: f64 = 0.05;

/// One line on how well a run reproduces its log.
pub fn agreement_line(label: &str, a: &Agreement) -> String {
    let pct = |n: usize| 100.0 * n as f64 / a.ops.max(1) as f64;
    let first = a
        .first_difference
        .map_or("none".to_string(), |i| format!("op {i}"));
    format!(
        "  {label}: {:.1} % of {} ops match the log exactly (bytes in use {:.1} %, slab resets {:.1} %, watermarking {:.1} %, alignment {:.1} %, failed retypes {:.1} %, OOMs {:.1} %); first difference: {first}",
        100.0 * a.exact_fraction(),
        a.ops,
        pct(a.bytes_in_use),
        pct(a.slab_resets),
        pct(a.frag_watermark),
        pct(a.frag_alignment),
        pct(a.failed_retypes),
        pct(a.ooms),
    )
}
