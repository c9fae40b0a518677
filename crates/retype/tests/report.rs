//! `retype study --report` renders in a real browser and every chart draws.
//!
//! Needs Debian's chromium (installed by scripts/test); without it the test
//! says so and passes only when not running in CI.

use std::path::Path;
use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Loads `html` in the browser and returns each chart's count of drawn marks.
fn marks_in_browser(browser: &str, html: &Path) -> serde_json::Map<String, serde_json::Value> {
    let dom = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let marks = dom
        .split("data-marks=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page's check ran");
    let marks: serde_json::Value = serde_json::from_str(&marks.replace("&quot;", "\"")).unwrap();
    marks.as_object().unwrap().clone()
}

#[test]
fn every_chart_of_a_replay_report_draws_marks() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (scripts/test installs it)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("retype-replay-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(env!("CARGO_BIN_EXE_retype"))
        .args([
            "replay",
            "traces/malloclab/perl.rep",
            "traces/malloclab/short1-bal.rep",
            "--heap",
            "best-fit,buddy",
            "--runs",
            "1",
            "--min-time-ms",
            "0",
        ])
        .arg("--report")
        .arg(&html)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let charts = page.matches("<figure class=\"chart\"").count();
    assert_eq!(
        charts,
        1 + 2 * 3,
        "utilization, then map, sizes and lifetimes per trace"
    );
    let marks = marks_in_browser(browser, &html);
    assert_eq!(marks.len(), charts);
    for (name, n) in &marks {
        assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_chart_of_a_study_report_draws_marks() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (scripts/test installs it)"
        );
        eprintln!("chromium not installed: skipping the browser check");
        return;
    };
    let dir = std::env::temp_dir().join(format!("retype-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let o = Command::new(env!("CARGO_BIN_EXE_retype"))
        .args([
            "study",
            "--policy",
            "best-fit,blind-next-fit",
            "--workload",
            "app:mltest,uniform:seed=5,ops=400,free=30",
        ])
        .arg("--report")
        .arg(&html)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the report loads nothing from the network"
    );
    let charts = page.matches("<figure class=\"chart\"").count();
    assert_eq!(charts, 2 * 7, "seven charts per workload");
    let marks = marks_in_browser(browser, &html);
    assert_eq!(marks.len(), charts, "every chart was checked");
    for (name, n) in &marks {
        assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn retype_report_draws_the_study_the_heaps_and_the_benchmarks() {
    let dir = std::env::temp_dir().join(format!("retype-full-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("results.csv");
    std::fs::write(
        &csv,
        "bench,allocator,rep,wall_s,rss_kib,ops_per_s\nlist,mimalloc,1,2.0,100,\nlist,retype,1,1.0,150,\nlist,mimalloc,2,4.0,100,\nlist,retype,2,1.0,150,\n",
    )
    .unwrap();
    let html = dir.join("all.html");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run = |bench: &Path| {
        Command::new(env!("CARGO_BIN_EXE_retype"))
            .args([
                "report",
                "--traces",
                "traces/malloclab/short1-bal.rep",
                "-o",
            ])
            .arg(&html)
            .arg("--benchmarks")
            .arg(bench)
            .current_dir(&root)
            .output()
            .unwrap()
    };
    let o = run(&csv);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    for part in [
        "Table 4.5: application sequence 2",
        "utilization per trace and heap",
        "wall time ÷ mimalloc",
    ] {
        assert!(page.contains(part), "missing {part}");
    }
    if let Some(browser) = chromium() {
        let marks = marks_in_browser(browser, &html);
        assert_eq!(marks.len(), page.matches("<figure class=\"chart\"").count());
        for (name, n) in &marks {
            assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
        }
    }
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        "bench,allocator,rep,wall_s,rss_kib,ops_per_s\nlist,mimalloc,1,fast,100,\n",
    )
    .unwrap();
    let o = run(&bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.csv: line 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_mm_report_draws_a_bar_per_policy_and_slab_count() {
    let dir = std::env::temp_dir().join(format!("retype-bench-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("b.html");
    let o = Command::new(env!("CARGO_BIN_EXE_retype"))
        .args([
            "bench",
            "mm",
            "--ops",
            "2000",
            "--slabs",
            "22,44",
            "--policy",
            "best-fit,first-fit",
            "--report",
        ])
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    if let Some(browser) = chromium() {
        let marks = marks_in_browser(browser, &html);
        assert_eq!(
            marks["time per request"].as_u64(),
            Some(4),
            "two policies at two slab counts"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}
