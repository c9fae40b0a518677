//! `retype trace`: `info` and `convert`, and for recordings with call
//! stacks `sites`, `leaks`, `diff` (printed by [`sites`]), `flamegraph` and
//! `export` (of [`crate::sites`]).

pub mod sites;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Subcommand;
use retype_trace::format::{self, Format};
use retype_trace::summary::{Log2Histogram, Summary};
use retype_trace::{rep, Op, Trace};
use serde_json::json;

use crate::sites::export::{self, Weight};
use crate::sites::{self as analysis, Analysis, By};
use crate::trace_info;

#[derive(Subcommand)]
pub enum Command {
    /// Ops by kind, threads, size histogram, lifetimes, peak live bytes and when
    Info {
        /// A trace: .rtr, malloc-lab .rep, wee_alloc .trace, valgrind --trace-malloc output, or CSV
        file: PathBuf,
        /// Input format (rtr, rep, wee_alloc, valgrind, csv); detected when left out
        #[arg(long, value_parser = Format::from_name)]
        from: Option<Format>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace between formats (output format from --to or the output's extension)
    Convert {
        /// The trace to read: .rtr, .rep, wee_alloc .trace, valgrind output or CSV
        input: PathBuf,
        /// The file to write: .rtr, .rep or .csv
        output: PathBuf,
        /// Input format (rtr, rep, wee_alloc, valgrind, csv); detected when left out
        #[arg(long, value_parser = Format::from_name)]
        from: Option<Format>,
        /// Output format (rtr, rep, csv); from the output's extension when left out
        #[arg(long, value_parser = Format::from_name)]
        to: Option<Format>,
        /// Print what was converted as JSON
        #[arg(long)]
        json: bool,
    },
    /// Allocation sites of a recording, ranked by bytes allocated, with calls,
    /// bytes live at the trace's peak and bytes leaked at exit
    Sites {
        /// A trace recorded with call stacks (`retype record`)
        file: PathBuf,
        /// Group stacks by the function that called the allocator, its source line, or whole stack
        #[arg(long, value_enum, default_value_t = By::Function)]
        by: By,
        /// Show the first N sites (text: 20 by default; 0: all)
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// Also write an HTML page with the flame graph and the sites table
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
    },
    /// Allocations never freed, grouped by stack (or --by function|line), with counts and bytes
    Leaks {
        /// A trace recorded with call stacks
        file: PathBuf,
        /// Group by whole stack, the calling function, or its source line
        #[arg(long, value_enum, default_value_t = By::Stack)]
        by: By,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Per-site change between two recordings (bytes allocated, calls, peak, leaks)
    Diff {
        /// The first recording
        a: PathBuf,
        /// The second recording
        b: PathBuf,
        /// Group stacks by function, source line or whole stack
        #[arg(long, value_enum, default_value_t = By::Function)]
        by: By,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// A flame graph (SVG) of the bytes each stack allocated, held at the peak, or leaked
    Flamegraph {
        /// A trace recorded with call stacks
        file: PathBuf,
        /// The SVG file to write
        #[arg(short, long)]
        output: PathBuf,
        /// What the widths measure
        #[arg(long, value_enum, default_value_t = Weight::Allocated)]
        weight: Weight,
    },
    /// Export the stacks as collapsed stacks (inferno, speedscope, flamegraph.pl)
    /// or pprof's gzipped profile (pprof, its web UI, speedscope)
    Export {
        /// A trace recorded with call stacks
        file: PathBuf,
        /// The file to write: .folded/.collapsed/.txt, or .pb.gz/.pprof
        #[arg(short, long)]
        output: PathBuf,
        /// collapsed or pprof; from the output's extension when left out
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// collapsed: what the counts measure; pprof: the default sample type
        #[arg(long, value_enum, default_value_t = Weight::Allocated)]
        weight: Weight,
    },
}

/// What `trace export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One line per stack: frames outermost first, separated by `;`, then the count
    Collapsed,
    /// pprof's profile.proto, gzipped
    Pprof,
}

impl ExportFormat {
    fn from_extension(path: &Path) -> Option<ExportFormat> {
        let name = path.file_name()?.to_str()?;
        if [".pb.gz", ".pprof", ".pb"]
            .iter()
            .any(|x| name.ends_with(x))
        {
            return Some(ExportFormat::Pprof);
        }
        [".folded", ".collapsed", ".txt"]
            .iter()
            .any(|x| name.ends_with(x))
            .then_some(ExportFormat::Collapsed)
    }
}

/// A trace with call stacks and its analysis, or an error saying why not.
fn analysed(file: &Path) -> Result<(Trace, Analysis)> {
    let trace = format::load(file, None)?;
    let a = Analysis::of(&trace);
    analysis::require_stacks(file, &a)?;
    Ok((trace, a))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Sites {
            file,
            by,
            top,
            json,
            report,
        } => {
            let (_, a) = analysed(&file)?;
            let top = top.or((!json).then_some(20)).filter(|&n| n > 0);
            out!("{}", sites::sites(&file, &a, by, top, json));
            if let Some(path) = report {
                let name = file.display().to_string();
                let page = crate::report::Page {
                    title: "retype: allocation sites",
                    intro: "Where a recorded program's memory goes: the flame graph of the bytes each call stack allocated, and the sites that allocated most.",
                    parts: vec![crate::report::sites::part(&[(name, a)])],
                };
                write_file(&path, page.html().as_bytes())?;
                eprintln!("retype: wrote {}", path.display());
            }
            Ok(())
        }
        Command::Leaks { file, by, json } => {
            let (_, a) = analysed(&file)?;
            out!("{}", sites::leaks(&file, &a, by, json));
            Ok(())
        }
        Command::Diff { a, b, by, json } => {
            let (_, x) = analysed(&a)?;
            let (_, y) = analysed(&b)?;
            out!("{}", sites::diff([&a, &b], &x, &y, by, json));
            Ok(())
        }
        Command::Flamegraph {
            file,
            output,
            weight,
        } => {
            let (_, a) = analysed(&file)?;
            let mut svg = Vec::new();
            export::flamegraph(&file.display().to_string(), &a, weight, &mut svg)?;
            write_file(&output, &svg)?;
            eprintln!("retype: wrote {} ({weight})", output.display());
            Ok(())
        }
        Command::Export {
            file,
            output,
            format,
            weight,
        } => {
            let format = format.or_else(|| ExportFormat::from_extension(&output)).with_context(|| {
                format!("{}: cannot tell the format from its name; give --format collapsed or pprof", output.display())
            })?;
            let (trace, a) = analysed(&file)?;
            let bytes = match format {
                ExportFormat::Collapsed => {
                    let mut text = export::collapsed(&a, weight).join("\n");
                    text.push('\n');
                    text.into_bytes()
                }
                ExportFormat::Pprof => export::pprof(&trace, &a, weight),
            };
            write_file(&output, &bytes)?;
            eprintln!("retype: wrote {}", output.display());
            Ok(())
        }
        Command::Info { file, from, json } => {
            let trace = format::load(&file, from)?;
            let s = Summary::of(&trace);
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&trace_info::json(&file, &trace, &s))?
                );
            } else {
                out!("{}", info_text(&file, &trace, &s));
            }
            Ok(())
        }
        Command::Convert {
            input,
            output,
            from,
            to,
            json,
        } => {
            let trace = format::load(&input, from)?;
            let to = match to {
                Some(t) => t,
                None => Format::from_extension(&output).ok_or_else(|| {
                    anyhow::anyhow!("{}: cannot tell the output format from its name; give --to (rtr, rep, csv)", output.display())
                })?,
            };
            format::save(&trace, &output, to)?;
            let dropped = (to == Format::Rep).then(|| {
                let (mut ops, dropped) = rep::to_malloclab(&trace);
                (dropped, rep::clamp_alignments(&mut ops))
            });
            if json {
                let mut v = json!({"input": input, "output": output, "events": trace.events.len(), "threads": trace.threads.len()});
                if let Some((d, alignments)) = &dropped {
                    v["dropped"] = json!({"free_null": d.free_null, "failed": d.failed, "unknown_pointers": d.unknown_pointers, "alignments": alignments});
                }
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                outln!(
                    "{} -> {}: {} events",
                    input.display(),
                    output.display(),
                    trace.events.len()
                );
                if let Some((d, alignments)) = dropped {
                    outln!(
                        "not expressible in .rep: {} free(NULL), {} failed calls, {} frees of unknown blocks dropped; {alignments} alignments lost",
                        d.free_null, d.failed, d.unknown_pointers
                    );
                }
            }
            Ok(())
        }
    }
}

