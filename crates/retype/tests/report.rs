//! The HTML reports of `retype study`, `replay`, `bench mm` and `report`
//! render in a real browser and every chart draws.
//!
//! Needs Debian's chromium (installed by scripts/test); without it the browser
//! checks say so and are skipped, except in CI, where they fail.

mod common;

use std::path::Path;

use common::browser::Page;
use common::{
    chromium, json_lines, marks_in_browser, quick_replay, repo, retype, retype_cmd, scratch, stderr,
};
use serde_json::json;

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

/// `retype report --cheri F` draws each trace on each heap in CHERI mode, with
/// the figures `retype replay --cheri F --json` gives for the same run.
#[test]
fn retype_report_draws_the_heaps_in_cheri_mode() {
    let dir = scratch("cheri-report");
    let trace = repo().join("traces/malloclab/short1-bal.rep");
    let html = dir.join("cheri.html");
    let o = retype_cmd()
        .args(["report", "--cheri", "rv32", "--traces"])
        .arg(&trace)
        .arg("-o")
        .arg(&html)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Heaps in CHERI mode (rv32)"));
    let rows = json_lines(
        &quick_replay("best-fit,buddy")
            .args(["--json", "--cheri", "rv32"])
            .arg(&trace)
            .output()
            .unwrap(),
    );
    let mut padded = 0;
    for row in rows.iter().filter(|r| r["trace"] != "TOTAL") {
        let c = &row["cheri"];
        padded += c["padding"].as_u64().unwrap();
        let cells = format!(
            "<th>short1-bal.rep</th><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>",
            row["heap"].as_str().unwrap(),
            100.0 * row["util"].as_f64().unwrap(),
            100.0 * c["util"].as_f64().unwrap(),
            c["requests"],
            c["rounded"],
            c["realigned"],
            c["padding"],
            c["alignment_fragmentation"],
        );
        assert!(page.contains(&cells), "missing {cells}");
    }
    assert!(padded > 0, "RV32 pads short1-bal's large requests");
    every_chart_draws(&html);
}

/// `retype report` from a directory that is not the repository, with a trace
/// whose name is not UTF-8: the shipped data is found, the path kept as is;
/// the benchmarks and the protocol latencies are drawn from their files.
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
    let protocol = dir.join("protocol.jsonl");
    let o = retype(&[
        "bench",
        "protocol",
        "--json",
        "--caps",
        "256",
        "--samples",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&protocol, &o.stdout).unwrap();
    let html = dir.join("all.html");
    let run_with = |bench: &Path, protocol: &Path| {
        retype_cmd()
            .arg("report")
            .arg("--traces")
            .arg(&trace)
            .arg("-o")
            .arg(&html)
            .arg("--benchmarks")
            .arg(bench)
            .arg("--protocol")
            .arg(protocol)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let run = |bench: &Path| run_with(bench, &protocol);
    let o = run(&csv);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    for part in [
        "Table 4.5: application sequence 2",
        "utilization per trace and heap",
        "wall time ÷ mimalloc",
        "delete: latency against capabilities per node",
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
    let o = run_with(&csv, &bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.csv: line 1"), "{}", stderr(&o));
}

#[test]
fn protocol_bench_report_draws_every_chart() {
    let html = scratch("protocol-report").join("p.html");
    let o = retype(&[
        "bench",
        "protocol",
        "--caps",
        "256,512",
        "--samples",
        "5",
        "--report",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        every_chart_draws(&html),
        5 + 1 + 2,
        "latency against size per operation, the CNode sweep, two breakdowns"
    );
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

/// A slab count past the memory manager's limit is refused before anything is allocated
/// (it once allocated without bound), naming the limit.
#[test]
fn bench_mm_refuses_more_slabs_than_a_layout_may_hold() {
    let too_many = (retype_core::mm::Layout::MAX_SLABS + 1).to_string();
    for slabs in ["0", too_many.as_str(), "99999999999999"] {
        let o = retype(&["bench", "mm", "--ops", "10", "--slabs", slabs]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("from 1 to 1048576"), "{}", stderr(&o));
    }
}

/// Clicks every link of the table of contents and of the summary, each with
/// every part collapsed first, and returns the links that did not bring
/// their part or section to the top of the window, below the contents when
/// they are on top (or into the window, at the end of the page).
const LINKS_LAND: &str = r#"(() => {
  const missed = [];
  for (const a of document.querySelectorAll('nav#contents a, section#summary a')) {
    const id = decodeURIComponent(a.getAttribute("href").slice(1));
    document.querySelectorAll("details.part").forEach((d) => (d.open = false));
    window.scrollTo(0, 0);
    a.click();
    const r = document.getElementById(id).getBoundingClientRect();
    // On a narrow window the contents are a bar across the top: below it.
    const nav = document.querySelector("nav#contents").getBoundingClientRect();
    const top = nav.width >= innerWidth - 1 ? nav.bottom : 0;
    const end = window.scrollY + innerHeight >= document.documentElement.scrollHeight - 2;
    if (!(r.height > 0 && r.top >= top - 2 && (r.top <= top + 60 || (end && r.top < innerHeight)))) {
      missed.push(`${id}: top ${r.top}`);
    }
  }
  document.querySelectorAll("details.part").forEach((d) => (d.open = true));
  return missed;
})()"#;

/// Picks out the first series of the first line chart (hiding the others
/// with their legend keys), and returns where on the screen one of its
/// points is, with the lines its hover must show: series, x and y.
const A_LINE_POINT: &str = r#"(() => {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const div = [...document.querySelectorAll("div.plot")].find((d) => {
    const c = data.charts[+d.dataset.chart];
    return c.kind === "lines" && c.series.length >= 2;
  });
  const c = data.charts[+div.dataset.chart];
  div.querySelectorAll("button.key").forEach((k, i) => i > 0 && k.click());
  const svg = div.querySelector("svg"), pts = div.querySelector("polyline.mark").points;
  // The point farthest from its neighbours, so that it is the nearest one.
  const at = (k) => pts.getItem(k);
  let best = 1, gap = -1;
  for (let k = 1; k + 1 < pts.numberOfItems; k++) {
    const g = Math.min(Math.hypot(at(k).x - at(k - 1).x, at(k).y - at(k - 1).y),
                       Math.hypot(at(k).x - at(k + 1).x, at(k).y - at(k + 1).y));
    if (g > gap) { gap = g; best = k; }
  }
  div.scrollIntoView({ block: "center" });
  const p = at(best).matrixTransform(svg.getScreenCTM());
  const col = (k) => data.columns[c.cols[k]], s = c.series[0], f = retypeReport.fmt;
  const x = s.x === null ? best : col(s.x)[best];
  return { x: p.x, y: p.y, want: [s.name, `${c.x}: ${f(x)}`, `${c.y}: ${f(col(s.y)[best])}`] };
})()"#;

