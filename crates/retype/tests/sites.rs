//! Call stacks end to end: programs recorded with `retype record`, their
//! stacks symbolized by `retype trace sites`, `leaks`, `diff`, `flamegraph`
//! and `export`, checked against what the programs are known to do, against
//! their binaries' symbol tables and against valgrind memcheck's leak count.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message;
use retype::sites::pprof::Profile;
use retype::sites::symbols::Symbolizer;
use serde_json::Value;

use common::recording::{compile, record};
use common::{retype_cmd, scratch, stderr, stdout};

/// `retype ARGS…` in `dir`; its stdout, or a panic with its stderr.
fn retype_ok(dir: &Path, args: &[&str]) -> String {
    let o = retype_cmd().args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "retype {args:?}: {}", stderr(&o));
    stdout(&o)
}

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&retype_ok(dir, args)).expect("one JSON document")
}

/// Every frame of every site of `trace`, by whole stack.
fn stack_frames(dir: &Path, trace: &str) -> Vec<Value> {
    let v = json(dir, &["trace", "sites", trace, "--by", "stack", "--json"]);
    v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["frames"].as_array().unwrap().clone())
        .collect()
}

/// `sites.c` compiled and recorded in a fresh directory: (dir, program, trace).
fn recorded_sites(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = scratch(name);
    let exe = compile("sites.c", &dir);
    let (t, o) = record(&dir, "s.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!t.stacks.is_empty(), "recorded with stacks by default");
    (dir.clone(), exe, dir.join("s.rtr"))
}

/// The line of `sites.c` that holds `text`.
fn source_line(text: &str) -> u64 {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../retype-recorder/tests/c/sites.c"),
    )
    .unwrap();
    src.lines()
        .position(|l| l.contains(text))
        .expect("in sites.c") as u64
        + 1
}

/// A site's figures: [calls, bytes, peak bytes, leaked bytes, leaked blocks].
fn figures(site: &Value) -> [u64; 5] {
    [
        "calls",
        "bytes_allocated",
        "peak_live_bytes",
        "leaked_bytes",
        "leaked_blocks",
    ]
    .map(|k| site[k].as_u64().unwrap_or_else(|| panic!("{k} in {site}")))
}

#[test]
fn three_known_sites_and_a_known_leak_come_out_exactly() {
    let (dir, _, t) = recorded_sites("three");
    let t = t.to_str().unwrap();
    // By function: exactly the program's three sites, with their calls,
    // bytes, share of the peak and leaks (see the comment in sites.c).
    let v = json(&dir, &["trace", "sites", t, "--json"]);
    let sites = v["sites"].as_array().unwrap();
    let names: Vec<&str> = sites.iter().map(|s| s["site"].as_str().unwrap()).collect();
    assert_eq!(names, ["table", "names", "leaky"], "{v}");
    assert_eq!(figures(&sites[0]), [10, 10_240, 10_240, 1_024, 1]);
    assert_eq!(figures(&sites[1]), [100, 3_200, 3_200, 0, 0]);
    assert_eq!(figures(&sites[2]), [5, 1_000, 0, 1_000, 5]);
    assert_eq!(figures(&v["total"]), [115, 14_440, 13_440, 2_024, 6]);
    // By line: the source lines of the three calls.
    let v = json(&dir, &["trace", "sites", t, "--by", "line", "--json"]);
    let lines: Vec<(String, u64)> = v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = &s["frames"][0];
            let file = f["file"].as_str().unwrap();
            assert!(file.ends_with("sites.c"), "{f}");
            (
                f["function"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("table".to_string(), source_line("= calloc(8, 128);")),
            ("names".to_string(), source_line("= malloc(32);")),
            ("leaky".to_string(), source_line("= malloc(200);")),
        ]
    );
    // By stack: each site called from main, each stack walked to _start.
    let v = json(&dir, &["trace", "sites", t, "--by", "stack", "--json"]);
    for s in v["sites"].as_array().unwrap() {
        assert_eq!(s["frames"][1]["function"], "main", "{s}");
        let frames = s["frames"].as_array().unwrap();
        assert_eq!(frames.last().unwrap()["function"], "_start", "{s}");
        assert_eq!(s["truncated"], false);
    }
    // The leaks: table's kept block and leaky's five, whole stacks.
    let v = json(&dir, &["trace", "leaks", t, "--json"]);
    assert_eq!(
        (v["leaked_bytes"].as_u64(), v["leaked_blocks"].as_u64()),
        (Some(2024), Some(6))
    );
    let leaks: Vec<(u64, u64, &str)> = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["bytes"].as_u64().unwrap(),
                l["blocks"].as_u64().unwrap(),
                l["frames"][0]["function"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(leaks, [(1024, 1, "table"), (1000, 5, "leaky")]);
    // Text says the same.
    let text = retype_ok(&dir, &["trace", "leaks", t]);
    assert!(
        text.contains("2,024 bytes in 6 blocks never freed"),
        "{text}"
    );
}

/// valgrind memcheck's "definitely lost" and "still reachable" bytes.
fn memcheck_lost_and_reachable(exe: &Path) -> (u64, u64) {
    let o = Command::new("valgrind")
        .args([
            "--leak-check=full",
            "--show-leak-kinds=all",
            "--run-libc-freeres=no",
        ])
        .arg(exe)
        .output()
        .expect("valgrind is installed (scripts/test installs it)");
    let text = String::from_utf8_lossy(&o.stderr);
    let bytes = |what: &str| {
        let line = text
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} in valgrind's output:\n{text}"));
        let n = line
            .split(what)
            .nth(1)
            .unwrap()
            .trim()
            .split(' ')
            .next()
            .unwrap();
        n.replace(',', "").parse::<u64>().unwrap()
    };
    for other in ["indirectly lost:", "possibly lost:"] {
        assert_eq!(bytes(other), 0, "the program loses nothing in other ways");
    }
    (bytes("definitely lost:"), bytes("still reachable:"))
}

