//! The full report's size and how long headless Chromium takes to open it.
//!
//! Builds `retype report` from the shipped data (and, when given, a
//! `bench/run.sh` results file), then opens it N times, each in a fresh
//! headless Chromium at 1400 × 900, and reads the page's navigation timing:
//! from the start of navigation to the end of the load event, which covers
//! parsing the page and drawing every chart (the page's script runs before
//! the load event). Prints the size, the median, the fastest and the slowest.
//!
//! `cargo bench -p retype --bench report_load [-- --runs N --benchmarks CSV]`

#[path = "../tests/common/browser.rs"]
#[allow(dead_code)]
mod browser;

use std::process::Command;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let runs: usize = arg("--runs").map_or(7, |n| n.parse().expect("--runs N"));
    let dir = std::env::temp_dir().join(format!("retype-report-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let mut report = Command::new(env!("CARGO_BIN_EXE_retype"));
    report.arg("report").arg("-o").arg(&html);
    if let Some(csv) = arg("--benchmarks") {
        report.args(["--benchmarks", csv]);
    }
    assert!(report.status().unwrap().success(), "retype report failed");
    let size = std::fs::metadata(&html).unwrap().len();
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let mut page = browser::Page::open("chromium", &html, 1400, 900);
            page.eval("(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()")
                .as_f64()
                .unwrap()
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "report: {size} bytes ({:.2} MB); load in headless Chromium over {runs} runs: median {:.0} ms (fastest {:.0}, slowest {:.0})",
        size as f64 / 1e6,
        ms[runs / 2],
        ms[0],
        ms[runs - 1]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
