//! Every relative link in the README and in `docs/` leads somewhere: to a file
//! of the repository and, where it names a `#fragment`, to a heading of that
//! page (as GitHub makes their anchors) or an `<a id>` in it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::repo;

/// The `](target)` of every Markdown link in `text`, outside code blocks and spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold no links: drop them before looking.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a page offers: its headings' slugs and its `<a id="…">`s.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            found.insert(slug(line.trim_start_matches('#')));
        }
        let mut rest = line;
        while let Some(i) = rest.find("<a id=\"") {
            let after = &rest[i + 7..];
            let end = after.find('"').unwrap_or(after.len());
            found.insert(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

/// The README and every page under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// What is wrong with `target`, a link on the page `page`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap().join(file)
    };
    if !file.exists() {
        return Some(format!("no file {}", file.display()));
    }
    if fragment.is_empty() || file.is_dir() {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    (!anchors(&text).contains(fragment)).then(|| format!("no anchor #{fragment}"))
}

#[test]
fn every_link_in_the_readme_and_docs_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in link_targets(&text) {
            checked += 1;
            if let Some(why) = broken(&page, &target) {
                problems.push(format!("{}: ({target}): {why}", page.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_link_checker_finds_what_is_broken() {
    let page = repo().join("README.md");
    assert!(broken(&page, "docs/study.md").is_none());
    assert!(broken(&page, "docs/no-such-page.md").is_some());
    assert!(broken(&page, "docs/environment.md#retype-malloc").is_none());
    assert!(broken(&page, "docs/environment.md#no-such-heading").is_some());
    assert_eq!(
        slug(" The heaps and `retype replay`"),
        "the-heaps-and-retype-replay"
    );
    assert_eq!(
        link_targets("see [a](x.md) and `[b](y.md)`\n```\n[c](z.md)\n```"),
        ["x.md"]
    );
}
