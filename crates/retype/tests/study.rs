//! The `retype study` command as a user runs it.

mod common;

use common::{json_lines, retype, stdout};

const LOGS: &str = "traces/cantrip/logs";

#[test]
fn json_has_the_documented_keys_per_workload_and_policy() {
    let o = retype(&[
        "study",
        "--policy",
        "best-fit,class-fit:lifted",
        "--workload",
        "uniform:seed=3,ops=300,free=40,app:hello",
        "--json",
    ]);
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 4);
    assert!(
        o.stderr.is_empty(),
        "no progress bar when stderr is not a terminal"
    );
    for key in [
        "workload",
        "policy",
        "ops",
        "peak_frag_total_kib",
        "avg_frag_total_kib",
        "peak_frag_watermark_kib",
        "peak_frag_alignment_kib",
        "slab_resets",
        "ooms",
        "failed_retypes",
        "peak_bytes_in_use",
    ] {
        assert!(rows.iter().all(|r| r.get(key).is_some()), "missing {key}");
    }
    assert_eq!(rows[1]["watermark"], "lifted");
    // The total peak is the peak of the sum: never above the sum of the peaks.
    for r in &rows {
        let (t, w, a) = (
            r["peak_frag_total_kib"].as_f64().unwrap(),
            r["peak_frag_watermark_kib"].as_f64().unwrap(),
            r["peak_frag_alignment_kib"].as_f64().unwrap(),
        );
        assert!(t <= w + a + 1e-9 && t >= w.max(a) - 1e-9, "{r}");
    }
}

/// Replaying a log under the policy that made it reproduces the log's own
/// counters after every request: the applications, the sequences and the
/// 64 % run. mltest frees its model as one descriptor over three slabs, and
/// the sequences free applications while others run: they match only under
/// the logs' accounting (`Quirk::SplitFreeKeepsBytes`).
#[test]
fn logs_without_ambiguity_are_reproduced_exactly() {
    for (dir, policy) in [("best_fit", "best-fit"), ("next_fit", "blind-next-fit")] {
        for run in [
            "apps_standalone_{}_app_name_hello",
            "apps_standalone_{}_app_name_timer",
            "apps_standalone_{}_app_name_mltest",
            "apps_sequential_{}_sequence_1",
            "apps_sequential_{}_sequence_2",
            "apps_sequential_{}_sequence_3",
            "random_uniform_{}_seed_42_count_1000_dealloc_chance_64",
        ] {
            let log = format!("log:{LOGS}/{dir}/{}.log", run.replace("{}", dir));
            let rows = json_lines(&retype(&[
                "study",
                "--policy",
                policy,
                "--workload",
                &log,
                "--json",
            ]));
            assert_eq!(rows[0]["log_exact_fraction"].as_f64(), Some(1.0), "{log}");
        }
    }
}

/// Table 4.2's sequence 1 built from the four applications is the request
/// sequence the thesis's sequence-1 log recorded.
#[test]
fn sequence_one_from_the_applications_matches_its_log() {
    let log = format!("log:{LOGS}/best_fit/apps_sequential_best_fit_sequence_1.log");
    let rows = json_lines(&retype(&[
        "study",
        "--policy",
        "best-fit,blind-next-fit",
        "--workload",
        &format!("seq:1,{log}"),
        "--json",
    ]));
    for key in [
        "ops",
        "peak_bytes_in_use",
        "peak_frag_total_kib",
        "avg_frag_total_kib",
        "slab_resets",
        "bytes_requested",
    ] {
        assert_eq!(rows[0][key], rows[2][key], "best-fit {key}");
        assert_eq!(rows[1][key], rows[3][key], "blind-next-fit {key}");
    }
}