/// The tallest bar of the first bar chart: where it is, and the value its
/// hover must show.
const A_BAR: &str = r#"(() => {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const div = [...document.querySelectorAll("div.plot")].find((d) => data.charts[+d.dataset.chart].kind === "bars");
  const c = data.charts[+div.dataset.chart];
  const top = Math.max(...c.series.flatMap((s) => data.columns[c.cols[s.y]]));
  div.scrollIntoView({ block: "center" });
  const bar = [...div.querySelectorAll("rect.mark")].reduce((a, b) => (+b.getAttribute("y") < +a.getAttribute("y") ? b : a));
  const r = bar.getBoundingClientRect();
  return { x: r.x + r.width / 2, y: r.y + r.height / 2, want: [`${c.y}: ${retypeReport.fmt(top)}`] };
})()"#;

/// Hides the second series of the first chart that shows several, with its
/// legend key: its marks before, after, after showing it again, and the
/// marks of the others before and after.
const HIDE_A_SERIES: &str = r#"(() => {
  const div = [...document.querySelectorAll("div.plot")].find((d) => {
    const keys = [...d.querySelectorAll("button.key")];
    return keys.length >= 2 && keys.every((k) => k.getAttribute("aria-pressed") === "true");
  });
  const count = (sel) => div.querySelectorAll(sel).length;
  const key = div.querySelectorAll("button.key")[1];
  const before = [count('.mark[data-series="1"]'), count('.mark:not([data-series="1"])')];
  key.click();
  const hidden = [count('.mark[data-series="1"]'), count('.mark:not([data-series="1"])')];
  key.click();
  return { before, hidden, shown: count('.mark[data-series="1"]') };
})()"#;

/// The first line chart that shows all its series: where to drag across
/// its middle fifth, and its x axis's labels.
const A_LINE_CHART: &str = r#"(() => {
  const div = [...document.querySelectorAll("div.plot")].find((d) =>
    d.querySelector("polyline.mark") && [...d.querySelectorAll("button.key")].every((k) => k.getAttribute("aria-pressed") === "true"));
  div.id = "zoomed";
  div.scrollIntoView({ block: "center" });
  const r = div.querySelector("svg").getBoundingClientRect();
  return { from: [r.x + r.width * 0.4, r.y + r.height / 2], to: [r.x + r.width * 0.6, r.y + r.height / 2] };
})()"#;

