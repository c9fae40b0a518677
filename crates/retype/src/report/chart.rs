//! Charts as data: each chart is a small JSON description whose numbers sit
//! in columns; the page stores every column once (see [`Columns`]) and its
//! script (`report.js`) draws the charts as SVG in the browser, with hover
//! values, legend toggles and zoom.

use serde_json::{json, Value};

/// Data colours: eight colour-blind-safe colours (Okabe and Ito), then four
/// of Paul Tol's muted scheme, so that every series a chart holds (ten heaps,
/// six policies) has its own colour. Free space has a grey of its own, never
/// a series colour; chart furniture is black or grey.
pub const PALETTE: [Colour; 12] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#F0E442",
    "#332288", "#882255", "#44AA99", "#999933",
];

/// A colour as CSS writes it.
pub type Colour = &'static str;

/// Free space in bar charts.
pub const FREE: Colour = "#DCDCDC";

/// The colour of series `i`.
pub fn color(i: usize) -> Colour {
    PALETTE[i % PALETTE.len()]
}

/// A line of `(x, y)` points.
pub struct Line {
    pub name: String,
    pub color: Colour,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// Events marked on a chart: dots of radius `r` at `(x, y)`.
pub struct Marks {
    pub name: String,
    pub color: Colour,
    pub points: Vec<(f64, f64, u32)>,
}

/// Axis labels and scale.
pub struct Axes<'a> {
    pub x: &'a str,
    pub y: &'a str,
    pub log_y: bool,
}

/// One chart: its description, whose `"c"` fields index `columns`.
pub struct Chart {
    spec: Value,
    columns: Vec<Vec<f64>>,
}

impl Chart {
    fn new(kind: &str, axes: &Axes) -> Chart {
        Chart {
            spec: json!({"kind": kind, "x": axes.x, "y": axes.y, "log": axes.log_y}),
            columns: Vec::new(),
        }
    }

    /// Keeps `values` as a column of this chart; returns its index.
    fn column(&mut self, values: Vec<f64>) -> usize {
        self.columns.push(values);
        self.columns.len() - 1
    }

    /// The same chart with a logarithmic x axis (for a line chart).
    pub fn with_log_x(mut self) -> Chart {
        self.spec["logx"] = json!(true);
        self
    }

    /// The description, its column indices turned into the page's.
    pub fn embed(&self, page: &mut Columns) -> Value {
        let cols: Vec<usize> = self.columns.iter().map(|c| page.add(c)).collect();
        let mut spec = self.spec.clone();
        spec["cols"] = json!(cols);
        spec
    }
}

/// Every column of a page's charts, each stored once: the memory profile
/// and the fragmentation of a run share their x axis, policies that got the
/// same requests share theirs.
#[derive(Default)]
pub struct Columns {
    list: Vec<Vec<f64>>,
    index: std::collections::HashMap<Vec<u64>, usize>,
}

impl Columns {
    fn add(&mut self, values: &[f64]) -> usize {
        let values: Vec<f64> = values.iter().map(|&v| round(v)).collect();
        let key: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        let next = self.list.len();
        *self.index.entry(key).or_insert_with(|| {
            self.list.push(values);
            next
        })
    }

    /// The columns as a JSON array of arrays, numbers as short as they go.
    pub fn json(&self) -> String {
        let mut out = String::from("[");
        for (i, c) in self.list.iter().enumerate() {
            out.push_str(if i == 0 { "[" } else { ",\n[" });
            for (k, v) in c.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&number(*v));
            }
            out.push(']');
        }
        out.push(']');
        out
    }
}

