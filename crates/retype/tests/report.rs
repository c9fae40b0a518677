//! The HTML reports of `retype study`, `replay`, `bench mm` and `report`
//! render in a real browser and every chart draws.
//!
//! Needs Debian's chromium (installed by scripts/test); without it the browser
//! checks say so and are skipped, except in CI, where they fail.

mod common;

use std::path::Path;

use common::{chromium, marks_in_browser, quick_replay, repo, retype, retype_cmd, scratch, stderr};

/// Asserts that every chart of the page at `html` drew marks (when there is a
/// browser), and returns how many charts it has.
fn every_chart_draws(html: &Path) -> usize {
    let page = std::fs::read_to_string(html).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the report loads nothing from the network"
    );
    let charts = page.matches("<figure class=\"chart\"").count();
    if let Some(browser) = chromium() {
        let marks = marks_in_browser(browser, html);
        assert_eq!(marks.len(), charts, "every chart was checked");
        for (name, n) in &marks {
            assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
        }
    }
    charts
}

#[test]
fn every_chart_of_a_replay_report_draws_marks() {
    let html = scratch("replay-report").join("r.html");
    let o = quick_replay("best-fit,buddy")
        .args([
            "traces/malloclab/perl.rep",
            "traces/malloclab/short1-bal.rep",
        ])
        .arg("--report")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        every_chart_draws(&html),
        1 + 2 * 3,
        "utilization, then map, sizes and lifetimes per trace"
    );
}

/// Two traces with the same file name are two traces: each gets its own
/// section, named by its path, with its own heaps' results.
#[test]
fn traces_that_share_a_file_name_keep_their_own_results() {
    let dir = scratch("same-name");
    for (sub, source) in [("a", "short1-bal.rep"), ("b", "perl.rep")] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::copy(
            repo().join("traces/malloclab").join(source),
            dir.join(sub).join("t.rep"),
        )
        .unwrap();
    }
    let html = dir.join("r.html");
    let (a, b) = (dir.join("a/t.rep"), dir.join("b/t.rep"));
    let o = quick_replay("tlsf")
        .args([&a, &b])
        .arg("--report")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = common::stdout(&o);
    let rows: Vec<&str> = table.lines().skip(1).take(2).collect();
    assert!(
        rows[0].starts_with(a.to_str().unwrap()) && rows[1].starts_with(b.to_str().unwrap()),
        "{table}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for t in [&a, &b] {
        let figure = format!("data-name=\"{}: heap map at peak\"", t.display());
        assert_eq!(page.matches(&figure).count(), 1, "{figure}");
    }
    every_chart_draws(&html);
}

#[test]
fn every_chart_of_a_study_report_draws_marks() {
    let html = scratch("study-report").join("r.html");
    let o = retype(&[
        "study",
        "--policy",
        "best-fit,blind-next-fit",
        "--workload",
        "app:mltest,uniform:seed=5,ops=400,free=30",
        "--report",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(every_chart_draws(&html), 2 * 7, "seven charts per workload");
}

/// `retype report` from a directory that is not the repository, with a trace
/// whose name is not UTF-8: the shipped data is found, the path kept as is.
#[test]
fn retype_report_draws_the_study_the_heaps_and_the_benchmarks() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = scratch("full-report");
    let csv = dir.join("results.csv");
    std::fs::write(
        &csv,
        "bench,allocator,rep,wall_s,rss_kib,ops_per_s\nlist,mimalloc,1,2.0,100,\nlist,retype,1,1.0,150,\nlist,mimalloc,2,4.0,100,\nlist,retype,2,1.0,150,\n",
    )
    .unwrap();
    let trace = dir.join(OsStr::from_bytes(b"short\xff.rep"));
    std::fs::copy(repo().join("traces/malloclab/short1-bal.rep"), &trace).unwrap();
    let html = dir.join("all.html");
    let run = |bench: &Path| {
        retype_cmd()
            .arg("report")
            .arg("--traces")
            .arg(&trace)
            .arg("-o")
            .arg(&html)
            .arg("--benchmarks")
            .arg(bench)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = run(&csv);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    for part in [
        "Table 4.5: application sequence 2",
        "utilization per trace and heap",
        "wall time ÷ mimalloc",
    ] {
        assert!(page.contains(part), "missing {part}");
    }
    every_chart_draws(&html);
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        "bench,allocator,rep,wall_s,rss_kib,ops_per_s\nlist,mimalloc,1,fast,100,\n",
    )
    .unwrap();
    let o = run(&bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.csv: line 2"), "{}", stderr(&o));
}

#[test]
fn bench_mm_report_draws_a_bar_per_policy_and_slab_count() {
    let html = scratch("bench-report").join("b.html");
    let o = retype(&[
        "bench",
        "mm",
        "--ops",
        "2000",
        "--slabs",
        "22,44",
        "--policy",
        "best-fit,first-fit",
        "--report",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    if let Some(browser) = chromium() {
        let marks = marks_in_browser(browser, &html);
        assert_eq!(
            marks["time per request"].as_u64(),
            Some(4),
            "two policies at two slab counts"
        );
    }
}
