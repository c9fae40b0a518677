//! The figures of seed 000 for one workload run under several policies:
//! memory profile, fragmentation, per-slab snapshots and time per request.

use retype_core::workload::Step;

use super::chart::{self, Axes, Line, Marks, Stack};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::study::run::{SlabShot, Workload};
use crate::study::summary::kib;
use crate::study::tables::{self, Column, LOGS_COUNT, NOTABLE};

/// A policy's run, as the report needs it.
struct PolicyRun<'a> {
    label: String,
    steps: &'a [Step],
    /// Per-slab states at 25, 50, 75 and 100 % of the run, if captured.
    snapshots: &'a [Vec<SlabShot>],
}

/// What the summary shows of one policy's run of a workload.
struct Headline {
    policy: String,
    /// Peak total fragmentation, KiB: ours and the thesis's.
    peak: f64,
    thesis: Option<f64>,
    /// The fraction of operations that match the policy's own log.
    agreement: Option<f64>,
}

/// The study's part of a report, assembled one workload at a time.
pub struct StudyPart {
    part: Part,
    headlines: Vec<Vec<Headline>>,
}

impl StudyPart {
    pub fn new(id: &str, title: &str) -> StudyPart {
        StudyPart {
            part: Part {
                id: id.into(),
                title: title.into(),
                summary: Vec::new(),
                sections: Vec::new(),
            },
            headlines: Vec::new(),
        }
    }

    /// Adds a workload's section: its title's first line names it, the
    /// others are notes; its table, and its runs' charts.
    pub fn add(&mut self, w: &Workload) {
        let columns = &w.columns();
        let agreements: Vec<(String, f64)> = w
            .runs
            .iter()
            .filter_map(|r| Some((r.policy.to_string(), r.agreement.as_ref()?.exact_fraction())))
            .collect();
        let runs: Vec<PolicyRun> = w
            .runs
            .iter()
            .map(|r| PolicyRun {
                label: r.policy.to_string(),
                steps: &r.steps,
                snapshots: &r.snapshots,
            })
            .collect();
        let title = &w.title;
        let mut lines = title.lines().map(str::trim);
        let name = lines.next().unwrap_or_default();
        let mut notes: Vec<String> = lines.map(String::from).collect();
        notes.extend(agreements.iter().map(|(p, f)| {
            format!(
                "{p}: {:.1} % of operations match its log exactly",
                100.0 * f
            )
        }));
        let mut section = section(name, table(columns), &runs);
        section.notes = notes;
        self.part.sections.push(section);
        let mut row = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            let Some(ours) = c.ours.as_ref().filter(|_| c.label != LOGS_COUNT) else {
                continue;
            };
            // The thesis's column follows the run's, after its logs' count if any.
            let thesis = columns[i + 1..]
                .iter()
                .take_while(|n| n.label == LOGS_COUNT || n.published.is_some())
                .find_map(|n| n.published.as_ref())
                .map(|p| p.peak[2]);
            row.push(Headline {
                policy: c.label.clone(),
                peak: kib(ours.peak_frag_total as f64),
                thesis,
                agreement: agreements.iter().find(|a| a.0 == c.label).map(|a| a.1),
            });
        }
        self.headlines.push(row);
    }

    /// The part, its summary a table of every workload: each policy's peak
    /// fragmentation beside the thesis's, and how well the logs are matched.
    pub fn part(mut self, line: &str) -> Part {
        let policies: Vec<String> = self
            .headlines
            .first()
            .map(|r| r.iter().map(|h| h.policy.clone()).collect())
            .unwrap_or_default();
        let any = |p: &str, f: fn(&Headline) -> bool| {
            self.headlines
                .iter()
                .flatten()
                .any(|h| h.policy == p && f(h))
        };
        let thesis: Vec<bool> = policies
            .iter()
            .map(|p| any(p, |h| h.thesis.is_some()))
            .collect();
        let logged: Vec<bool> = policies
            .iter()
            .map(|p| any(p, |h| h.agreement.is_some()))
            .collect();
        let mut head = vec![Cell::new("workload (peak total fragmentation, KiB)")];
        for (k, p) in policies.iter().enumerate() {
            head.push(Cell::new(p.clone()));
            if thesis[k] {
                head.push(Cell {
                    reference: true,
                    ..Cell::new("thesis")
                });
            }
        }
        for (k, p) in policies.iter().enumerate() {
            if logged[k] {
                head.push(Cell::new(format!("{p}: log match")));
            }
        }
        let mut rows = Vec::new();
        for (i, (s, hs)) in self.part.sections.iter().zip(&self.headlines).enumerate() {
            let find = |p: &str| hs.iter().find(|h| h.policy == p);
            let mut row = vec![Cell::link(s.title.clone(), &self.part.section_id(i))];
            for (k, p) in policies.iter().enumerate() {
                let h = find(p);
                let (ours, theirs) = (h.map(|h| h.peak), h.and_then(|h| h.thesis));
                row.push(Cell {
                    differs: ours.zip(theirs).and_then(|(a, b)| {
                        ((a - b).abs() > NOTABLE * b.max(1.0))
                            .then(|| format!("the thesis: {b:.2}"))
                    }),
                    ..Cell::new(ours.map_or("-".into(), |v| format!("{v:.2}")))
                });
                if thesis[k] {
                    row.push(Cell {
                        reference: true,
                        ..Cell::new(theirs.map_or("-".into(), |v| format!("{v:.2}")))
                    });
                }
            }
            for (k, p) in policies.iter().enumerate() {
                if logged[k] {
                    let a = find(p).and_then(|h| h.agreement);
                    row.push(Cell::new(
                        a.map_or("-".into(), |f| format!("{:.1} %", 100.0 * f)),
                    ));
                }
            }
            rows.push(row);
        }
        self.part.summary = vec![
            Summary::Line(line.into()),
            Summary::Table(Table { head, rows }),
        ];
        self.part
    }
}

