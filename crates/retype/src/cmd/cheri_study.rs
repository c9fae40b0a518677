//! `retype study cheri`: seed 004's capability half (see `crate::cheri_study`):
//! exact bounds per workload and size range in each CHERI format, the
//! seed's huge-page regions, retype-malloc's layout on Morello.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args as ClapArgs;
use retype_core::heap::cheri::{Rounding, SizeRange};
use serde_json::json;

use crate::cheri_study::workload::{self, Workload};
use crate::cheri_study::{self, Results, PAGES};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Traces to size: malloc-lab `.rep` files or recordings [default: the
    /// malloc-lab traces shipped in traces/malloclab/]
    traces: Vec<PathBuf>,
    /// Leave out seed 004's benchmark patterns
    #[arg(long)]
    no_patterns: bool,
    /// Where the shipped traces are (default: traces/ of the repository)
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Every size class of retype-malloc, not only those that pad
    #[arg(long)]
    verbose: bool,
    /// One JSON object a line (`"table"` says which) instead of tables
    #[arg(long)]
    json: bool,
}

/// The shipped malloc-lab traces, by name.
fn shipped(data: Option<PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    let dir = crate::study::data::data_dir(data.as_deref())?.join("malloclab");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.extension().is_some_and(|e| e == "rep"));
    paths.sort();
    Ok(paths)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let paths = if args.traces.is_empty() {
        shipped(args.data)?
    } else {
        args.traces
    };
    let mut workloads = paths
        .iter()
        .map(|p| Workload::from_trace(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !args.no_patterns {
        workloads.extend(workload::seed004_patterns());
    }
    let results = cheri_study::run(&workloads)?;
    if args.json {
        print_json(&results)
    } else {
        print_tables(&results, args.verbose)
    }
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", 100.0 * part as f64 / whole as f64)
    }
}

