//! Charts as SVG strings, drawn with `plotters`.

use plotters::prelude::*;

/// Data colours: eight colour-blind-safe colours, then four of Paul Tol's
/// muted scheme, so that every series a chart holds (ten heaps, six
/// policies) has its own colour. Free space has a grey of its own, never a
/// series colour; chart furniture is black or white.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(140, 86, 75),
    RGBColor(240, 228, 66),
    RGBColor(51, 34, 136),
    RGBColor(136, 34, 85),
    RGBColor(68, 170, 153),
    RGBColor(153, 153, 51),
];

/// Free space in bar charts.
pub const FREE: RGBColor = RGBColor(220, 220, 220);

/// The colour of series `i`.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Every colour a data mark is drawn in: the series colours and free space.
pub fn mark_colors() -> impl Iterator<Item = RGBColor> {
    PALETTE.into_iter().chain([FREE])
}

/// Legend keys are drawn slightly translucent, so that a browser check can
/// tell them from data marks.
const LEGEND: f64 = 0.95;

/// `#RRGGBB` as plotters writes it.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// A line of `(x, y)` points.
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// Events marked on a chart: circles of radius `r` at `(x, y)`.
pub struct Marks {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64, u32)>,
}

/// Axis labels and scale.
pub struct Axes<'a> {
    pub x: &'a str,
    pub y: &'a str,
    pub log_y: bool,
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// A line chart with optional event marks.
pub fn lines(axes: &Axes, lines: &[Line], marks: &[Marks]) -> String {
    let mut svg = String::new();
    draw_lines(&mut svg, axes, lines, marks).expect("drawing into a string cannot fail");
    svg
}

fn bounds(lines: &[Line], marks: &[Marks]) -> (f64, f64, f64) {
    let xs = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .chain(marks.iter().flat_map(|m| m.points.iter().map(|p| p.0)));
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(marks.iter().flat_map(|m| m.points.iter().map(|p| p.1)));
    let xmax = xs.fold(0f64, f64::max).max(1.0);
    let ymax = ys.clone().fold(0f64, f64::max).max(1.0);
    let ymin_pos = ys.filter(|&y| y > 0.0).fold(f64::INFINITY, f64::min);
    (
        xmax,
        ymax,
        if ymin_pos.is_finite() { ymin_pos } else { 1.0 },
    )
}

fn draw_lines(svg: &mut String, axes: &Axes, lines: &[Line], marks: &[Marks]) -> DrawResult<()> {
    let root = SVGBackend::with_string(svg, (920, 340)).into_drawing_area();
    root.fill(&WHITE)?;
    let (xmax, ymax, ymin) = bounds(lines, marks);
    let mut builder = ChartBuilder::on(&root);
    builder
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    if axes.log_y {
        let mut chart = builder.build_cartesian_2d(
            0f64..xmax * 1.02,
            (ymin.max(1e-3) * 0.8..ymax * 1.5).log_scale(),
        )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axes.x)
            .y_desc(axes.y)
            .draw()?;
        series(&mut chart, lines, marks, ymin * 0.8)?;
        legend_box(&mut chart)?;
    } else {
        let mut chart = builder.build_cartesian_2d(0f64..xmax * 1.02, 0f64..ymax * 1.08)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axes.x)
            .y_desc(axes.y)
            .draw()?;
        series(&mut chart, lines, marks, 0.0)?;
        legend_box(&mut chart)?;
    }
    root.present()?;
    Ok(())
}

/// The legend box of a chart's labelled series.
fn legend_box<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>) -> DrawResult<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn series<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    lines: &[Line],
    marks: &[Marks],
    floor: f64,
) -> DrawResult<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate<From = (f64, f64)>,
{
    for l in lines {
        let style = ShapeStyle::from(l.color).stroke_width(if l.dashed { 1 } else { 2 });
        let pts: Vec<(f64, f64)> = l.points.iter().map(|&(x, y)| (x, y.max(floor))).collect();
        let c = l.color;
        chart
            .draw_series(LineSeries::new(pts, style))?
            .label(l.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.mix(LEGEND)));
    }
    for m in marks {
        let c = m.color;
        chart
            .draw_series(
                m.points
                    .iter()
                    .map(move |&(x, y, r)| Circle::new((x, y.max(floor)), r.max(2), c.filled())),
            )?
            .label(m.name.clone())
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.mix(LEGEND).filled()));
    }
    Ok(())
}

/// One bar of a stacked bar chart: its parts, bottom first, as `(value, colour)`.
pub struct Bar {
    pub x: f64,
    pub width: f64,
    pub parts: Vec<(f64, RGBColor)>,
}