/// `1234567` as `1.23 ms`.
fn ns(v: u64) -> String {
    match v {
        0..=9_999 => format!("{v} ns"),
        10_000..=9_999_999 => format!("{:.2} µs", v as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.2} ms", v as f64 / 1e6),
        _ => format!("{:.2} s", v as f64 / 1e9),
    }
}

fn histogram_text(out: &mut String, title: &str, h: &Log2Histogram, unit: fn(u64) -> String) {
    use std::fmt::Write;
    let total = h.total().max(1);
    let _ = writeln!(out, "{title}:");
    for (le, count) in h.nonempty() {
        let bar = "#".repeat(((count * 40).div_ceil(total)) as usize);
        let _ = writeln!(out, "  <= {:>12}  {count:>10}  {bar}", unit(le as u64));
    }
}

/// The recording windows of a trace whose recording was started and stopped.
fn window_text(o: &mut String, t: &Trace, windows: &[retype_trace::window::Window]) {
    use std::fmt::Write;
    if windows.is_empty() {
        return;
    }
    let opened: u64 = t
        .meta_value("start_ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(windows[0].start_ns);
    let plural = if windows.len() == 1 { "" } else { "s" };
    let _ = writeln!(
        o,
        "  recorded in {} window{plural} (times after the trace opened; nothing was recorded outside them):",
        windows.len()
    );
    for (k, w) in windows.iter().enumerate() {
        let stop = match (w.stop_ns, &w.closed_by) {
            (Some(at), Some(by)) => format!("{} ({by})", ns(at.saturating_sub(opened))),
            _ => "the end of the trace".to_string(),
        };
        let _ = writeln!(
            o,
            "    window {}: {} ({}) to {stop}: {} events",
            k + 1,
            ns(w.start_ns.saturating_sub(opened)),
            w.opened_by,
            w.events
        );
    }
}

fn info_text(file: &std::path::Path, t: &Trace, s: &Summary) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    // Imported traces have no clock: their "time" is the event index.
    let clocked = t.meta_value("clock").is_some();
    let span = if clocked {
        format!("over {}", ns(s.duration_ns))
    } else {
        "no clock (times are event numbers)".to_string()
    };
    let _ = writeln!(
        o,
        "{}: {} events, {} threads, {span}",
        file.display(),
        s.events,
        s.threads.len()
    );
    if let Some(c) = t.cut_short {
        let (at, n, last) = (c.at_byte, c.events, ns(s.duration_ns));
        let _ = writeln!(o, "  cut short: the file ends before its end record; it reads to byte {at}, {n} events, the last {last} after the first");
    }
    for key in ["source", "allocator"] {
        if let Some(v) = t.meta_value(key) {
            let _ = writeln!(o, "  {key}: {v}");
        }
    }
    let images: Vec<&str> = t
        .meta
        .iter()
        .filter(|(k, _)| k == "cmdline")
        .map(|(_, v)| v.as_str())
        .collect();
    if images.len() > 1 {
        let _ = writeln!(
            o,
            "  {} program images (exec), {} segments with events:",
            images.len(),
            s.segments
        );
    }
    for cmd in images {
        let _ = writeln!(o, "  cmdline: {cmd}");
    }
    let windows = retype_trace::window::windows(t);
    window_text(&mut o, t, &windows);
    let ops: Vec<String> = Op::ALL
        .iter()
        .filter_map(|op| s.ops.get(op).map(|n| format!("{} {n}", op.name())))
        .collect();
    let _ = writeln!(o, "ops: {}", ops.join(", "));
    let when = if clocked {
        format!(" ({} after the first event)", ns(s.peak_time_ns))
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "peak live: {} bytes in {} blocks, at event {}{when}",
        s.peak_live_bytes, s.peak_live_blocks, s.peak_event
    );
    // Recording that stopped before the program ended: what was live then is no leak.
    let ran_on = windows
        .last()
        .is_some_and(|w| w.closed_by.as_deref().is_some_and(|c| c != "exit"));
    let _ = writeln!(
        o,
        "live at end: {} bytes in {} blocks{}",
        s.live_at_end_bytes,
        s.live_at_end_blocks,
        if ran_on {
            " (when recording stopped; the program ran on)"
        } else {
            ""
        }
    );
    let _ = writeln!(o, "bytes requested: {}", s.bytes_requested);
    if !t.stacks.is_empty() {
        let with = t.events.iter().filter(|e| e.stack != 0).count();
        let _ = writeln!(
            o,
            "call stacks: {} distinct, on {with} of {} events; {} loaded objects",
            t.stacks.len(),
            s.events,
            t.modules.len()
        );
    }
    let _ = writeln!(
        o,
        "realloc: {} moved, {} in place",
        s.reallocs_moved, s.reallocs_in_place
    );
    let _ = writeln!(
        o,
        "failed allocations: {}; free(NULL): {}; frees/reallocs of blocks not allocated in the trace: {}",
        s.failed_allocations, s.free_null, s.unknown_pointers
    );
    if !windows.is_empty() && s.unknown_pointers > 0 {
        let _ = writeln!(
            o,
            "  (blocks allocated while nothing was recorded: their frees and reallocs are these, their bytes never counted)"
        );
    }
    if s.latency_total_ns > 0 {
        let _ = writeln!(
            o,
            "time inside the allocator: {} ({} per call on average)",
            ns(s.latency_total_ns),
            ns(s.latency_total_ns / s.events.max(1))
        );
        if t.meta_value("descheduling") == Some("rseq") {
            let _ = writeln!(
                o,
                "longest call: {}; longest whose thread ran throughout: {}; calls during which the thread was descheduled: {}",
                ns(s.latency_max_ns),
                ns(s.latency_max_running_ns),
                s.descheduled
            );
        }
    }
    histogram_text(&mut o, "requested sizes (bytes)", &s.sizes, |v| {
        v.to_string()
    });
    histogram_text(&mut o, "lifetimes of freed blocks", &s.lifetimes_ns, ns);
    let _ = writeln!(o, "threads:");
    let _ = writeln!(
        o,
        "  {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "tid", "events", "lifetime", "user", "system", "wait", "vol.cs", "invol.cs"
    );
    for th in &s.threads {
        match th.summary {
            Some(m) => {
                let _ = writeln!(
                    o,
                    "  {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
                    th.thread,
                    th.events,
                    ns(m.lifetime_ns()),
                    ns(m.user_ns),
                    ns(m.system_ns),
                    ns(m.wait_ns()),
                    m.voluntary_switches,
                    m.involuntary_switches
                );
            }
            None => {
                let _ = writeln!(o, "  {:>8} {:>10}", th.thread, th.events);
            }
        }
    }
    o
}