#[test]
fn study_cantrip_prints_its_summary_first_and_the_tables_with_verbose() {
    let policies = "best-fit,blind-next-fit,class-fit";
    let o = retype(&["study", "cantrip", "--policy", policies]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = stdout(&o);
    let first = summary.lines().next().unwrap();
    let (matched, of) = first
        .split_once(" logs reproduced exactly")
        .and_then(|(head, _)| head.rsplit_once(": ")?.1.split_once(" of "))
        .expect("the first line says how many logs are matched");
    assert_eq!(matched, of, "every log matched: {first}");
    for t in [
        "Table 4.3/4.4: uniform, seed 42, 1000 requests, 16 % frees",
        "Table 4.5: application sequence 3",
        "Standalone application mltest",
    ] {
        assert!(summary.contains(t), "missing {t}");
    }
    // Table 4.3's 16 % run: next fit's peak total 1584.36 KiB, ours and the thesis's.
    assert!(summary.contains("blind-next-fit: 1584.36 / 706.98 [1584.36 / 706.98]"));
    assert!(summary.contains("retype study cantrip --verbose"));
    assert!(
        !summary.contains("Exact per-op agreement"),
        "the detail waits for --verbose"
    );

    let o = retype(&["study", "cantrip", "--policy", policies, "--verbose"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    assert!(out.starts_with(first), "the summary comes first");
    // Table 4.3's best fit, 16 %: peak watermarking 553.80 KiB, printed in the thesis column.
    assert!(out.contains("553.80") && out.contains("(thesis)"));
    assert!(out.contains("Exact per-op agreement with the logs"));
    // The quirks the comparison followed are named, the figures are the thesis's.
    assert!(
        out.contains("accounting: the figures follow the thesis's definitions")
            && out.contains("a freed descriptor spanning several slabs"),
        "no accounting line"
    );
}

#[test]
fn csv_holds_one_row_per_op() {
    let dir = std::env::temp_dir().join(format!("retype-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("series.csv");
    let o = retype(&[
        "study",
        "--policy",
        "next-fit",
        "--workload",
        "app:timer",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines().count(),
        1 + 18,
        "header and the 18 requests of timer"
    );
    assert!(text.starts_with("workload,policy,op,outcome,bytes_in_use"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_input_is_refused_clearly() {
    let dir = std::env::temp_dir().join(format!("retype-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_log = dir.join("bad.log");
    std::fs::write(&bad_log, "replay_app hello best_fit\nx [output] {'bytes in-use': 16, 'slab resets': 0,'untyped_too_small': 0, 'oom': zero, 'bytes free': 1, 'bytes requested': 16, 'lhs fragmentation': 0, 'in-between fragmentation': 0, 'objs in-use': 1}\n").unwrap();
    let too_big = dir.join("big.txt");
    std::fs::write(&too_big, "alloc 0 untyped/20\n").unwrap();
    let zero = dir.join("zero.txt");
    std::fs::write(&zero, "alloc 0 page*0\n").unwrap();
    let stats = dir.join("run.log");
    let hello = common::repo()
        .join(LOGS)
        .join("best_fit/apps_standalone_best_fit_app_name_hello.log");
    std::fs::copy(hello, &stats).unwrap();
    std::fs::write(dir.join("memory_stats_run.log"), "[output] {'idx': many}\n").unwrap();
    let bits = dir.join("bits.txt");
    std::fs::write(&bits, "alloc 0 untyped/2\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--policy".into(), "fastest-fit".into()],
            "unknown policy \"fastest-fit\"",
        ),
        (
            vec!["--workload".into(), "zipf:1".into()],
            "unknown workload",
        ),
        (
            vec!["--workload".into(), "seq:4".into()],
            "unknown sequence",
        ),
        (
            vec!["--layout".into(), "4096,1000".into()],
            "not a power of two",
        ),
        (
            vec!["--workload".into(), format!("log:{}", bad_log.display())],
            "bad.log: line 2",
        ),
        (
            vec!["--workload".into(), format!("script:{}", too_big.display())],
            "do not fit the largest slab",
        ),
        (
            vec!["--workload".into(), format!("script:{}", zero.display())],
            "count 0",
        ),
        (
            vec!["--workload".into(), format!("script:{}", bits.display())],
            "bad size bits",
        ),
        (
            vec!["--workload".into(), format!("log:{}", stats.display())],
            "memory_stats_run.log",
        ),
        (
            vec!["--workload".into(), "log:/nonexistent.log".into()],
            "cannot read /nonexistent.log",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["study".to_string()];
        all.extend(args.clone());
        let o = retype(&all.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed results");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every command's output goes through one path that treats a reader that has
/// gone away (`retype study | head`) as the end, not as a panic.
#[test]
fn a_closed_output_ends_the_study_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = common::retype_cmd()
        .args(["study", "--policy", "best-fit", "--workload", "app:hello"])
        .stdout(writer)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(out.stderr.is_empty(), "{}", common::stderr(&out));
}

/// `--cheri` measures every object, slab and request of a run: seL4's
/// objects and slabs come out exact in every format, while a request of 257
/// 16-byte endpoints (4,112 bytes, nine significant bits) is rounded and
/// realigned in RV32's 8-bit mantissa and held exactly by Morello.
#[test]
fn cheri_sizes_objects_slabs_and_requests_from_the_run() {
    let dir = std::env::temp_dir().join(format!("retype-cheri-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("wide.txt");
    std::fs::write(
        &script,
        "alloc 0 endpoint*256 endpoint\nalloc 1 page\nfree 0\nfree 1\n",
    )
    .unwrap();
    let workload = format!("script:{},app:mltest", script.display());
    for (format, padded) in [("rv32", true), ("morello", false)] {
        let o = retype(&[
            "study",
            "--policy",
            "best-fit",
            "--workload",
            &workload,
            "--cheri",
            format,
            "--json",
        ]);
        let rows = json_lines(&o);
        assert_eq!(rows.len(), 2);
        for row in &rows {
            let c = &row["cheri"];
            assert_eq!(c["format"], format);
            assert_eq!(c["slabs"]["count"], 22);
            assert!(c["objects"]["count"].as_u64().unwrap() > 0);
            for kind in ["objects", "slabs"] {
                assert_eq!(c[kind]["padding"], 0, "{format} {kind}");
                assert_eq!(c[kind]["realigned"], 0, "{format} {kind}");
            }
            assert_eq!(c["peak_frag_total_kib"], row["peak_frag_total_kib"]);
        }
        let wide = &rows[0]["cheri"];
        assert_eq!(wide["objects"]["count"], 258);
        assert_eq!(wide["requests"]["count"], 2);
        assert_eq!(wide["requests"]["bytes"], 4112 + 4096);
        let pad = wide["requests"]["padding"].as_u64().unwrap();
        assert_eq!(pad > 0, padded, "{format}: {pad}");
        assert_eq!(wide["requests_peak_live_padding"].as_u64().unwrap(), pad);
        assert_eq!(wide["requests"]["realigned"].as_u64().unwrap() > 0, padded);
    }
    let o = retype(&[
        "study",
        "--workload",
        "app:hello",
        "--layout",
        "1099511627776",
        "--cheri",
        "rv32",
    ]);
    let e = common::stderr(&o);
    assert!(!o.status.success());
    assert!(e.contains("lies beyond rv32's address space"), "{e}");
    let text = stdout(&retype(&[
        "study",
        "--policy",
        "best-fit",
        "--workload",
        "app:hello",
        "--cheri",
        "rv64",
    ]));
    assert!(text.contains("CHERI (rv64), app:hello"), "{text}");
    assert!(
        text.contains("slabs: 22 untyped capabilities, 0 rounded, 0 realigned"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