/// Padding as a share of the bytes requested.
fn padding_share(r: &Rounding) -> String {
    if r.requested == 0 {
        "-".into()
    } else {
        format!("{:.2} %", 100.0 * r.padding as f64 / r.requested as f64)
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 10 << 30 => format!("{} GiB", n >> 30),
        n if n >= 10 << 20 => format!("{} MiB", n >> 20),
        n if n >= 10 << 10 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// `2MiB`, `1GiB`.
fn page_label(page: u64) -> String {
    if page >= 1 << 30 {
        format!("{}GiB", page >> 30)
    } else {
        format!("{}MiB", page >> 20)
    }
}

fn print_tables(r: &Results, verbose: bool) -> anyhow::Result<()> {
    let formats: Vec<_> = r.workloads[0].formats.iter().map(|f| f.format).collect();
    outln!("Seed 004 in capability terms: each malloc and realloc of a workload given exact bounds (its length rounded up to CRRL, its base aligned with CRAM) in each CHERI format. Computed, not measured: nothing on x86 enforces bounds.");
    outln!("\nExact without padding (share of requests), and padding (share of bytes requested)");
    out!("{:<16} {:>10}", "workload", "requests");
    for f in &formats {
        out!(" {:>10} {:>9}", format!("{f} exact"), "padding");
    }
    outln!();
    for w in &r.workloads {
        out!("{:<16} {:>10}", w.name, w.requests);
        for f in &w.formats {
            let t = f.padding.total();
            out!(
                " {:>10} {:>9}",
                share(t.exact(), t.requests),
                padding_share(&t)
            );
        }
        outln!();
    }
    outln!("\nBy size range, every workload together: requests, exact without padding, padding");
    out!("{:<13} {:>10}", "size", "requests");
    for f in &formats {
        out!(" {:>10} {:>9}", format!("{f} exact"), "padding");
    }
    outln!();
    for range in SizeRange::all() {
        let per_format: Vec<Rounding> = (0..formats.len())
            .map(|i| {
                let mut sum = Rounding::default();
                for w in &r.workloads {
                    sum.add(&w.formats[i].padding.by_range[range.index()]);
                }
                sum
            })
            .collect();
        if per_format[0].requests == 0 {
            continue;
        }
        out!("{:<13} {:>10}", range.label(), per_format[0].requests);
        for t in &per_format {
            out!(
                " {:>10} {:>9}",
                share(t.exact(), t.requests),
                padding_share(t)
            );
        }
        outln!();
    }
    outln!("\nSeed 004's design: a region capability per huge page, each request derived from it by set-bounds (a bump pointer, nothing freed, as the seed's allocator); bytes of the pages taken: requested, padding, alignment skipped (to malloc's 16 B and to CRAM), page tails left");
    outln!(
        "{:<16} {:>5} {:<8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "workload",
        "page",
        "format",
        "regions",
        "footprint",
        "requested",
        "padding",
        "alignment",
        "tails",
        "unplaced"
    );
    for w in &r.workloads {
        for (p, page) in PAGES.iter().enumerate() {
            for f in &w.formats {
                let g = &f.pages[p];
                outln!(
                    "{:<16} {:>5} {:<8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
                    w.name,
                    page_label(*page),
                    f.format.to_string(),
                    g.regions,
                    bytes(g.footprint),
                    bytes(g.requested),
                    bytes(g.padding),
                    bytes(g.alignment),
                    bytes(g.tails),
                    g.unplaced
                );
            }
        }
    }
    outln!("\nretype-malloc's size classes (computed from their description in crates/retype/src/cheri_study/size_classes.rs; the CLI does not link retype-malloc): classes whose blocks, carved back to back, all have exact bounds");
    for (format, classes) in &r.classes {
        let exact = classes.iter().filter(|c| c.exact).count();
        outln!(
            "{:<8} {exact} of {} classes exact",
            format.to_string(),
            classes.len()
        );
        for c in classes.iter().filter(|c| verbose || !c.exact) {
            outln!(
                "         {:>7} B -> {:>7} B (+{} B, {}){}",
                c.block,
                c.exact_block,
                c.padding,
                share(c.padding, c.block),
                if c.area_realigned {
                    ", page areas aligned further"
                } else {
                    ""
                }
            );
        }
    }
    outln!("\nretype-malloc's large blocks on Morello: padding, the alignment exact bounds need against the layout's, and the mapping as it is and with exact bounds");
    outln!(
        "{:>12} {:>9} {:>10} {:>10} {:>12} {:>12} {:>9}",
        "size",
        "padding",
        "needs",
        "layout",
        "mapping",
        "exact",
        "extra"
    );
    for l in &r.large {
        outln!(
            "{:>12} {:>9} {:>10} {:>10} {:>12} {:>12} {:>9}",
            l.size,
            l.padding,
            l.needs_align,
            l.layout_align,
            l.mapping,
            l.exact_mapping,
            l.exact_mapping - l.mapping
        );
    }
    Ok(())
}

fn rounding(r: &Rounding) -> serde_json::Value {
    json!({
        "requests": r.requests,
        "exact": r.exact(),
        "rounded": r.rounded,
        "realigned": r.realigned,
        "requested_bytes": r.requested,
        "padding_bytes": r.padding,
    })
}

fn print_json(r: &Results) -> anyhow::Result<()> {
    for w in &r.workloads {
        for f in &w.formats {
            let ranges: Vec<_> = SizeRange::all()
                .map(|s| {
                    let mut v = rounding(&f.padding.by_range[s.index()]);
                    v["range"] = json!(s.label());
                    v["from"] = json!(s.lower());
                    v
                })
                .collect();
            let pages: Vec<_> = PAGES
                .iter()
                .zip(&f.pages)
                .map(|(page, g)| {
                    let mut v = serde_json::to_value(g).expect("plain figures");
                    v["page"] = json!(page);
                    v
                })
                .collect();
            let line = json!({
                "table": "workload",
                "workload": w.name,
                "source": w.source,
                "format": f.format.name(),
                "total": rounding(&f.padding.total()),
                "unaddressable": f.unaddressable,
                "ranges": ranges,
                "pages": pages,
            });
            outln!("{line}");
        }
    }
    for (format, classes) in &r.classes {
        for c in classes {
            let mut v = serde_json::to_value(c)?;
            v["table"] = json!("class");
            v["format"] = json!(format.name());
            outln!("{v}");
        }
    }
    for l in &r.large {
        let mut v = serde_json::to_value(l)?;
        v["table"] = json!("large");
        v["format"] = json!("morello");
        outln!("{v}");
    }
    Ok(())
}