/// The same table in HTML: the thesis's columns set apart, and our figure
/// marked where it differs from the thesis's beside it by more than 5 %.
fn table(columns: &[Column]) -> Table {
    let mut head = vec![Cell::new("")];
    head.extend(columns.iter().map(|c| Cell {
        reference: c.ours.is_none(),
        ..Cell::new(if c.ours.is_none() { "thesis" } else { &c.label })
    }));
    let rows = tables::rows()
        .into_iter()
        .map(|(name, cell)| {
            // Sub-rows keep their indent, which HTML would collapse.
            let mut row = vec![Cell::new(name.replace("  ", "\u{a0}\u{a0}\u{a0}\u{a0}"))];
            let Some(cell) = cell else { return row };
            let texts: Vec<String> = columns
                .iter()
                .map(|c| cell(c).unwrap_or_else(|| "-".into()))
                .collect();
            for (i, (c, text)) in columns.iter().zip(&texts).enumerate() {
                let thesis = texts.get(i + 1).filter(|_| {
                    c.ours.is_some() && columns.get(i + 1).is_some_and(|n| n.ours.is_none())
                });
                let differs = thesis.and_then(|t| {
                    let (a, b) = (text.parse::<f64>().ok()?, t.parse::<f64>().ok()?);
                    ((a - b).abs() > NOTABLE * b.abs().max(1.0))
                        .then(|| format!("the thesis: {t} (ours − thesis: {:+.2})", a - b))
                });
                row.push(Cell {
                    reference: c.ours.is_none(),
                    differs,
                    ..Cell::new(text.clone())
                });
            }
            row
        })
        .collect();
    Table { head, rows }
}

/// The section of one workload.
fn section(title: &str, table: Table, runs: &[PolicyRun]) -> Section {
    let mut figures = vec![Figure {
        title: format!("{title}: figures"),
        body: Body::Table(table),
        caption: "The study's table for this workload, the thesis's figures beside ours (ours marked where they differ by more than 5 %): the charts below are drawn from the same runs.".into(),
    }];
    figures.push(profile(title, runs));
    figures.push(fragmentation(title, runs));
    let with_shots: Vec<&PolicyRun> = runs
        .iter()
        .filter(|r| !r.snapshots.is_empty())
        .take(3)
        .collect();
    if !with_shots.is_empty() {
        for (k, pct) in [25, 50, 75, 100].into_iter().enumerate() {
            figures.push(slabs(title, &with_shots, k, pct));
        }
    }
    figures.push(latency(title, runs));
    Section {
        title: title.into(),
        notes: Vec::new(),
        figures,
    }
}

/// x: cumulative KiB requested, the time axis of seed 000 (after Wilson et al.).
fn x_of(s: &Step) -> f64 {
    kib(s.stats.bytes_requested as f64)
}

/// Points where a counter grew, with the growth.
fn growth(
    steps: &[Step],
    f: impl Fn(&Step) -> u64,
    y: impl Fn(&Step) -> f64,
) -> Vec<(f64, f64, u32)> {
    let mut prev = 0;
    let mut out = Vec::new();
    for s in steps {
        let v = f(s);
        if v > prev {
            out.push((x_of(s), y(s), 2 + (64 - (v - prev).leading_zeros())));
        }
        prev = v;
    }
    out
}

fn profile(title: &str, runs: &[PolicyRun]) -> Figure {
    let mut lines = Vec::new();
    let mut marks = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let c = chart::color(i);
        let in_use = |s: &Step| kib(s.stats.bytes_in_use as f64);
        lines.push(Line {
            name: format!("{} bytes in use", r.label),
            color: c,
            points: r.steps.iter().map(|s| (x_of(s), in_use(s))).collect(),
            dashed: false,
        });
        let resets = growth(r.steps, |s| s.stats.slab_resets, in_use);
        if !resets.is_empty() {
            marks.push(Marks {
                name: format!("{} slab resets", r.label),
                color: c,
                points: resets.into_iter().map(|(x, y, _)| (x, y, 2)).collect(),
            });
        }
        let ooms = growth(r.steps, |s| s.stats.ooms, in_use);
        if !ooms.is_empty() {
            marks.push(Marks {
                name: format!("{} OOMs", r.label),
                color: chart::color(i + 4),
                points: ooms.into_iter().map(|(x, y, _)| (x, y, 5)).collect(),
            });
        }
    }
    Figure {
        title: format!("{title}: memory profile"),
        body: Body::Chart(chart::lines(&Axes { x: "cumulative KiB requested", y: "KiB in use", log_y: false }, &lines, &marks)),
        caption: "Bytes in use against cumulative bytes requested; small dots mark slab resets, large dots OOMs.".into(),
    }
}

