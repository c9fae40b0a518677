//! Self-contained HTML reports: inline SVG charts, no network access.
//!
//! Each chart is a `<figure class="chart">`. Data marks are drawn in the
//! [`chart::mark_colors`]; a small script counts, in the browser, the
//! marks of each chart that have a visible size, and writes the counts to
//! `body[data-marks]`, so a headless browser can check that every chart
//! really drew something.

pub mod bench;
pub mod chart;
pub mod replay;
pub mod study;

use std::fmt::Write;

/// One chart or table of a report.
pub struct Figure {
    pub title: String,
    /// An SVG image (from [`chart`]) or an HTML fragment.
    pub body: String,
    pub caption: String,
    /// A chart (checked for drawn marks), or a table.
    pub chart: bool,
}

/// A titled group of figures.
pub struct Section {
    pub title: String,
    pub figures: Vec<Figure>,
}

/// The whole page.
pub fn html(title: &str, intro: &str, sections: &[Section]) -> String {
    let mut out = String::new();
    let palette: Vec<String> = chart::mark_colors()
        .map(|c| format!("\"{}\"", chart::hex(c)))
        .collect();
    write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }}
h1 {{ font-size: 1.6em; }} h2 {{ margin-top: 2em; border-bottom: 1px solid #ccc; }}
figure.chart {{ margin: 1.5em 0; }} figcaption {{ color: #555; font-size: 0.9em; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 2px 8px; text-align: right; }}
</style></head>
<body>
<h1>{title}</h1>
<p>{intro}</p>
"#
    )
    .unwrap();
    for s in sections {
        writeln!(out, "<h2>{}</h2>", escape(&s.title)).unwrap();
        for f in &s.figures {
            write!(
                out,
                "<figure class=\"{}\" data-name=\"{name}\"><h3>{name}</h3>\n{}\n<figcaption>{}</figcaption></figure>\n",
                if f.chart { "chart" } else { "table" },
                f.body,
                escape(&f.caption),
                name = escape(&f.title)
            )
            .unwrap();
        }
    }
    write!(
        out,
        r#"<script>
// Counts each chart's data marks (palette colours) that the browser drew with a size.
(function () {{
  const palette = new Set([{}].map(c => c.toLowerCase()));
  const marks = {{}};
  for (const fig of document.querySelectorAll("figure.chart")) {{
    let n = 0;
    for (const el of fig.querySelectorAll("svg *")) {{
      const c = ((el.getAttribute("stroke") || "") + "|" + (el.getAttribute("fill") || "")).toLowerCase().split("|");
      if (!c.some(x => palette.has(x))) continue;
      // Legend keys are drawn translucent: they are no data.
      const op = parseFloat(el.getAttribute("opacity") || el.getAttribute("fill-opacity") || el.getAttribute("stroke-opacity") || "1");
      if (op < 1) continue;
      const b = el.getBBox ? el.getBBox() : null;
      if (b && (b.width > 0 || b.height > 0)) n++;
    }}
    marks[fig.dataset.name] = n;
  }}
  document.body.dataset.marks = JSON.stringify(marks);
}})();
</script>
</body></html>
"#,
        palette.join(",")
    )
    .unwrap();
    out
}

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
