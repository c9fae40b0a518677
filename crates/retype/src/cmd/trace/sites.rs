//! `retype trace sites`, `leaks` and `diff`: a recording's sites
//! ([`crate::sites`]) as text or JSON.

use std::fmt::Write;
use std::path::Path;

use retype_trace::sites::SiteStats;
use retype_trace::Kind;
use serde_json::{json, Value};

use crate::sites::export::Weight;
use crate::sites::gate::{Breach, Gate, TOTAL};
use crate::sites::symbols::Frame;
use crate::sites::{pairs, Analysis, By, Site, NO_STACK};

pub fn frame_json(f: &Frame) -> Value {
    json!({
        "function": f.function,
        "file": f.file,
        "line": f.line,
        "module": f.module,
        "offset": f.offset,
    })
}

/// A site's figures under the JSON keys of `sites`, `leaks` and `diff`.
pub fn stats_json(s: &SiteStats) -> Value {
    json!({
        "calls": s.calls,
        "bytes_allocated": s.bytes,
        "failed": s.failed,
        "peak_live_bytes": s.peak_bytes,
        "peak_live_blocks": s.peak_blocks,
        "leaked_bytes": s.leaked_bytes,
        "leaked_blocks": s.leaked_blocks,
        "temporary_allocations": s.temporary,
    })
}

fn site_json(s: &Site) -> Value {
    let mut v = stats_json(&s.stats);
    v["site"] = json!(s.key);
    v["stacks"] = json!(s.stacks);
    v["frames"] = s.frames.iter().map(frame_json).collect();
    v["truncated"] = json!(s.truncated);
    v
}