fn fragmentation(title: &str, runs: &[PolicyRun]) -> Figure {
    let mut lines = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let c = chart::color(i);
        lines.push(Line {
            name: format!("{} watermarking", r.label),
            color: c,
            points: r
                .steps
                .iter()
                .map(|s| (x_of(s), kib(s.stats.frag_watermark as f64)))
                .collect(),
            dashed: false,
        });
        lines.push(Line {
            name: format!("{} alignment", r.label),
            color: c,
            points: r
                .steps
                .iter()
                .map(|s| (x_of(s), kib(s.stats.frag_alignment as f64)))
                .collect(),
            dashed: true,
        });
    }
    Figure {
        title: format!("{title}: fragmentation"),
        body: Body::Chart(chart::lines(&Axes { x: "cumulative KiB requested", y: "KiB lost", log_y: false }, &lines, &[])),
        caption: "Watermarking (thick) and alignment (thin) fragmentation over the same axis as the profile.".into(),
    }
}

fn slabs(title: &str, runs: &[&PolicyRun], k: usize, pct: u32) -> Figure {
    let parts = [
        ("in use", chart::color(0)),
        ("watermarking", chart::color(1)),
        ("alignment", chart::color(4)),
        ("free", chart::FREE),
    ];
    let mut stacks: Vec<Stack> = parts
        .iter()
        .map(|&(name, color)| Stack {
            name: name.into(),
            color,
            values: Vec::new(),
        })
        .collect();
    let mut groups = Vec::new();
    let mut slabs_n = 0;
    for r in runs {
        let Some(shot) = r.snapshots.get(k) else {
            continue;
        };
        groups.push(r.label.clone());
        // Slabs by decreasing size, as the thesis draws them.
        let mut order: Vec<&SlabShot> = shot.iter().collect();
        order.sort_by_key(|s| std::cmp::Reverse(s.size));
        slabs_n = slabs_n.max(order.len());
        let pc = |s: &SlabShot, v: u64| 100.0 * v as f64 / s.size as f64;
        let per_part: [fn(&SlabShot) -> u64; 4] = [
            |s| s.live,
            |s| s.frag_watermark,
            |s| s.frag_alignment,
            |s| s.size - (s.live + s.frag_watermark + s.frag_alignment).min(s.size),
        ];
        for (stack, f) in stacks.iter_mut().zip(per_part) {
            stack
                .values
                .push(order.iter().map(|s| pc(s, f(s))).collect());
        }
    }
    Figure {
        title: format!("{title}: slabs at {pct} % of the run"),
        body: Body::Chart(chart::stacked_bars(
            &Axes { x: "slab (largest first)", y: "% of the slab", log_y: false },
            &(1..=slabs_n).map(|i| i.to_string()).collect::<Vec<_>>(),
            &groups,
            &stacks,
            true,
        )),
        caption: format!("Each slab's bytes in use, lost to the watermark, lost to alignment, and free (grey); bars left to right in each slab: {}.", groups.join(", ")),
    }
}

fn latency(title: &str, runs: &[PolicyRun]) -> Figure {
    let mut lines = Vec::new();
    let mut marks = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let c = chart::color(i);
        let ns = |s: &Step| s.ticks.max(1) as f64;
        lines.push(Line {
            name: format!("{} ns per request", r.label),
            color: c,
            points: r
                .steps
                .iter()
                .enumerate()
                .map(|(k, s)| (k as f64, ns(s)))
                .collect(),
            dashed: false,
        });
        let mut prev = 0;
        let failed: Vec<(f64, f64, u32)> = r
            .steps
            .iter()
            .enumerate()
            .filter_map(|(k, s)| {
                let d = s.stats.failed_retypes - prev;
                prev = s.stats.failed_retypes;
                (d > 0).then(|| (k as f64, ns(s), 2 + (64 - d.leading_zeros())))
            })
            .collect();
        if !failed.is_empty() {
            marks.push(Marks {
                name: format!("{} failed retypes", r.label),
                color: chart::color(i + 4),
                points: failed,
            });
        }
    }
    Figure {
        title: format!("{title}: time per request"),
        body: Body::Chart(chart::lines(&Axes { x: "request", y: "ns (log)", log_y: true }, &lines, &marks)),
        caption: "Our model's time per request on this machine; circles mark requests with failed retypes, larger for more.".into(),
    }
}
