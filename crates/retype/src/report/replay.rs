//! Figures of heap replays: utilization per trace and heap, the heap at its
//! peak, request sizes and lifetimes, and for recorded traces live bytes over
//! time and each thread's CPU and wait time.

use retype_core::heap::HeapKind;
use retype_trace::summary::Log2Histogram;

use super::chart::{self, Axes, Group, Line};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};
use crate::replay::figures::{ThreadTimes, TraceFigures};

/// Labels of the buckets of a [`Log2Histogram`]: each holds values up to its label.
fn bucket_labels(h: &Log2Histogram) -> Vec<String> {
    (0..h.buckets.len())
        .map(|k| {
            if k < 10 {
                format!("{}", 1u64 << k)
            } else {
                format!("2^{k}")
            }
        })
        .collect()
}

fn histogram(title: &str, what: &str, values: &Log2Histogram) -> Figure {
    let (labels, counts) = (
        bucket_labels(values),
        values.buckets.iter().map(|&c| c as f64).collect(),
    );
    Figure {
        title: title.into(),
        body: Body::Chart(chart::grouped_bars(
            &Axes {
                x: what,
                y: "count",
                log_y: false,
            },
            &labels,
            &[Group {
                name: what.into(),
                color: chart::color(2),
                values: counts,
            }],
        )),
        caption: format!(
            "{} values in power-of-two buckets (each bar counts values up to its label).",
            values.total()
        ),
    }
}

/// The summary: each trace's utilization on each heap, and the best heap.
fn summary(part: &Part, traces: &[TraceFigures], heaps: &[HeapKind]) -> Table {
    let mut head = vec![Cell::new("trace (utilization, %)")];
    head.extend(heaps.iter().map(|h| Cell::new(h.to_string())));
    head.push(Cell::new("best heap"));
    let rows = traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            // Section 0 is the utilization of every trace.
            let mut row = vec![Cell::link(t.name.clone(), &part.section_id(i + 1))];
            row.extend(
                t.heaps
                    .iter()
                    .map(|h| Cell::new(format!("{:.1}", 100.0 * h.util))),
            );
            let best = t.heaps.iter().max_by(|a, b| a.util.total_cmp(&b.util));
            row.push(Cell::new(best.map_or("-".into(), |h| h.heap.to_string())));
            row
        })
        .collect();
    Table { head, rows }
}

/// The replays' part: utilization of every trace, then a section per trace.
pub fn part(traces: &[TraceFigures]) -> Part {
    let mut part = Part {
        id: "heaps".into(),
        title: "Heap allocators on traces".into(),
        summary: Vec::new(),
        sections: sections(traces),
    };
    let heaps: Vec<HeapKind> = traces
        .first()
        .map(|t| t.heaps.iter().map(|h| h.heap).collect())
        .unwrap_or_default();
    part.summary = vec![
        Summary::Line("Utilization as mdriver computes it (peak live requested bytes ÷ the heap's high-water mark) of every trace on every heap.".into()),
        Summary::Table(summary(&part, traces, &heaps)),
    ];
    part
}

fn sections(traces: &[TraceFigures]) -> Vec<Section> {
    let heaps: Vec<HeapKind> = traces
        .first()
        .map(|t| t.heaps.iter().map(|h| h.heap).collect())
        .unwrap_or_default();
    let groups: Vec<Group> = heaps
        .iter()
        .enumerate()
        .map(|(k, h)| Group {
            name: h.to_string(),
            color: chart::color(k),
            values: traces
                .iter()
                .map(|t| 100.0 * t.heaps.get(k).map_or(0.0, |r| r.util))
                .collect(),
        })
        .collect();
    let names: Vec<String> = traces.iter().map(|t| t.name.clone()).collect();
    let mut out = vec![Section {
        title: "Utilization".into(),
        notes: Vec::new(),
        figures: vec![Figure {
            title: "utilization per trace and heap".into(),
            body: Body::Chart(chart::grouped_bars(
                &Axes {
                    x: "trace",
                    y: "utilization (%)",
                    log_y: false,
                },
                &names,
                &groups,
            )),
            caption:
                "Peak live requested bytes ÷ the heap's high-water mark, as mdriver computes it."
                    .into(),
        }],
    }];
    for t in traces {
        let mut figures = Vec::new();
        let rows: Vec<(String, Vec<(f64, f64)>)> = t
            .heaps
            .iter()
            .map(|h| {
                (
                    h.heap.to_string(),
                    h.map
                        .iter()
                        .map(|&(a, b)| (a as f64 / 1024.0, b as f64 / 1024.0))
                        .collect(),
                )
            })
            .collect();
        figures.push(Figure {
            title: format!("{}: heap map at peak", t.name),
            body: Body::Chart(chart::extents(&Axes { x: "KiB from the lowest live block", y: "", log_y: false }, "live block", chart::color(0), &rows)),
            caption: "Live blocks (blue) at the moment live bytes first reach their peak; white gaps are holes.".into(),
            });
        figures.push(histogram(
            &format!("{}: request sizes", t.name),
            "bytes requested",
            &t.sizes,
        ));
        if t.lifetimes.total() > 0 {
            figures.push(histogram(
                &format!("{}: lifetimes", t.name),
                "lifetime (requests)",
                &t.lifetimes,
            ));
        }
        if let Some(live) = &t.live_over_time {
            figures.push(Figure {
                title: format!("{}: live bytes over time", t.name),
                body: Body::Chart(chart::lines(
                    &Axes {
                        x: "ms since the first event",
                        y: "live KiB",
                        log_y: false,
                    },
                    &[Line {
                        name: "live".into(),
                        color: chart::color(0),
                        points: live.clone(),
                        dashed: false,
                    }],
                    &[],
                )),
                caption: "Bytes requested and not yet freed, as the program ran.".into(),
            });
        }
        if !t.threads.is_empty() {
            let labels: Vec<String> = t
                .threads
                .iter()
                .map(|th| format!("thread {}", th.thread))
                .collect();
            let ms = |f: fn(&ThreadTimes) -> u64| {
                t.threads.iter().map(|th| f(th) as f64 / 1e6).collect()
            };
            figures.push(Figure {
                title: format!("{}: CPU and wait time per thread", t.name),
                body: Body::Chart(chart::grouped_bars(
                    &Axes {
                        x: "thread",
                        y: "ms",
                        log_y: false,
                    },
                    &labels,
                    &[
                        Group {
                            name: "user".into(),
                            color: chart::color(0),
                            values: ms(|t| t.user),
                        },
                        Group {
                            name: "system".into(),
                            color: chart::color(1),
                            values: ms(|t| t.system),
                        },
                        Group {
                            name: "wait".into(),
                            color: chart::color(4),
                            values: ms(|t| t.wait),
                        },
                    ],
                )),
                caption: "Seed 003's TLM figures: wait = lifetime − (user + system).".into(),
            });
        }
        out.push(Section {
            title: t.name.clone(),
            notes: Vec::new(),
            figures,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_hold_values_up_to_their_label() {
        let mut h = Log2Histogram::default();
        for v in [1, 2, 3, 4, 5, 1024] {
            h.add(v);
        }
        let labels = bucket_labels(&h);
        assert_eq!(&labels[..4], ["1", "2", "4", "8"]);
        assert_eq!(&h.buckets[..4], [1, 1, 2, 1]);
        assert_eq!((labels[10].as_str(), h.buckets[10]), ("2^10", 1));
        assert_eq!(h.total(), 6);
    }
}