/// `1234567` as `1,234,567`.
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `retype trace sites`, ranked by `weight` (bytes allocated: as
/// [`Analysis::sites`] orders them).
pub fn sites(
    file: &Path,
    a: &Analysis,
    by: By,
    top: Option<usize>,
    weight: Weight,
    json: bool,
) -> String {
    let mut sites = a.sites(by);
    if weight != Weight::Allocated {
        sites.sort_by_key(|s| std::cmp::Reverse(weight.of(&s.stats)));
    }
    let temporaries = weight == Weight::Temporary;
    let shown = &sites[..top.unwrap_or(sites.len()).min(sites.len())];
    if json {
        let v = json!({
            "file": file,
            "recording": a.kind.name(),
            "sample_bytes": a.kind.sample_bytes(),
            "by": by.to_string(),
            "sites_total": sites.len(),
            "total": stats_json(&a.total),
            "sites": shown.iter().map(site_json).collect::<Vec<_>>(),
            "warnings": a.warnings,
        });
        return serde_json::to_string_pretty(&v).unwrap() + "\n";
    }
    let mut o = String::new();
    let t = &a.total;
    let _ = writeln!(
        o,
        "{}: {} allocations from {} sites (by {by}), {} bytes; {} bytes live at the peak; {} bytes in {} blocks leaked at exit",
        file.display(),
        thousands(t.calls),
        sites.len(),
        thousands(t.bytes),
        thousands(t.peak_bytes),
        thousands(t.leaked_bytes),
        thousands(t.leaked_blocks)
    );
    kind_line(&mut o, a.kind);
    if temporaries {
        let _ = writeln!(
            o,
            "{} temporary allocations (freed before their thread allocated again)",
            thousands(t.temporary)
        );
    }
    let extra = if temporaries { 11 } else { 0 };
    let _ = writeln!(
        o,
        "{:>14} {:>10} {:>13} {:>13} {:>7}{}  site",
        "bytes",
        "calls",
        "peak live",
        "leaked",
        "blocks",
        if temporaries { "  temporary" } else { "" }
    );
    for s in shown {
        let st = &s.stats;
        let _ = writeln!(
            o,
            "{:>14} {:>10} {:>13} {:>13} {:>7}{}  {}",
            thousands(st.bytes),
            thousands(st.calls),
            thousands(st.peak_bytes),
            thousands(st.leaked_bytes),
            thousands(st.leaked_blocks),
            if temporaries {
                format!(" {:>10}", thousands(st.temporary))
            } else {
                String::new()
            },
            site_name(s, by)
        );
        if by == By::Stack {
            for f in s.frames.iter().skip(1) {
                let _ = writeln!(o, "{:>w$}  {}", "", f.label(), w = 62 + extra);
            }
            if s.truncated {
                let _ = writeln!(
                    o,
                    "{:>w$}  … (deeper than the recording's --stack-depth)",
                    "",
                    w = 62 + extra
                );
            }
        }
    }
    if shown.len() < sites.len() {
        let _ = writeln!(
            o,
            "({} more sites; --top 0 shows all)",
            sites.len() - shown.len()
        );
    }
    warnings(&mut o, a);
    o
}

/// A site's name in text: its frame with file and line.
fn site_name(s: &Site, by: By) -> String {
    match (by, s.frames.first()) {
        (_, None) => NO_STACK.to_string(),
        (By::Function, Some(f)) => f.function.clone(),
        (_, Some(f)) => f.label(),
    }
}

/// Says, under a text output's first line, what a recording that is not
/// full holds (a full one's outputs stay as they were).
fn kind_line(o: &mut String, k: Kind) {
    if k != Kind::Full {
        let _ = writeln!(o, "recording: {k}");
    }
}

fn warnings(o: &mut String, a: &Analysis) {
    for w in &a.warnings {
        let _ = writeln!(o, "note: {w}");
    }
}

/// `retype trace leaks`: blocks never freed, grouped by `by` (whole stacks
/// by default), most bytes first.
pub fn leaks(file: &Path, a: &Analysis, by: By, json: bool) -> String {
    let mut sites: Vec<Site> = a
        .sites(by)
        .into_iter()
        .filter(|s| s.stats.leaked_blocks > 0)
        .collect();
    sites.sort_by(|x, y| (y.stats.leaked_bytes, &x.key).cmp(&(x.stats.leaked_bytes, &y.key)));
    if json {
        let leaks: Vec<Value> = sites
            .iter()
            .map(|s| {
                json!({
                    "site": s.key,
                    "blocks": s.stats.leaked_blocks,
                    "bytes": s.stats.leaked_bytes,
                    "frames": s.frames.iter().map(frame_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "file": file,
            "recording": a.kind.name(),
            "sample_bytes": a.kind.sample_bytes(),
            "by": by.to_string(),
            "leaked_bytes": a.total.leaked_bytes,
            "leaked_blocks": a.total.leaked_blocks,
            "leaks": leaks,
            "warnings": a.warnings,
        });
        return serde_json::to_string_pretty(&v).unwrap() + "\n";
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} bytes in {} blocks never freed, from {} {}",
        file.display(),
        thousands(a.total.leaked_bytes),
        thousands(a.total.leaked_blocks),
        sites.len(),
        if by == By::Stack { "stacks" } else { "sites" }
    );
    kind_line(&mut o, a.kind);
    for s in &sites {
        let _ = writeln!(
            o,
            "\n{} bytes in {} blocks from:",
            thousands(s.stats.leaked_bytes),
            thousands(s.stats.leaked_blocks)
        );
        if s.frames.is_empty() {
            let _ = writeln!(o, "    {NO_STACK}");
        }
        for f in &s.frames {
            let _ = writeln!(o, "    {}", f.label());
        }
        if s.truncated {
            let _ = writeln!(o, "    … (deeper than the recording's --stack-depth)");
        }
    }
    warnings(&mut o, a);
    o
}

/// `retype trace diff`: each site's figures in `a` and `b` and the change,
/// largest change of `weight` first; with a `gate`, the sites that grew past
/// it, and whether any did.
pub fn diff(
    files: [&Path; 2],
    a: &Analysis,
    b: &Analysis,
    by: By,
    weight: Weight,
    gate: Option<&Gate>,
    json: bool,
) -> (String, bool) {
    let mut rows = pairs(a, b, by);
    let change = |x: u64, y: u64| y as i128 - x as i128;
    if weight != Weight::Allocated {
        rows.sort_by_key(|(_, [x, y])| std::cmp::Reverse(weight.of(x).abs_diff(weight.of(y))));
    }
    let total = [a.total, b.total];
    let breaches = gate.map(|g| g.breaches(&rows, total));
    let failed = breaches.as_ref().is_some_and(|b| !b.is_empty());
    let delta = |x: &SiteStats, y: &SiteStats| {
        json!({
            "calls": change(x.calls, y.calls) as i64,
            "bytes_allocated": change(x.bytes, y.bytes) as i64,
            "peak_live_bytes": change(x.peak_bytes, y.peak_bytes) as i64,
            "leaked_bytes": change(x.leaked_bytes, y.leaked_bytes) as i64,
            "temporary_allocations": change(x.temporary, y.temporary) as i64,
        })
    };
    if json {
        let sites: Vec<Value> = rows
            .iter()
            .map(|(k, [x, y])| json!({"site": k, "a": stats_json(x), "b": stats_json(y), "delta": delta(x, y)}))
            .collect();
        let mut v = json!({
            "a": files[0],
            "b": files[1],
            "recording": {"a": a.kind.name(), "b": b.kind.name()},
            "sample_bytes": {"a": a.kind.sample_bytes(), "b": b.kind.sample_bytes()},
            "by": by.to_string(),
            "total": {"a": stats_json(&a.total), "b": stats_json(&b.total), "delta": delta(&a.total, &b.total)},
            "sites": sites,
        });
        if let (Some(g), Some(breaches)) = (gate, &breaches) {
            v["gate"] = json!({
                "fail_above": g.thresholds.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                "fail_on": g.on.to_string(),
                "fail_per": g.per.to_string(),
                "failed": failed,
                "grew": breaches.iter().map(|r| json!({"site": r.site, "a": r.a, "b": r.b})).collect::<Vec<_>>(),
            });
        }
        return (serde_json::to_string_pretty(&v).unwrap() + "\n", failed);
    }
    let mut o = String::new();
    for (name, file, k) in [("a", files[0], a.kind), ("b", files[1], b.kind)] {
        let what = if k == Kind::Full {
            String::new()
        } else {
            format!(" ({} recording)", k.name())
        };
        let _ = writeln!(o, "{name}: {}{what}", file.display());
    }
    let name = match weight {
        Weight::Allocated => "bytes",
        Weight::Peak => "peak",
        Weight::Leaked => "leaked",
        Weight::Temporary => "temporary",
    };
    let _ = writeln!(
        o,
        "{:>14} {:>14} {:>10} {:>13} {:>13}  site",
        format!("{name} a"),
        format!("{name} b"),
        "calls ±",
        "peak live ±",
        "leaked ±"
    );
    let signed = |v: i128| {
        if v > 0 {
            format!("+{}", thousands(v as u64))
        } else if v < 0 {
            format!("-{}", thousands(v.unsigned_abs() as u64))
        } else {
            "0".into()
        }
    };
    for (k, [x, y]) in rows
        .iter()
        .map(|(k, p)| (k.as_str(), p))
        .chain([(TOTAL, &total)])
    {
        let _ = writeln!(
            o,
            "{:>14} {:>14} {:>10} {:>13} {:>13}  {k}",
            thousands(weight.of(x)),
            thousands(weight.of(y)),
            signed(change(x.calls, y.calls)),
            signed(change(x.peak_bytes, y.peak_bytes)),
            signed(change(x.leaked_bytes, y.leaked_bytes)),
        );
    }
    if let (Some(g), Some(breaches)) = (gate, &breaches) {
        gate_text(&mut o, g, breaches);
    }
    (o, failed)
}

/// The gate's verdict: what grew past it, or that nothing did.
fn gate_text(o: &mut String, g: &Gate, breaches: &[Breach]) {
    let limits: Vec<String> = g.thresholds.iter().map(|t| t.to_string()).collect();
    let what = format!(
        "{} (per {}) past {}",
        g.on.title(),
        g.per,
        limits.join(" and ")
    );
    if breaches.is_empty() {
        let _ = writeln!(o, "gate passed: nothing grew in {what}");
        return;
    }
    let _ = writeln!(o, "gate failed: {} grew in {what}:", breaches.len());
    for r in breaches {
        let share = if r.a == 0 {
            "new".to_string()
        } else {
            format!("{:+.1}%", (r.b as f64 - r.a as f64) * 100.0 / r.a as f64)
        };
        let _ = writeln!(
            o,
            "  {}: {} -> {} ({share})",
            r.site,
            thousands(r.a),
            thousands(r.b)
        );
    }
}