/// Five significant digits: more than a chart or its hover can show.
fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { 0.0 } else { v };
    }
    let scale = 10f64.powi(4 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// `v` in JSON: integers without a fraction, the rest as Rust's shortest
/// representation that reads back the same.
fn number(v: f64) -> String {
    if !v.is_finite() {
        "null".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Lines longer than this are thinned to the lowest and highest point of
/// each of `MAX_POINTS / 2` runs of consecutive points, which keeps their
/// envelope (every peak and trough) at any zoom a screen can show.
const MAX_POINTS: usize = 8000;

fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let run = points.len().div_ceil(MAX_POINTS / 2);
    points
        .chunks(run)
        .flat_map(|c| {
            let lo = c
                .iter()
                .enumerate()
                .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
            let hi = c
                .iter()
                .enumerate()
                .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            if lo.0 <= hi.0 {
                [*lo.1, *hi.1]
            } else {
                [*hi.1, *lo.1]
            }
        })
        .collect()
}

/// A line chart with optional event marks. A line whose x values are
/// 0, 1, 2, … stores none.
pub fn lines(axes: &Axes, lines: &[Line], marks: &[Marks]) -> Chart {
    let mut c = Chart::new("lines", axes);
    let mut series = Vec::new();
    for l in lines {
        let pts = thin(&l.points);
        let indexed = pts.iter().enumerate().all(|(i, p)| p.0 == i as f64);
        let x = (!indexed).then(|| c.column(pts.iter().map(|p| p.0).collect()));
        let y = c.column(pts.iter().map(|p| p.1).collect());
        series.push(json!({"name": l.name, "color": l.color, "x": x, "y": y, "dash": l.dashed}));
    }
    for m in marks {
        let x = c.column(m.points.iter().map(|p| p.0).collect());
        let y = c.column(m.points.iter().map(|p| p.1).collect());
        let r = c.column(m.points.iter().map(|p| p.2 as f64).collect());
        series.push(json!({"name": m.name, "color": m.color, "x": x, "y": y, "r": r}));
    }
    c.spec["series"] = json!(series);
    c
}

/// One series of a grouped bar chart: a value per category.
pub struct Group {
    pub name: String,
    pub color: Colour,
    pub values: Vec<f64>,
}

/// Grouped bars over named categories (series side by side in each).
pub fn grouped_bars(axes: &Axes, categories: &[String], groups: &[Group]) -> Chart {
    let mut c = Chart::new("bars", axes);
    let series: Vec<Value> = groups
        .iter()
        .map(|g| json!({"name": g.name, "color": g.color, "y": c.column(g.values.clone())}))
        .collect();
    c.spec["categories"] = json!(categories);
    c.spec["series"] = json!(series);
    c
}

/// One part of a stacked bar, and its value per group and category.
pub struct Stack {
    pub name: String,
    pub color: Colour,
    /// `values[group][category]`.
    pub values: Vec<Vec<f64>>,
}

/// Stacked bars: in each category, a bar per group side by side, each the
/// parts stacked bottom first; `percent` bars are shares of 100.
pub fn stacked_bars(
    axes: &Axes,
    categories: &[String],
    groups: &[String],
    parts: &[Stack],
    percent: bool,
) -> Chart {
    let mut c = Chart::new("stacked", axes);
    c.spec["percent"] = json!(percent);
    let series: Vec<Value> = parts
        .iter()
        .map(|p| {
            let cols: Vec<usize> = p.values.iter().map(|v| c.column(v.clone())).collect();
            json!({"name": p.name, "color": p.color, "y": cols})
        })
        .collect();
    c.spec["categories"] = json!(categories);
    c.spec["groups"] = json!(groups);
    c.spec["series"] = json!(series);
    c
}

/// Rows of extents (a heap map): row `i` is named `rows[i].0` and holds
/// `[start, end)` extents drawn as blocks in `color`.
pub fn extents(
    axes: &Axes,
    name: &str,
    color: Colour,
    rows: &[(String, Vec<(f64, f64)>)],
) -> Chart {
    let mut c = Chart::new("extents", axes);
    let rows: Vec<Value> = rows
        .iter()
        .map(|(n, ext)| {
            let a = c.column(ext.iter().map(|e| e.0).collect());
            let b = c.column(ext.iter().map(|e| e.1).collect());
            json!({"name": n, "a": a, "b": b})
        })
        .collect();
    c.spec["rows"] = json!(rows);
    c.spec["series"] = json!([{"name": name, "color": color}]);
    c
}

/// A frame of a flame graph: `depth` 0 is the root (the outermost
/// function), and a frame spans `[start, start + width)` of the total,
/// inside its parent's span; `name` indexes the chart's names.
pub struct FlameFrame {
    pub depth: u32,
    pub start: f64,
    pub width: f64,
    pub name: usize,
}

/// A flame graph: stacks drawn as nested spans, root at the bottom, widths
/// in the unit `axes.x` names; clicking a frame zooms to it.
pub fn flame(
    axes: &Axes,
    series: &str,
    color: Colour,
    names: &[String],
    frames: &[FlameFrame],
) -> Chart {
    let mut c = Chart::new("flame", axes);
    let col = |f: fn(&FlameFrame) -> f64| frames.iter().map(f).collect::<Vec<f64>>();
    let cols = [
        c.column(col(|f| f64::from(f.depth))),
        c.column(col(|f| f.start)),
        c.column(col(|f| f.width)),
        c.column(col(|f| f.name as f64)),
    ];
    c.spec["frames"] = json!(cols);
    c.spec["names"] = json!(names);
    c.spec["series"] = json!([{"name": series, "color": color}]);
    c
}

#[cfg(test)]
mod tests {
    use retype_core::heap::HeapKind;
    use retype_core::mm::PolicyKind;

    use super::*;

    #[test]
    fn every_series_of_a_chart_has_its_own_colour_and_none_is_free_space() {
        let series = HeapKind::ALL.len().max(PolicyKind::ALL.len());
        let colours: Vec<Colour> = (0..series).map(color).collect();
        for (i, c) in colours.iter().enumerate() {
            assert_ne!(*c, FREE, "series {i} is drawn in free space's grey");
            assert!(!colours[..i].contains(c), "series {i} repeats a colour");
        }
        assert!((0..1000).all(|i| color(i) != FREE));
    }

    #[test]
    fn columns_are_stored_once_with_short_numbers() {
        let axes = Axes {
            x: "x",
            y: "y",
            log_y: false,
        };
        let line = |name: &str, y: f64| Line {
            name: name.into(),
            color: color(0),
            points: vec![(0.5, y), (1.0 / 3.0, 2.0)],
            dashed: false,
        };
        let chart = lines(&axes, &[line("a", 1.0), line("b", 3.0)], &[]);
        let mut page = Columns::default();
        let spec = chart.embed(&mut page);
        assert_eq!(
            spec["cols"],
            json!([0, 1, 0, 2]),
            "the shared x is stored once"
        );
        assert_eq!(page.json(), "[[0.5,0.33333],\n[1,2],\n[3,2]]");
    }

    #[test]
    fn long_lines_keep_every_peak_and_trough() {
        let pts: Vec<(f64, f64)> = (0..100_000).map(|i| (i as f64, (i % 977) as f64)).collect();
        let t = thin(&pts);
        assert!(t.len() <= MAX_POINTS);
        assert_eq!(t.iter().map(|p| p.1).fold(0.0, f64::max), 976.0);
        assert!(t.windows(2).all(|w| w[0].0 <= w[1].0), "in order");
    }
}
