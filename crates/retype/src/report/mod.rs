//! Self-contained HTML reports, nothing loaded from the network.
//!
//! A report is a [`Page`] of [`Part`]s: each part (seed 000's study, the
//! heap replays, the allocator benchmarks, …) brings its own title, the
//! summary lines shown at the top of the page, and its sections of figures.
//! The page puts the summaries first, a table of contents that stays in view,
//! then every part, collapsible; a part knows nothing of the others.

pub mod bench;
pub mod chart;
pub mod cheri;
pub mod jsonl;
pub mod mm;
pub mod protocol;
pub mod replay;
pub mod sites;
pub mod study;
pub mod table;
pub mod timeline;
pub mod tlm;

use std::fmt::Write;

use table::Table;

/// What a figure shows.
pub enum Body {
    /// A chart, drawn by the page's script: every chart draws data marks.
    Chart(chart::Chart),
    Table(Table),
}

/// One chart or table of a report.
pub struct Figure {
    pub title: String,
    pub body: Body,
    pub caption: String,
}

/// A titled group of figures, with lines of text before them.
pub struct Section {
    pub title: String,
    pub notes: Vec<String>,
    pub figures: Vec<Figure>,
}

/// What a part says in the page's summary: a line of text or a small table.
pub enum Summary {
    Line(String),
    Table(Table),
}

/// One part of the report, self-contained: the page links its summary to
/// it and lists its sections in the table of contents.
pub struct Part {
    /// The anchor of the part, unique in the page (its sections get
    /// `{id}-1`, `{id}-2`, …).
    pub id: String,
    pub title: String,
    pub summary: Vec<Summary>,
    pub sections: Vec<Section>,
}

impl Part {
    /// The anchor of section `i` (from 0).
    pub fn section_id(&self, i: usize) -> String {
        format!("{}-{}", self.id, i + 1)
    }
}

/// A whole report.
pub struct Page<'a> {
    pub title: &'a str,
    pub intro: &'a str,
    pub parts: Vec<Part>,
}

const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

impl Page<'_> {
    /// The page as one HTML file.
    pub fn html(&self) -> String {
        let mut out = String::new();
        write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title>\n<style>\n{CSS}</style></head>\n<body>\n",
            title = escape(self.title)
        )
        .unwrap();
        self.contents(&mut out);
        write!(
            out,
            "<main>\n<h1>{}</h1>\n<p>{}</p>\n",
            escape(self.title),
            escape(self.intro)
        )
        .unwrap();
        self.summary(&mut out);
        let (mut columns, mut charts) = (chart::Columns::default(), Vec::new());
        for p in &self.parts {
            part(&mut out, p, &mut |c: &chart::Chart| {
                charts.push(c.embed(&mut columns));
                charts.len() - 1
            });
        }
        // The charts' data, once for the page; `</` is escaped so that no
        // string in it ends the script element.
        let data = format!(
            "{{\"columns\":{},\n\"charts\":{}}}",
            columns.json(),
            serde_json::Value::Array(charts)
        )
        .replace("</", "<\\/");
        write!(
            out,
            "</main>\n<div id=\"tip\" role=\"tooltip\" hidden></div>\n\
             <script type=\"application/json\" id=\"report-data\">{data}</script>\n\
             <script>\n{JS}</script>\n</body></html>\n"
        )
        .unwrap();
        out
    }

    /// The table of contents: every part and its sections.
    fn contents(&self, out: &mut String) {
        out.push_str("<nav id=\"contents\"><details open><summary>Contents</summary><ol>\n<li><a href=\"#summary\">Summary</a></li>\n");
        for p in &self.parts {
            write!(out, "<li><a href=\"#{}\">{}</a>", p.id, escape(&p.title)).unwrap();
            if p.sections.len() > 1 {
                out.push_str("<ol>");
                for (i, s) in p.sections.iter().enumerate() {
                    write!(
                        out,
                        "<li><a href=\"#{}\">{}</a></li>",
                        p.section_id(i),
                        escape(&s.title)
                    )
                    .unwrap();
                }
                out.push_str("</ol>");
            }
            out.push_str("</li>\n");
        }
        out.push_str("</ol></details></nav>\n");
    }

    /// Each part's summary, linked to the part.
    fn summary(&self, out: &mut String) {
        out.push_str("<section id=\"summary\"><h2>Summary</h2>\n");
        for p in &self.parts {
            writeln!(
                out,
                "<div class=\"summary\"><h3><a href=\"#{}\">{}</a></h3>",
                p.id,
                escape(&p.title)
            )
            .unwrap();
            for s in &p.summary {
                match s {
                    Summary::Line(l) => writeln!(out, "<p>{}</p>", escape(l)),
                    Summary::Table(t) => writeln!(out, "{}", t.html()),
                }
                .unwrap();
            }
            out.push_str("</div>\n");
        }
        out.push_str("</section>\n");
    }
}

/// Writes part `p`; `chart` keeps a chart's data and returns its number.
fn part(out: &mut String, p: &Part, chart: &mut impl FnMut(&chart::Chart) -> usize) {
    writeln!(
        out,
        "<details class=\"part\" id=\"{}\" open><summary><h2>{}</h2></summary>",
        p.id,
        escape(&p.title)
    )
    .unwrap();
    for (i, s) in p.sections.iter().enumerate() {
        writeln!(
            out,
            "<details class=\"section\" id=\"{}\" open><summary><h3>{}</h3></summary>",
            p.section_id(i),
            escape(&s.title)
        )
        .unwrap();
        for n in &s.notes {
            writeln!(out, "<p class=\"note\">{}</p>", escape(n)).unwrap();
        }
        for f in &s.figures {
            let (class, body) = match &f.body {
                Body::Chart(c) => (
                    "chart",
                    format!("<div class=\"plot\" data-chart=\"{}\"></div>", chart(c)),
                ),
                Body::Table(t) => ("table", t.html()),
            };
            write!(
                out,
                "<figure class=\"{class}\" data-name=\"{name}\"><h4>{name}</h4>\n{body}\n<figcaption>{}</figcaption></figure>\n",
                escape(&f.caption),
                name = escape(&f.title)
            )
            .unwrap();
        }
        out.push_str("</details>\n");
    }
    out.push_str("</details>\n");
}

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
