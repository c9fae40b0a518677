//! `retype trace`: `info` and `convert`, and for recordings with call
//! stacks `sites`, `leaks`, `diff` (printed by [`sites`]), `timeline`
//! (printed by [`timeline`]), `flamegraph` and `export` (of
//! [`crate::sites`]), each in a time window when `--from`/`--to` give one,
//! or in a phase the program marked (`--phase`).

pub mod sites;
pub mod timeline;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use retype_trace::format::{self, Format};
use retype_trace::phase::{self, Phase};
use retype_trace::requests::from_events;
use retype_trace::sites::{per_stack, SiteStats};
use retype_trace::summary::{Log2Histogram, Summary};
use retype_trace::window::{Bound, Window};
use retype_trace::{malloclab, Op, Trace};
use serde_json::json;

use crate::sites::export::{self, Weight};
use crate::sites::gate::{Gate, Scope, Threshold};
use crate::sites::{self as analysis, massif, Analysis, By};
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
        /// Also give the figures of the phase the program marked with this name
        #[arg(long, value_name = "NAME")]
        phase: Option<String>,
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
        /// Rank the sites by this figure (temporary: also show each site's temporaries)
        #[arg(long, value_enum, default_value_t = Weight::Allocated)]
        weight: Weight,
        #[command(flatten)]
        window: WindowArgs,
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
        /// In a window: the blocks allocated in it and still live at its end
        #[command(flatten)]
        window: WindowArgs,
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
        /// The figure shown in the a and b columns and ranked by
        #[arg(long, value_enum, default_value_t = Weight::Allocated)]
        weight: Weight,
        /// Exit 1 when a site (or the total) grew past this: a share of A's
        /// figure (5%) or bytes (1MB, 64KiB); given twice, past both
        #[arg(long, value_name = "5%|BYTES", value_parser = Threshold::parse)]
        fail_above: Vec<Threshold>,
        /// The figure --fail-above holds
        #[arg(long, value_enum, default_value_t = Weight::Peak, requires = "fail_above")]
        fail_on: Weight,
        /// Whether --fail-above holds every site and the total, or the total only
        #[arg(long, value_enum, default_value_t = Scope::Site, requires = "fail_above")]
        fail_per: Scope,
        /// The window of both recordings
        #[command(flatten)]
        window: WindowArgs,
    },
    /// Live heap bytes over time, for the whole process and its top sites
    Timeline {
        /// A trace recorded with call stacks
        file: PathBuf,
        /// Show the N sites whose live bytes rose highest; the rest as one band
        #[arg(long, value_name = "N", default_value_t = 5)]
        top: usize,
        /// Group stacks by the function that called the allocator, its source line, or whole stack
        #[arg(long, value_enum, default_value_t = By::Function)]
        by: By,
        /// Spans of time to cut the window into; each gives its highest and its last moment
        /// (text: 20 by default, JSON: 500)
        #[arg(long, value_name = "N")]
        spans: Option<usize>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// Also write an HTML page that draws it, a band per site
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        #[command(flatten)]
        window: WindowArgs,
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
        #[command(flatten)]
        window: WindowArgs,
    },
    /// Export the stacks as collapsed stacks (inferno, speedscope, flamegraph.pl),
    /// pprof's gzipped profile (pprof, its web UI, speedscope), or massif's
    /// output (ms_print, massif-visualizer)
    Export {
        /// A trace recorded with call stacks
        file: PathBuf,
        /// The file to write: .folded/.collapsed/.txt, .pb.gz/.pprof, or .massif/massif.out.*
        #[arg(short, long)]
        output: PathBuf,
        /// collapsed, pprof or massif; from the output's name when left out
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// collapsed: what the counts measure; pprof: the default sample type
        #[arg(long, value_enum, default_value_t = Weight::Allocated)]
        weight: Weight,
        #[command(flatten)]
        window: WindowArgs,
    },
}

/// `--from`/`--to` or `--phase`: the part of a recording to analyse.
#[derive(Args, Clone)]
pub struct WindowArgs {
    /// Count only calls from this time on: seconds after the first event (1.5s, 200ms, 40us)
    /// or the start of segment N (seg:N)
    #[arg(long, value_name = "TIME|seg:N", value_parser = Bound::parse)]
    from: Option<Bound>,
    /// Count only calls before this time, or up to the end of segment N (seg:N)
    #[arg(long, value_name = "TIME|seg:N", value_parser = Bound::parse)]
    to: Option<Bound>,
    /// Count only calls in the phase the program marked with this name
    /// (retype_mark; `trace info` lists them)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["from", "to"])]
    phase: Option<String>,
}

impl WindowArgs {
    /// The window in `trace`, read from `file`.
    fn of(&self, file: &Path, trace: &Trace) -> Result<Window> {
        match &self.phase {
            Some(name) => Ok(found_phase(file, trace, name)?.window()),
            None => Window::of(trace, self.from, self.to)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display())),
        }
    }
}

