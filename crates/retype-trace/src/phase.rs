//! Phases: named stretches of a run that the program marks itself, by
//! calling the recorder's `retype_mark(NAME)` (the C header, Python's
//! `retype.mark`, the pytest plugin's one phase per test). The recorder
//! writes each mark as a meta record `phase` valued `NS NAME` (ns on the
//! events' clock); a mark without a name (`NS` alone) ends the phase without
//! starting another.
//!
//! A phase runs from its mark to the next mark, or to the start of the next
//! segment (an exec'd image has not marked), or to the end of the trace. It
//! is one [`Window`], so every analysis that takes `--from/--to` takes a
//! phase the same way.
//!
//! A name marked more than once (a loop's `iteration`, a test run again)
//! gives one phase per mark, numbered `NAME#1`, `NAME#2`, ...: a window is one
//! stretch of time (its peak and what it left live at its end have no meaning
//! over several stretches), and numbering keeps each run apart for a diff of
//! one against another.

use std::collections::HashMap;

use crate::trace::Trace;
use crate::window::Window;

/// One marked stretch of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// The name it was marked with (`NAME#k` when the name was marked more than once).
    pub name: String,
    /// When it was marked, in ns on the events' clock.
    pub start_ns: u64,
    /// When the next mark (or segment) came; `None` if the trace ends inside it.
    pub end_ns: Option<u64>,
    /// The events whose call began inside it.
    pub events: u64,
}

impl Phase {
    /// The window an analysis of this phase looks at: the calls that started in it.
    pub fn window(&self) -> Window {
        Window {
            from_ns: self.start_ns,
            to_ns: self.end_ns.unwrap_or(u64::MAX),
        }
    }
}

/// The phases of `trace`, in time order; empty if the program marked none.
pub fn phases(trace: &Trace) -> Vec<Phase> {
    // Marks and segment starts in time order: (ns, Some(name)) for a mark,
    // (ns, None) for a phase's end without a new one.
    let mut marks: Vec<(u64, Option<&str>)> = trace
        .meta
        .iter()
        .filter_map(|(k, v)| match k.as_str() {
            "phase" => {
                let (at, name) = v.split_once(' ').unwrap_or((v, ""));
                Some((at.parse().ok()?, Some(name).filter(|n| !n.is_empty())))
            }
            "start_ns" => Some((v.parse().ok()?, None)),
            _ => None,
        })
        .collect();
    marks.sort_by_key(|&(at, _)| at);
    let mut times: HashMap<&str, usize> = HashMap::new();
    for name in marks.iter().filter_map(|m| m.1) {
        *times.entry(name).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (k, &(start_ns, name)) in marks.iter().enumerate() {
        let Some(name) = name else { continue };
        let n = seen.entry(name).or_default();
        *n += 1;
        out.push(Phase {
            name: if times[name] > 1 {
                format!("{name}#{n}")
            } else {
                name.to_string()
            },
            start_ns,
            end_ns: marks.get(k + 1).map(|m| m.0),
            events: 0,
        });
    }
    // Phases do not overlap: an event is in the last one started before it, if not ended.
    for e in &trace.events {
        let k = out.partition_point(|p| p.start_ns <= e.time_ns);
        if let Some(p) = k.checked_sub(1).map(|k| &mut out[k]) {
            if p.window().contains(e.time_ns) {
                p.events += 1;
            }
        }
    }
    out
}

/// The phase of `trace` named `name`; an error lists the phases it has.
pub fn find(trace: &Trace, name: &str) -> Result<Phase, String> {
    let all = phases(trace);
    if let Some(p) = all.iter().find(|p| p.name == name) {
        return Ok(p.clone());
    }
    if all.is_empty() {
        return Err(format!(
            "no phase {name:?}: the program marked no phases (retype_mark, retype.mark, the pytest plugin)"
        ));
    }
    const SHOWN: usize = 20;
    let mut names: Vec<&str> = all.iter().take(SHOWN).map(|p| p.name.as_str()).collect();
    let more = all.len().saturating_sub(SHOWN);
    let tail = if more > 0 {
        names.push("...");
        format!(" ({more} more: `retype trace info` lists them all)")
    } else {
        String::new()
    };
    Err(format!(
        "no phase {name:?}; the trace has {} phase{}: {}{tail}",
        all.len(),
        if all.len() == 1 { "" } else { "s" },
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::Event;

    fn trace(meta: &[(&str, &str)]) -> Trace {
        Trace {
            meta: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Trace::default()
        }
    }

    fn spans(t: &Trace) -> Vec<(String, u64, Option<u64>)> {
        phases(t)
            .into_iter()
            .map(|p| (p.name, p.start_ns, p.end_ns))
            .collect()
    }

    #[test]
    fn a_trace_without_marks_has_no_phases() {
        let t = trace(&[("pid", "1"), ("start_ns", "5"), ("window_start", "6 start")]);
        assert!(phases(&t).is_empty());
        let e = find(&t, "setup").unwrap_err();
        assert!(e.contains("marked no phases"), "{e}");
    }

    #[test]
    fn each_phase_ends_at_the_next_mark_an_unnamed_mark_or_a_segment() {
        let t = trace(&[
            ("start_ns", "10"),
            ("phase", "100 load data"),
            ("phase", "200 solve"),
            ("phase", "300"),
            ("phase", "400 report"),
            ("start_ns", "500"),
            ("phase", "600 after exec"),
        ]);
        assert_eq!(
            spans(&t),
            [
                ("load data".into(), 100, Some(200)),
                ("solve".into(), 200, Some(300)),
                ("report".into(), 400, Some(500)),
                ("after exec".into(), 600, None),
            ]
        );
        let mut t = t;
        t.events = [50, 100, 150, 200, 350, 450, 700]
            .iter()
            .map(|&time_ns| Event {
                time_ns,
                ..Event::default()
            })
            .collect();
        let events: Vec<u64> = phases(&t).iter().map(|p| p.events).collect();
        // 50 is before every phase, 350 between "solve"'s end and "report".
        assert_eq!(events, [2, 1, 1, 1]);
        let w = find(&t, "solve").unwrap().window();
        assert_eq!((w.from_ns, w.to_ns), (200, 300));
        assert_eq!(find(&t, "after exec").unwrap().window().to_ns, u64::MAX);
    }

    #[test]
    fn marks_are_taken_in_time_order_and_repeated_names_are_numbered() {
        // Two threads' marks reach the file out of time order.
        let t = trace(&[
            ("phase", "300 step"),
            ("phase", "100 step"),
            ("phase", "200 other"),
            ("phase", "x broken"),
        ]);
        assert_eq!(
            spans(&t),
            [
                ("step#1".into(), 100, Some(200)),
                ("other".into(), 200, Some(300)),
                ("step#2".into(), 300, None),
            ]
        );
        let e = find(&t, "step").unwrap_err();
        assert_eq!(
            e,
            "no phase \"step\"; the trace has 3 phases: step#1, other, step#2"
        );
    }

    #[test]
    fn a_long_list_of_phases_is_cut_in_the_error() {
        let meta: Vec<(String, String)> = (0..30)
            .map(|k| ("phase".to_string(), format!("{k} t{k}")))
            .collect();
        let t = Trace {
            meta,
            ..Trace::default()
        };
        let e = find(&t, "nope").unwrap_err();
        assert!(e.contains("30 phases: t0, t1,"), "{e}");
        assert!(e.contains("t19, ... (10 more"), "{e}");
        assert!(!e.contains("t20"), "{e}");
    }
}