/// A stacked bar chart on a 0..=`ymax` axis, with a legend of `(name, colour)`.
pub fn stacked_bars(
    axes: &Axes,
    bars: &[Bar],
    xmax: f64,
    ymax: f64,
    legend: &[(&str, RGBColor)],
) -> String {
    let mut svg = String::new();
    draw_bars(&mut svg, axes, bars, xmax, ymax, legend).expect("drawing into a string cannot fail");
    svg
}

fn draw_bars(
    svg: &mut String,
    axes: &Axes,
    bars: &[Bar],
    xmax: f64,
    ymax: f64,
    legend: &[(&str, RGBColor)],
) -> DrawResult<()> {
    let root = SVGBackend::with_string(svg, (920, 300)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .draw()?;
    for b in bars {
        let mut y = 0.0;
        for &(v, c) in &b.parts {
            if v > 0.0 {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(b.x, y), (b.x + b.width, y + v)],
                    c.filled(),
                )))?;
            }
            y += v;
        }
    }
    for &(name, c) in legend {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(name)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.mix(LEGEND).filled())
            });
    }
    legend_box(&mut chart)?;
    root.present()?;
    Ok(())
}

/// The name of the category at axis position `x` (categories sit at 0, 1, …).
fn category(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// One series of a grouped bar chart: a value per category.
pub struct Group {
    pub name: String,
    pub color: RGBColor,
    pub values: Vec<f64>,
}

/// Grouped bars over named categories (series side by side in each).
pub fn grouped_bars(axes: &Axes, categories: &[String], groups: &[Group]) -> String {
    let mut svg = String::new();
    draw_grouped(&mut svg, axes, categories, groups).expect("drawing into a string cannot fail");
    svg
}

fn draw_grouped(
    svg: &mut String,
    axes: &Axes,
    categories: &[String],
    groups: &[Group],
) -> DrawResult<()> {
    let root = SVGBackend::with_string(svg, (920, 300)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax = groups
        .iter()
        .flat_map(|g| g.values.iter().copied())
        .fold(0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let n = categories.len().max(1);
    let labels: Vec<String> = categories.to_vec();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_labels(n.min(30))
        .x_label_formatter(&|x| category(&labels, *x))
        .draw()?;
    let width = 0.8 / groups.len().max(1) as f64;
    for (k, g) in groups.iter().enumerate() {
        let c = g.color;
        chart
            .draw_series(
                g.values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v > 0.0)
                    .map(|(i, &v)| {
                        let x = i as f64 - 0.4 + k as f64 * width;
                        Rectangle::new([(x, 0.0), (x + width * 0.9, v)], c.filled())
                    }),
            )?
            .label(g.name.clone())
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.mix(LEGEND).filled())
            });
    }
    if groups.len() > 1 {
        legend_box(&mut chart)?;
    }
    root.present()?;
    Ok(())
}

/// Rows of extents (a heap map): row `i` is named `rows[i].0` and holds
/// `[start, end)` extents drawn as blocks.
pub fn extents(axes: &Axes, rows: &[(String, Vec<(f64, f64)>)]) -> String {
    let mut svg = String::new();
    draw_extents(&mut svg, axes, rows).expect("drawing into a string cannot fail");
    svg
}

fn draw_extents(
    svg: &mut String,
    axes: &Axes,
    rows: &[(String, Vec<(f64, f64)>)],
) -> DrawResult<()> {
    let height = 60 + 26 * rows.len() as u32;
    let root = SVGBackend::with_string(svg, (920, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let xmax = rows
        .iter()
        .flat_map(|r| r.1.iter().map(|e| e.1))
        .fold(0f64, f64::max)
        .max(1.0);
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..xmax, -0.5f64..rows.len() as f64 - 0.5)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(axes.x)
        .y_labels(rows.len())
        .y_label_formatter(&|y| category(&names, *y))
        .draw()?;
    for (i, (_, ext)) in rows.iter().enumerate() {
        let c = color(0);
        let y = i as f64;
        chart.draw_series(ext.iter().map(|&(a, b)| {
            Rectangle::new(
                [(a, y - 0.35), (b.max(a + xmax / 2000.0), y + 0.35)],
                c.filled(),
            )
        }))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use retype_core::heap::HeapKind;
    use retype_core::mm::PolicyKind;

    use super::*;

    #[test]
    fn every_series_of_a_chart_has_its_own_colour_and_none_is_free_space() {
        let series = HeapKind::ALL.len().max(PolicyKind::ALL.len());
        let colours: Vec<RGBColor> = (0..series).map(color).collect();
        for (i, c) in colours.iter().enumerate() {
            assert_ne!(*c, FREE, "series {i} is drawn in free space's grey");
            assert!(!colours[..i].contains(c), "series {i} repeats a colour");
        }
        assert!((0..1000).all(|i| color(i) != FREE));
    }
}
