//! Allocator benchmarks as ratio bars against mimalloc (from `bench/run.sh`'s
//! `results.csv`: bench, allocator, rep, wall_s, rss_kib, ops_per_s).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::chart::{self, Axes, Group};
use super::table::{Cell, Table};
use super::{Body, Figure, Part, Section, Summary};

/// Medians per (bench, allocator) of wall time and peak RSS, in file order.
pub struct Results {
    benches: Vec<String>,
    allocators: Vec<String>,
    medians: BTreeMap<(String, String), (f64, f64)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Results {
    /// Reads `results.csv`; a malformed line is named by file and line.
    pub fn read(path: &Path) -> anyhow::Result<Results> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.starts_with("bench,allocator,rep,wall_s,rss_kib") => {}
            _ => bail!("{}: line 1: not a bench/run.sh results file (header bench,allocator,rep,wall_s,rss_kib,…)", path.display()),
        }
        let (mut benches, mut allocators) = (Vec::<String>::new(), Vec::<String>::new());
        let mut samples: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (i, line) in lines {
            let f: Vec<&str> = line.split(',').collect();
            let bad = || {
                anyhow::anyhow!(
                    "{}: line {}: expected bench,allocator,rep,wall_s,rss_kib,ops_per_s",
                    path.display(),
                    i + 1
                )
            };
            if f.len() < 5 {
                return Err(bad());
            }
            let wall: f64 = f[3].parse().map_err(|_| bad())?;
            let rss: f64 = f[4].parse().map_err(|_| bad())?;
            if !benches.iter().any(|b| b == f[0]) {
                benches.push(f[0].into());
            }
            if !allocators.iter().any(|a| a == f[1]) {
                allocators.push(f[1].into());
            }
            let e = samples.entry((f[0].into(), f[1].into())).or_default();
            e.0.push(wall);
            e.1.push(rss);
        }
        if !allocators.iter().any(|a| a == "mimalloc") {
            bail!("{}: no mimalloc runs to compare with", path.display());
        }
        let medians = samples
            .into_iter()
            .map(|(k, (w, r))| (k, (median(w), median(r))))
            .collect();
        Ok(Results {
            benches,
            allocators,
            medians,
        })
    }

    /// Ratios to mimalloc of one figure, per allocator and bench.
    fn ratios(&self, pick: fn(&(f64, f64)) -> f64) -> Vec<Group> {
        self.allocators
            .iter()
            .enumerate()
            .map(|(k, a)| Group {
                name: a.clone(),
                color: chart::color(k),
                values: self
                    .benches
                    .iter()
                    .map(|b| {
                        let get =
                            |al: &str| self.medians.get(&(b.clone(), al.to_string())).map(pick);
                        match (get(a), get("mimalloc")) {
                            (Some(x), Some(m)) if m > 0.0 => x / m,
                            _ => 0.0,
                        }
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The geometric mean of the positive values (benchmarks an allocator ran).
fn geomean(values: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .filter(|&&v| v > 0.0)
        .map(|v| v.ln())
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// The benchmarks' part: wall time and peak RSS as ratios to mimalloc,
/// summarized by each allocator's geometric mean.
pub fn part(r: &Results) -> Part {
    let (time, rss) = (r.ratios(|m| m.0), r.ratios(|m| m.1));
    let rows = time
        .iter()
        .zip(&rss)
        .map(|(t, m)| {
            let g = |v: &[f64]| Cell::new(geomean(v).map_or("-".into(), |g| format!("{g:.2}")));
            vec![Cell::new(t.name.clone()), g(&t.values), g(&m.values)]
        })
        .collect();
    let head = ["allocator (geomean ÷ mimalloc)", "wall time", "peak RSS"].map(Cell::new);
    Part {
        id: "benchmarks".into(),
        title: "Allocator benchmarks".into(),
        summary: vec![
            Summary::Line(format!(
                "{} benchmarks of bench/run.sh: each allocator's geometric mean of its medians divided by mimalloc's (lower is better).",
                r.benches.len()
            )),
            Summary::Table(Table { head: head.to_vec(), rows }),
        ],
        sections: vec![section(r)],
    }
}

/// The benchmark section: wall time and peak RSS as ratios to mimalloc.
fn section(r: &Results) -> Section {
    let fig = |title: &str, y: &str, pick: fn(&(f64, f64)) -> f64| Figure {
        title: title.into(),
        body: Body::Chart(chart::grouped_bars(
            &Axes {
                x: "benchmark",
                y,
                log_y: false,
            },
            &r.benches,
            &r.ratios(pick),
        )),
        caption:
            "Medians of the repetitions divided by mimalloc's (1.0 = as mimalloc; lower is better)."
                .into(),
    };
    Section {
        title: "Wall time and peak RSS".into(),
        notes: Vec::new(),
        figures: vec![
            fig("wall time ÷ mimalloc", "time ratio", |m| m.0),
            fig("peak RSS ÷ mimalloc", "RSS ratio", |m| m.1),
        ],
    }
}
