//! Tables of a report as HTML: text on the left, numbers right-aligned,
//! cells that differ from a reference marked.

use std::fmt::Write;

use super::escape;

/// One cell: its text, and how it is shown.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub text: String,
    /// A link target (`#id`) for the text.
    pub link: Option<String>,
    /// Differs from the figure it is compared with; the title says how.
    pub differs: Option<String>,
    /// The thesis's (or another reference's) figure, set apart.
    pub reference: bool,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            ..Cell::default()
        }
    }

    pub fn link(text: impl Into<String>, id: &str) -> Cell {
        Cell {
            link: Some(format!("#{id}")),
            ..Cell::new(text)
        }
    }

    /// Numbers (and the dash of a missing one) are right-aligned.
    fn numeric(&self) -> bool {
        let t = self.text.trim_end_matches([' ', '%', 'x', '×']);
        t == "-" || t.parse::<f64>().is_ok()
    }
}

/// A table with a header row; the first column names the rows.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub head: Vec<Cell>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// The table in a wrapper that scrolls on its own when it is wider
    /// than the page, so that the page itself never does.
    pub fn html(&self) -> String {
        let mut out = String::from("<div class=\"scroll\"><table>\n<thead><tr>");
        for c in &self.head {
            cell(&mut out, "th", c);
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, c) in row.iter().enumerate() {
                cell(&mut out, if i == 0 { "th" } else { "td" }, c);
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table></div>");
        out
    }
}

fn cell(out: &mut String, tag: &str, c: &Cell) {
    let mut class = Vec::new();
    if c.numeric() {
        class.push("num");
    }
    if c.reference {
        class.push("ref");
    }
    if c.differs.is_some() {
        class.push("differs");
    }
    write!(out, "<{tag}").unwrap();
    if !class.is_empty() {
        write!(out, " class=\"{}\"", class.join(" ")).unwrap();
    }
    if let Some(t) = &c.differs {
        write!(out, " title=\"{}\"", escape(t)).unwrap();
    }
    out.push('>');
    match &c.link {
        Some(l) => write!(out, "<a href=\"{}\">{}</a>", escape(l), escape(&c.text)),
        None => write!(out, "{}", escape(&c.text)),
    }
    .unwrap();
    write!(out, "</{tag}>").unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_right_aligned_and_differences_marked() {
        let mut ours = Cell::new("12.50");
        ours.differs = Some("thesis 10.00".into());
        let t = Table {
            head: vec![Cell::new(""), Cell::new("best-fit")],
            rows: vec![
                vec![Cell::new("peak"), ours],
                vec![Cell::new("x"), Cell::new("-")],
            ],
        };
        let h = t.html();
        assert!(
            h.contains("<td class=\"num differs\" title=\"thesis 10.00\">12.50</td>"),
            "{h}"
        );
        assert!(
            h.contains("<th>peak</th>") && h.contains("<td class=\"num\">-</td>"),
            "{h}"
        );
    }
}
