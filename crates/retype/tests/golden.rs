//! What the laboratory prints, held against what it printed before: the main
//! job (`study cantrip --verbose`: its summary, then every table), the heap replays, a recording's sites and leaks and
//! the report, each compared with a file under `tests/golden/`. A change that
//! moves code must leave these outputs as they were; a change that means to
//! alter one regenerates its file with `RETYPE_BLESS=1 cargo test --release
//! -p retype --test golden` and says why in its commit.
//!
//! Only what a machine cannot change is compared: timings are masked (the
//! study's "mean time per op" row, the replay's `kops`, `perfidx` and `secs`),
//! and the report, whose charts carry timings throughout, is compared as its
//! outline (headings and captions) and a digest of its text with every number
//! masked.

mod common;

use std::path::{Path, PathBuf};

use common::recording::{compile, record};
use common::{repo, retype, retype_cmd, scratch, stderr, stdout};

/// `tests/golden/NAME`.
fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares `actual` with the golden file `name` (or writes it, under
/// `RETYPE_BLESS=1`), naming the first line that differs.
fn assert_golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("RETYPE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (RETYPE_BLESS=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let (line, want, got) = expected
        .lines()
        .zip(actual.lines())
        .enumerate()
        .find(|(_, (w, g))| w != g)
        .map(|(i, (w, g))| (i + 1, w.to_string(), g.to_string()))
        .unwrap_or_else(|| {
            let n = expected.lines().count().min(actual.lines().count());
            (n + 1, "(end)".into(), "(end)".into())
        });
    panic!(
        "output differs from {} at line {line} ({} lines expected, {} printed)\n  expected: {want}\n  printed:  {got}",
        path.display(),
        expected.lines().count(),
        actual.lines().count()
    );
}

/// `retype ARGS…` in the repository's root; its standard output.
fn printed(args: &[&str]) -> String {
    let o = retype(args);
    assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn study_cantrip_prints_what_it_printed_before() {
    let text = printed(&["study", "cantrip", "--verbose"]);
    let masked: String = text
        .lines()
        .map(|l| {
            if l.starts_with("mean time per op (ns)") {
                "mean time per op (ns)  (timing, masked)"
            } else {
                l
            }
        })
        .flat_map(|l| [l, "\n"])
        .collect();
    assert!(masked.contains("Table 4.3/4.4"), "the study's tables");
    assert_golden("study-cantrip.txt", &masked);
}

#[test]
fn replay_prints_what_it_printed_before() {
    let traces: Vec<String> = std::fs::read_dir(repo().join("traces/malloclab"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rep"))
        .map(|p| {
            format!(
                "traces/malloclab/{}",
                p.file_name().unwrap().to_str().unwrap()
            )
        })
        .collect();
    let mut sorted = traces.clone();
    sorted.sort();
    let mut args = vec!["replay", "--json", "--min-time-ms", "1", "--runs", "1"];
    args.extend(sorted.iter().map(String::as_str));
    let mut lines = Vec::new();
    for line in printed(&args).lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let row = v.as_object_mut().expect("an object");
        for timing in ["kops", "perfidx"] {
            assert!(row.remove(timing).is_some(), "{timing} in {line}");
        }
        row.remove("secs");
        lines.push(serde_json::to_string(&v).unwrap());
    }
    assert!(lines.len() > sorted.len(), "a row per trace and heap");
    assert_golden("replay.jsonl", &(lines.join("\n") + "\n"));
}

#[test]
fn sites_and_leaks_print_what_they_printed_before() {
    let dir = scratch("golden-sites");
    let exe = compile("sites.c", &dir);
    let (_, o) = record(&dir, "s.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut text = String::new();
    for args in [
        &["trace", "sites", "s.rtr"][..],
        &["trace", "sites", "s.rtr", "--by", "line"],
        &["trace", "sites", "s.rtr", "--by", "stack"],
        &["trace", "leaks", "s.rtr"],
    ] {
        let o = retype_cmd().args(args).current_dir(&dir).output().unwrap();
        assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
        text += &format!("$ retype {}\n{}", args.join(" "), stdout(&o));
    }
    assert_golden("sites.txt", &text);
}

/// FNV-1a, 64 bits: a digest that stays the same across Rust releases.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `text` with every number (digits, a fraction, an exponent) replaced by `#`.
fn numbers_masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        let mut prev = c;
        while let Some(&n) = chars.peek() {
            let part_of_number =
                n.is_ascii_digit() || n == '.' || n == 'e' || (n == '-' && prev == 'e');
            if !part_of_number {
                break;
            }
            prev = n;
            chars.next();
        }
        out.push('#');
    }
    out
}

#[test]
fn the_report_has_the_outline_and_text_it_had_before() {
    let dir = scratch("golden-report");
    let html = dir.join("r.html");
    let o = retype_cmd()
        .args(["report", "-o"])
        .arg(&html)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(o.status.success(), "retype report: {}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let mut outline = String::new();
    for piece in page.split('<').skip(1) {
        let (tag, text) = piece.split_once('>').unwrap_or((piece, ""));
        let name = tag.split_whitespace().next().unwrap_or("");
        if matches!(name, "h1" | "h2" | "h3" | "h4" | "figcaption") {
            outline += &format!("{name}: {}\n", numbers_masked(text.trim()));
        }
    }
    assert!(outline.contains("h1: retype report"), "{outline}");
    let page = numbers_masked(&page);
    std::fs::write(dir.join("r.masked.html"), &page).unwrap();
    outline += &format!(
        "digest of the page, numbers masked: {:016x} (written to {})\n",
        fnv1a(page.as_bytes()),
        "r.masked.html in the test's scratch directory"
    );
    assert_golden("report-outline.txt", &outline);
}
