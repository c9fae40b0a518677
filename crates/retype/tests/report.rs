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
    let marks = marks.as_object().unwrap();
    assert_eq!(marks.len(), charts, "every chart was checked");
    for (name, n) in marks {
        assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