#[test]
fn leaked_bytes_are_memchecks_definitely_lost_plus_still_reachable() {
    let (dir, exe, t) = recorded_sites("memcheck");
    let (lost, reachable) = memcheck_lost_and_reachable(&exe);
    assert_eq!((lost, reachable), (1000, 1024), "sites.c's own leak");
    let v = json(&dir, &["trace", "leaks", t.to_str().unwrap(), "--json"]);
    assert_eq!(v["leaked_bytes"].as_u64(), Some(lost + reachable));
}

#[test]
fn a_stripped_binary_gives_module_and_offset_inside_the_right_functions() {
    let dir = scratch("stripped");
    let exe = compile("sites.c", &dir);
    let stripped = dir.join("sites-stripped");
    std::fs::copy(&exe, &stripped).unwrap();
    assert!(Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .status()
        .unwrap()
        .success());
    let (_, o) = record(&dir, "st.rtr", &[], &[stripped.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Where the unstripped twin (same code, same addresses) puts each function.
    let nm = Command::new("nm").arg("-S").arg(&exe).output().unwrap();
    let nm = stdout(&nm);
    let range = |name: &str| {
        let l = nm
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap();
        let f: Vec<u64> = l
            .split(' ')
            .take(2)
            .map(|h| u64::from_str_radix(h, 16).unwrap())
            .collect();
        f[0]..f[0] + f[1]
    };
    let v = json(&dir, &["trace", "sites", "st.rtr", "--json"]);
    let sites = v["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 3, "{v}");
    for (site, function) in sites.iter().zip(["table", "names", "leaky"]) {
        let f = &site["frames"][0];
        assert_eq!(f["module"], "sites-stripped", "{f}");
        let offset = f["offset"].as_u64().unwrap();
        assert_eq!(site["site"], format!("sites-stripped+{offset:#x}"));
        // The return address points just after the call, inside its function.
        assert!(range(function).contains(&(offset - 1)), "{function}: {f}");
    }
}

#[test]
fn a_cpp_program_is_symbolized_with_demangled_names() {
    let dir = scratch("cpp");
    let exe = compile("widgets.cpp", &dir);
    let (_, o) = record(&dir, "w.rtr", &[], &[exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = stack_frames(&dir, "w.rtr");
    let functions: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    for want in [
        "shapes::Widget::Widget(int)",
        "shapes::make_many<shapes::Widget>(int)",
        "operator new(",
    ] {
        assert!(
            functions.iter().any(|f| f.contains(want)),
            "no {want} in {functions:#?}"
        );
    }
    assert!(
        !functions.iter().any(|f| f.starts_with("_Z")),
        "a mangled name: {functions:#?}"
    );
    // By function, the site is the code that called `new`, never `operator new`.
    let v = json(&dir, &["trace", "sites", "w.rtr", "--json"]);
    assert!(v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| !s["site"].as_str().unwrap().starts_with("operator new")));
}

/// A Rust program: `retype` itself reading a trace.
#[test]
fn a_rust_program_is_symbolized_with_demangled_names() {
    let dir = scratch("rust");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../retype-trace/tests/data/sites-v1.rtr");
    let retype = env!("CARGO_BIN_EXE_retype");
    let (_, o) = record(
        &dir,
        "r.rtr",
        &[],
        &[retype, "trace", "info", fixture.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = stack_frames(&dir, "r.rtr");
    let functions: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert!(
        functions
            .iter()
            .any(|f| f.starts_with("retype_trace::trace::Trace::read")),
        "{functions:#?}"
    );
    let mangled = |f: &&&str| f.starts_with("_ZN") || f.starts_with("_R");
    assert!(!functions.iter().any(|f| mangled(&f)), "{functions:#?}");
}

#[test]
fn python3_native_frames_are_cpython_functions() {
    let dir = scratch("python");
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = stdout(&python).trim().to_string();
    let (_, o) = record(
        &dir,
        "py.rtr",
        &[],
        &[&python, "-c", "import json; json.dumps(list(range(20000)))"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = stack_frames(&dir, "py.rtr");
    let functions: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .filter(|f| !f.contains("+0x"))
        .collect();
    // The interpreter's evaluation of the -c code, by the C API's own name.
    assert!(functions.contains(&"PyEval_EvalCode"), "{functions:#?}");
    assert!(
        functions.len() * 4 >= frames.len() * 3,
        "{} of {} frames named",
        functions.len(),
        frames.len()
    );
}

#[test]
fn flame_graphs_collapsed_stacks_and_pprof_hold_the_sites() {
    let (dir, _, t) = recorded_sites("export");
    let t = t.to_str().unwrap();
    retype_ok(&dir, &["trace", "flamegraph", t, "-o", "f.svg"]);
    let svg = std::fs::read_to_string(dir.join("f.svg")).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "an SVG");
    for name in ["table", "names", "leaky", "bytes allocated"] {
        assert!(svg.contains(name), "{name} in the flame graph");
    }
    // Collapsed stacks: one line per stack, main's callee last, its bytes.
    for (weight, want) in [
        (
            "allocated",
            vec![";main;leaky 1000", ";main;names 3200", ";main;table 10240"],
        ),
        ("peak", vec![";main;names 3200", ";main;table 10240"]),
        ("leaked", vec![";main;leaky 1000", ";main;table 1024"]),
    ] {
        retype_ok(
            &dir,
            &["trace", "export", t, "-o", "s.folded", "--weight", weight],
        );
        let text = std::fs::read_to_string(dir.join("s.folded")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), want.len(), "{weight}: {text}");
        for (l, w) in lines.iter().zip(&want) {
            assert!(
                l.ends_with(w) && !l.starts_with(';'),
                "{weight}: {l} ≠ …{w}"
            );
        }
    }
    // pprof: the gzipped profile decodes, with the six figures per stack.
    retype_ok(&dir, &["trace", "export", t, "-o", "s.pb.gz"]);
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(dir.join("s.pb.gz")).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let p = Profile::decode(&raw[..]).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    let types: Vec<&str> = p.sample_type.iter().map(|t| s(t.r#type)).collect();
    assert_eq!(
        types,
        [
            "alloc_objects",
            "alloc_space",
            "peak_objects",
            "peak_space",
            "leaked_objects",
            "leaked_space"
        ]
    );
    let sum = |k: usize| p.sample.iter().map(|x| x.value[k]).sum::<i64>();
    assert_eq!(
        [sum(0), sum(1), sum(3), sum(5)],
        [115, 14_440, 13_440, 2_024]
    );
    let function = |loc: u64| {
        let l = p.location.iter().find(|l| l.id == loc).unwrap();
        let f = p
            .function
            .iter()
            .find(|f| f.id == l.line[0].function_id)
            .unwrap();
        s(f.name).to_string()
    };
    let mut sites: Vec<String> = p
        .sample
        .iter()
        .map(|x| function(x.location_id[0]))
        .collect();
    sites.sort();
    assert_eq!(sites, ["leaky", "names", "table"]);
    // pprof itself reads it, where Go is installed.
    match Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=leaked_space"])
        .arg(dir.join("s.pb.gz"))
        .output()
    {
        Ok(o) if o.status.success() => {
            let top = stdout(&o);
            assert!(
                top.contains("2024B") && top.contains("leaky") && top.contains("table"),
                "{top}"
            );
        }
        _ => {
            eprintln!("go tool pprof is not available: the profile was checked by decoding it only")
        }
    }
}

#[test]
fn diff_compares_two_recordings_site_by_site() {
    let dir = scratch("diff");
    let exe = compile("mt_alloc.c", &dir);
    for (name, iterations) in [("a.rtr", "1000"), ("b.rtr", "3000")] {
        let (_, o) = record(&dir, name, &[], &[exe.to_str().unwrap(), "1", iterations]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let calls = |file: &str| -> std::collections::HashMap<String, i64> {
        json(&dir, &["trace", "sites", file, "--json"])["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["site"].as_str().unwrap().to_string(),
                    s["calls"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let (a, b) = (calls("a.rtr"), calls("b.rtr"));
    let v = json(&dir, &["trace", "diff", "a.rtr", "b.rtr", "--json"]);
    let rows = v["sites"].as_array().unwrap();
    let work = rows
        .iter()
        .find(|r| r["site"] == "work")
        .expect("the workers' site");
    assert!(work["delta"]["calls"].as_i64().unwrap() > 0);
    for r in rows {
        let site = r["site"].as_str().unwrap();
        let want = b.get(site).copied().unwrap_or(0) - a.get(site).copied().unwrap_or(0);
        assert_eq!(r["delta"]["calls"].as_i64(), Some(want), "{site}");
    }
    // A recording against itself changes nothing.
    let v = json(&dir, &["trace", "diff", "a.rtr", "a.rtr", "--json"]);
    assert!(v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["delta"]["bytes_allocated"] == 0));
}

#[test]
fn stack_depth_and_no_stacks() {
    let dir = scratch("depth");
    let exe = compile("sites.c", &dir);
    let exe = exe.to_str().unwrap();
    let (t, _) = record(&dir, "d2.rtr", &["--stack-depth", "2"], &[exe]);
    assert_eq!(t.meta_value("stack_depth"), Some("2"));
    assert!(t.stacks.iter().all(|s| s.frames.len() <= 2));
    assert!(
        t.stacks.iter().any(|s| s.truncated),
        "main's callers are cut off"
    );
    let (t, _) = record(&dir, "none.rtr", &["--no-stacks"], &[exe]);
    assert_eq!(t.meta_value("stack_depth"), Some("0"));
    assert!(t.stacks.is_empty() && t.modules.is_empty());
    assert!(t.events.iter().all(|e| e.stack == 0));
    // Sites need stacks, and say so; so does a trace from before them.
    for trace in [
        dir.join("none.rtr"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../retype-trace/tests/data/sites-v1.rtr"),
    ] {
        let o = retype_cmd()
            .args(["trace", "sites"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("recorded without call stacks"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn the_report_draws_the_flame_graph_and_the_top_sites() {
    let (dir, _, t) = recorded_sites("report");
    let t = t.to_str().unwrap();
    retype_ok(&dir, &["trace", "sites", t, "--report", "sites.html"]);
    let html = std::fs::read_to_string(dir.join("sites.html")).unwrap();
    assert!(html.contains("Allocation sites of recorded programs"));
    assert!(
        html.contains("table (c/sites.c:"),
        "the top-sites table names the line"
    );
    if let Some(browser) = common::chromium() {
        let marks = common::marks_in_browser(browser, &dir.join("sites.html"));
        let flame = marks
            .iter()
            .find(|(k, _)| k.ends_with("flame graph of bytes allocated"))
            .unwrap_or_else(|| panic!("no flame graph in {marks:?}"));
        // _start, the libc frames, main and the three sites at least.
        assert!(flame.1.as_u64().unwrap() >= 6, "{marks:?}");
    }
}

#[test]
fn forked_children_and_exec_images_name_their_own_stacks_and_objects() {
    let dir = scratch("images");
    let exe = compile("lifecycle.c", &dir);
    let exe = exe.to_str().unwrap();
    // A fork child's file has its own stacks and objects: its 40 marker calls.
    let (_, o) = record(&dir, "f.rtr", &["--json"], &[exe, "fork", "40"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let child = report["child_traces"][0].as_str().unwrap().to_string();
    for file in ["f.rtr", child.as_str()] {
        let v = json(&dir, &["trace", "sites", file, "--json"]);
        let markers = v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["site"] == "marker_allocations")
            .unwrap_or_else(|| panic!("{file}: {v}"));
        assert_eq!(markers["calls"], 40, "{file}");
    }
    // After an exec, the new image's stacks are looked up in its own objects:
    // the shell's, then sites.c's.
    let sites = compile("sites.c", &dir);
    let command = format!("exec {}", sites.display());
    let (t, o) = record(&dir, "e.rtr", &[], &["sh", "-c", &command]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!t.segments.is_empty(), "two program images with events");
    let shell = t.modules[0].path.rsplit('/').next().unwrap().to_string();
    let mut sym = Symbolizer::new(&t);
    let mut modules = |segment: u32| {
        let mut m: Vec<String> = t
            .stacks
            .iter()
            .filter(|s| s.segment == segment)
            .flat_map(|s| sym.stack(s))
            .map(|f| f.module)
            .collect();
        m.sort();
        m.dedup();
        m
    };
    let (first, second) = (modules(0), modules(1));
    assert!(first.contains(&shell), "{shell}: {first:?}");
    assert!(second.contains(&"sites".to_string()), "{second:?}");
    assert!(!second.contains(&shell), "{second:?}");
    let v = json(&dir, &["trace", "sites", "e.rtr", "--json"]);
    let table = v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == "table");
    assert_eq!(
        table.map(figures),
        Some([10, 10_240, 10_240, 1_024, 1]),
        "{v}"
    );
}
