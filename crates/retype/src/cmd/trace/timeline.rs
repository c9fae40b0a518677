//! `retype trace timeline`: a recording's live heap bytes over time
//! ([`crate::sites::timeline`]) as a text table or JSON.

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
            })).collect::<Vec<_>>(),
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
    let _ = write!(o, "{:>10} {:>14}", "time", "live");
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
        for b in &m.bands {
            let _ = write!(o, " {:>12}", thousands(*b));
        }
        let bar = "#".repeat((m.live_bytes * 30).div_ceil(top) as usize);
        let _ = writeln!(o, "  {bar}");
    }
    Ok(o)
}