/// The phase `name` of `trace`, read from `file`; an error lists its phases.
fn found_phase(file: &Path, trace: &Trace, name: &str) -> Result<Phase> {
    phase::find(trace, name).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

/// What `trace export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One line per stack: frames outermost first, separated by `;`, then the count
    Collapsed,
    /// pprof's profile.proto, gzipped
    Pprof,
    /// valgrind massif's output: snapshots of the live heap with heap trees
    Massif,
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
        if name.ends_with(".massif") || name.starts_with("massif.out") {
            return Some(ExportFormat::Massif);
        }
        [".folded", ".collapsed", ".txt"]
            .iter()
            .any(|x| name.ends_with(x))
            .then_some(ExportFormat::Collapsed)
    }
}

/// A trace with call stacks, the window asked for and its analysis, or an
/// error saying why not.
fn analysed(file: &Path, window: &WindowArgs) -> Result<(Trace, Window, Analysis)> {
    let trace = format::load(file, None)?;
    if window.from.is_some() || window.to.is_some() {
        analysis::require_events(file, &trace, "a time window (--from/--to)")?;
    }
    let w = window.of(file, &trace)?;
    let a = Analysis::in_window(&trace, w);
    analysis::require_stacks(file, &a)?;
    Ok((trace, w, a))
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
            weight,
            window,
        } => {
            let (_, _, a) = analysed(&file, &window)?;
            let top = top.or((!json).then_some(20)).filter(|&n| n > 0);
            out!("{}", sites::sites(&file, &a, by, top, weight, json));
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
        Command::Leaks {
            file,
            by,
            json,
            window,
        } => {
            let (_, _, a) = analysed(&file, &window)?;
            out!("{}", sites::leaks(&file, &a, by, json));
            Ok(())
        }
        Command::Diff {
            a,
            b,
            by,
            json,
            weight,
            fail_above,
            fail_on,
            fail_per,
            window,
        } => {
            let (_, _, x) = analysed(&a, &window)?;
            let (_, _, y) = analysed(&b, &window)?;
            let gate = (!fail_above.is_empty()).then_some(Gate {
                thresholds: fail_above,
                on: fail_on,
                per: fail_per,
            });
            let (text, failed) = sites::diff([&a, &b], &x, &y, by, weight, gate.as_ref(), json);
            out!("{text}");
            if failed {
                std::io::Write::flush(&mut std::io::stdout())?;
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Timeline {
            file,
            top,
            by,
            spans,
            json,
            report,
            window,
        } => {
            let (trace, w, a) = analysed(&file, &window)?;
            let spans = spans.unwrap_or(if json { 500 } else { 20 }).max(1);
            let t = analysis::timeline::of(&trace, &a, w, by, spans, top);
            out!("{}", timeline::text_or_json(&file, &trace, &t, json)?);
            if let Some(path) = report {
                let page = crate::report::Page {
                    title: "retype: memory over time",
                    intro: "A recorded program's live heap bytes over time, its top sites in their own bands.",
                    parts: vec![crate::report::timeline::part(&file.display().to_string(), &t)],
                };
                write_file(&path, page.html().as_bytes())?;
                eprintln!("retype: wrote {}", path.display());
            }
            Ok(())
        }
        Command::Flamegraph {
            file,
            output,
            weight,
            window,
        } => {
            let (_, _, a) = analysed(&file, &window)?;
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
            window,
        } => {
            let format = format.or_else(|| ExportFormat::from_extension(&output)).with_context(|| {
                format!("{}: cannot tell the format from its name; give --format collapsed, pprof or massif", output.display())
            })?;
            let (trace, w, a) = analysed(&file, &window)?;
            let bytes = match format {
                ExportFormat::Collapsed => {
                    let mut text = export::collapsed(&a, weight).join("\n");
                    text.push('\n');
                    text.into_bytes()
                }
                ExportFormat::Pprof => export::pprof(&trace, &a, weight)?,
                ExportFormat::Massif => {
                    analysis::require_events(&file, &trace, "the massif export")?;
                    massif::massif(&trace, &a, w).into_bytes()
                }
            };
            write_file(&output, &bytes)?;
            eprintln!("retype: wrote {}", output.display());
            Ok(())
        }
        Command::Info {
            file,
            from,
            json,
            phase,
        } => {
            let trace = format::load(&file, from)?;
            let s = Summary::of(&trace);
            let phase = match phase {
                Some(name) => Some(phase_figures(&file, &trace, &name)?),
                None => None,
            };
            if json {
                let mut v = trace_info::json(&file, &trace, &s);
                if let Some((p, f)) = &phase {
                    v["phase"] = trace_info::phase_json(p, f);
                }
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                out!("{}", info_text(&file, &trace, &s));
                if let Some((p, f)) = &phase {
                    out!("{}", phase_text(&trace, p, f));
                }
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
                let (mut requests, dropped) = from_events(&trace);
                (dropped, malloclab::clamp_alignments(&mut requests.requests))
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
pub(super) fn ns(v: u64) -> String {
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
fn window_text(o: &mut String, t: &Trace, windows: &[retype_trace::recorded::RecordedWindow]) {
    use std::fmt::Write;
    if windows.is_empty() {
        return;
    }
    let plural = if windows.len() == 1 { "" } else { "s" };
    let _ = writeln!(
        o,
        "  recorded in {} window{plural} (times after the trace opened; nothing was recorded outside them):",
        windows.len()
    );
    for (k, w) in windows.iter().enumerate() {
        let stop = match (w.stop_ns, &w.closed_by) {
            (Some(at), Some(by)) => format!("{} ({by})", since_open(t, at)),
            _ => "the end of the trace".to_string(),
        };
        let _ = writeln!(
            o,
            "    window {}: {} ({}) to {stop}: {} events",
            k + 1,
            since_open(t, w.start_ns),
            w.opened_by,
            w.events
        );
    }
}

/// The phase `name` of `trace` (read from `file`) and its figures, summed over its stacks.
fn phase_figures(file: &Path, trace: &Trace, name: &str) -> Result<(Phase, SiteStats)> {
    let p = found_phase(file, trace, name)?;
    let mut total = SiteStats::default();
    for s in per_stack(trace, p.window()) {
        total.add(&s);
    }
    Ok((p, total))
}

/// Ns `at` after the trace opened (its first `start_ns`), as text.
fn since_open(t: &Trace, at: u64) -> String {
    let opened: u64 = t
        .meta_value("start_ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(at);
    ns(at.saturating_sub(opened))
}

/// The phases the program marked, one line each.
fn phases_text(o: &mut String, t: &Trace) {
    use std::fmt::Write;
    let phases = phase::phases(t);
    if phases.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "  {} phase{} marked (times after the trace opened; `--phase NAME` analyses one):",
        phases.len(),
        if phases.len() == 1 { "" } else { "s" }
    );
    for p in &phases {
        let end = p
            .end_ns
            .map_or("the end of the trace".into(), |e| since_open(t, e));
        let _ = writeln!(
            o,
            "    {}: {} to {end}: {} events",
            p.name,
            since_open(t, p.start_ns),
            p.events
        );
    }
}

/// `trace info --phase NAME`: the phase's figures.
fn phase_text(t: &Trace, p: &Phase, f: &SiteStats) -> String {
    let end = p
        .end_ns
        .map_or("the end of the trace".into(), |e| since_open(t, e));
    format!(
        "phase {}: {} to {end}, {} events\n  allocated: {} bytes in {} calls ({} failed)\n  \
         peak live (the whole heap at the phase's highest moment): {} bytes in {} blocks\n  \
         left live at its end (allocated in the phase, not freed by its end): {} bytes in {} blocks\n",
        p.name,
        since_open(t, p.start_ns),
        p.events,
        f.bytes,
        f.calls,
        f.failed,
        f.peak_bytes,
        f.peak_blocks,
        f.leaked_bytes,
        f.leaked_blocks
    )
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
    let _ = writeln!(o, "recording: {}", s.kind);
    if s.kind == retype_trace::Kind::Aggregate {
        let sum = |f: fn(&retype_trace::Counters) -> u64| -> u64 {
            t.counters.iter().map(|c| f(&c.counters)).sum()
        };
        let _ = writeln!(
            o,
            "counted: {} allocations, {} failed, {} frees of blocks allocated while recording; {} stacks, {} snapshots",
            sum(|c| c.calls),
            sum(|c| c.failed),
            sum(|c| c.frees),
            t.stacks.len(),
            t.snapshots.len()
        );
    }
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
    let windows = retype_trace::recorded::windows(t);
    window_text(&mut o, t, &windows);
    phases_text(&mut o, t);
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
    let _ = writeln!(
        o,
        "temporary allocations (freed before their thread allocated again): {}",
        s.temporary_allocations
    );
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
    if let Some(most) = t.rss.iter().map(|r| r.rss_bytes).max() {
        let _ = writeln!(o, "RSS: {} samples, highest {most} bytes", t.rss.len());
    }
    if !t.mappings.is_empty() {
        let calls: Vec<String> = crate::trace_info::mapping_calls(t)
            .into_iter()
            .map(|(op, n)| format!("{op} {n}"))
            .collect();
        let _ = writeln!(o, "mapping calls (outside the heap): {}", calls.join(", "));
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
        let sampled = if s.latency_measured < s.events {
            format!(
                "; estimated from the {} calls of {} whose latency was measured",
                s.latency_measured, s.events
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "time inside the allocator: {} ({} per call on average{sampled})",
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