/// The x axis's labels of the chart A_LINE_CHART picked, and whether its
/// "reset zoom" button shows.
const ZOOM_STATE: &str = r#"(() => {
  const div = document.getElementById("zoomed");
  const xs = [...div.querySelectorAll("g.axes text[text-anchor=middle]:not(.label)")].map((t) => t.textContent);
  return { xs, reset: !div.querySelector("button.reset").hidden };
})()"#;

const TIP: &str =
    "(() => { const t = document.getElementById('tip'); return t.hidden ? '' : t.textContent; })()";

/// The report as a new user opens it: `retype report` run outside the
/// repository finds the shipped data and says where, and in headless
/// Chromium the page runs without script errors, every link of its contents
/// and summary lands on its part, every chart draws, hovering a point or a
/// bar shows its value, a legend key hides its series, dragging across a
/// line chart zooms it, and nothing is wider
/// than a 1024-pixel or a phone-sized window.
#[test]
fn the_report_reads_and_answers_in_a_browser() {
    let dir = scratch("browser-report");
    let html = dir.join("report.html");
    let o = retype_cmd()
        .args(["report", "-o"])
        .arg(&html)
        .current_dir(&dir)
        .env_remove("RETYPE_DATA")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("study logs from") && stderr(&o).contains("traces replayed from"),
        "says which data it used: {}",
        stderr(&o)
    );
    let Some(browser) = chromium() else { return };
    let mut page = Page::open(browser, &html, 1024, 900);
    assert_eq!(page.errors(), Vec::<String>::new(), "script errors");

    let overflow = "document.documentElement.scrollWidth - window.innerWidth";
    assert_eq!(page.eval(overflow), json!(0), "wider than 1024 px");

    assert_eq!(
        page.eval(LINKS_LAND),
        json!([]),
        "links that missed their part"
    );

    let marks = page.eval(common::MARKS);
    let charts = page.eval("document.querySelectorAll('figure.chart').length");
    assert_eq!(json!(marks.as_object().unwrap().len()), charts);
    for (name, n) in marks.as_object().unwrap() {
        assert!(n.as_u64().unwrap() > 0, "chart {name} drew no marks");
    }

    for pick in [A_LINE_POINT, A_BAR] {
        let p = page.eval(pick);
        page.hover(p["x"].as_f64().unwrap(), p["y"].as_f64().unwrap());
        let tip = page.eval(TIP);
        for want in p["want"].as_array().unwrap() {
            assert!(
                tip.as_str().unwrap().contains(want.as_str().unwrap()),
                "hover shows {tip} instead of {want}"
            );
        }
    }

    let chart = page.eval(A_LINE_CHART);
    let at = |p: &serde_json::Value| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
    let before = page.eval(ZOOM_STATE);
    page.drag(at(&chart["from"]), at(&chart["to"]));
    let after = page.eval(ZOOM_STATE);
    assert_eq!(before["reset"], json!(false));
    assert_eq!(after["reset"], json!(true), "zoomed: {after}");
    assert_ne!(
        before["xs"], after["xs"],
        "the x axis covers the range dragged"
    );

    let h = page.eval(HIDE_A_SERIES);
    assert!(h["before"][0].as_u64().unwrap() > 0, "{h}");
    assert_eq!(h["hidden"][0], json!(0), "a hidden series keeps marks: {h}");
    assert_eq!(h["hidden"][1], h["before"][1], "the others stay: {h}");
    assert_eq!(h["shown"], h["before"][0], "shown again: {h}");

    page.resize(390, 844);
    assert_eq!(page.eval(overflow), json!(0), "wider than a phone");
    assert_eq!(
        page.eval(LINKS_LAND),
        json!([]),
        "links that missed on a phone"
    );
    assert_eq!(page.errors(), Vec::<String>::new(), "script errors");
}

/// `--traces DIR` takes a data directory like the repository's `traces/`:
/// its logs for the study and its malloc-lab traces, and says so.
#[test]
fn retype_report_takes_a_data_directory() {
    let dir = scratch("data-dir");
    let data = std::fs::canonicalize(repo().join("traces")).unwrap();
    let o = retype_cmd()
        .args(["report", "-o", "r.html", "--traces"])
        .arg(&data)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let said = format!(
        "study logs from {}, 4 traces replayed",
        data.join("cantrip/logs").display()
    );
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(page.contains("perl.rep: heap map at peak"));
}
