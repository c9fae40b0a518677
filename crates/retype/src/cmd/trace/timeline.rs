//! `retype trace timeline`: a recording's live heap bytes over time
//! ([`crate::sites::timeline`]), beside its RSS and mapped bytes when the
//! recording has them, as a text table or JSON.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;
use retype_trace::{Kind, Trace};
use serde_json::json;

use super::ns as seconds;
use super::sites::thousands;
use crate::sites::timeline::SiteTimeline;

/// The timeline `t` of `trace`, read from `file`.
pub fn text_or_json(file: &Path, trace: &Trace, t: &SiteTimeline, json: bool) -> Result<String> {
    let kind = Kind::of(trace);
    if json {
        let v = json!({
            "file": file,
            "recording": kind.name(),
            "sample_bytes": kind.sample_bytes(),
            "clock": trace.meta_value("clock"),
            "sites_total": t.sites_total,
            "sites": t.bands.iter().map(|b| json!({"site": b.site, "peak_live_bytes": b.peak_bytes})).collect::<Vec<_>>(),
            "points": t.moments.iter().map(|m| json!({
                "time_ns": m.time_ns,
                "live_bytes": m.live_bytes,
                "sites": m.bands,
                "rss_bytes": m.rss_bytes,
                "mapped_bytes": m.mapped_bytes,
            })).collect::<Vec<_>>(),
            "rss": t.rss.0.iter().map(|&(time_ns, b)| json!({"time_ns": time_ns, "rss_bytes": b})).collect::<Vec<_>>(),
            "mapped": t.mapped.0.iter().map(|&(time_ns, b)| json!({"time_ns": time_ns, "mapped_bytes": b})).collect::<Vec<_>>(),
        });
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let mut o = String::new();
    let peak = t.moments.iter().max_by_key(|m| m.live_bytes);
    let _ = writeln!(
        o,
        "{}: live heap bytes over {}; highest {} at {}; {} sites",
        file.display(),
        seconds(t.moments.last().map_or(0, |m| m.time_ns)),
        thousands(peak.map_or(0, |m| m.live_bytes)),
        seconds(peak.map_or(0, |m| m.time_ns)),
        t.sites_total
    );
    match kind {
        Kind::Full => {}
        Kind::Aggregate => {
            let _ = writeln!(o, "recording: {kind}; its snapshots name their top stacks, the rest is in the last band");
        }
        Kind::Sampled { .. } => {
            let _ = writeln!(o, "recording: {kind}");
        }
    }
    if let Some(&(at, most)) = t.rss.0.iter().rev().max_by_key(|&&(_, b)| b) {
        let _ = writeln!(
            o,
            "  RSS: {} samples, highest {} at {}",
            t.rss.0.len(),
            thousands(most),
            seconds(at)
        );
    }
    if let Some(&(at, most)) = t.mapped.0.iter().rev().max_by_key(|&&(_, b)| b) {
        let _ = writeln!(
            o,
            "  mapped (mmap, brk): {} calls, highest {} at {}",
            t.mapped.0.len(),
            thousands(most),
            seconds(at)
        );
    }
    for (i, b) in t.bands.iter().enumerate() {
        let _ = writeln!(
            o,
            "  [{}] {} (highest {})",
            i + 1,
            b.site,
            thousands(b.peak_bytes)
        );
    }
    let top = peak.map_or(0, |m| m.live_bytes).max(1);
    let (rss, mapped) = (!t.rss.0.is_empty(), !t.mapped.0.is_empty());
    let _ = write!(o, "{:>10} {:>14}", "time", "live");
    if rss {
        let _ = write!(o, " {:>14}", "rss");
    }
    if mapped {
        let _ = write!(o, " {:>14}", "mapped");
    }
    for i in 0..t.bands.len() {
        let _ = write!(o, " {:>12}", format!("[{}]", i + 1));
    }
    let _ = writeln!(o);
    for m in &t.moments {
        let _ = write!(
            o,
            "{:>10} {:>14}",
            seconds(m.time_ns),
            thousands(m.live_bytes)
        );
        let or_dash = |v: Option<u64>| v.map_or("-".to_string(), thousands);
        if rss {
            let _ = write!(o, " {:>14}", or_dash(m.rss_bytes));
        }
        if mapped {
            let _ = write!(o, " {:>14}", or_dash(m.mapped_bytes));
        }
        for b in &m.bands {
            let _ = write!(o, " {:>12}", thousands(*b));
        }
        let bar = "#".repeat((m.live_bytes * 30).div_ceil(top) as usize);
        let _ = writeln!(o, "  {bar}");
    }
    Ok(o)
}
