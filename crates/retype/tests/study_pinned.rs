//! Every figure of seed 000's Tables 4.3 and 4.4 for the 16 % and 32 % runs,
//! as the thesis prints them, against `retype study` replaying the runs'
//! logs under the policy that made them: each must be exactly the thesis's
//! to the two decimals it prints.

mod common;

use common::{json_lines, retype};

/// One column of Tables 4.3/4.4: peak watermarking, alignment and total
/// fragmentation (KiB), the same averaged, slab resets and resets per 100
/// allocation requests.
struct Thesis {
    free: u32,
    dir: &'static str,
    policy: &'static str,
    peak: [f64; 3],
    avg: [f64; 3],
    resets: u64,
    per_100: f64,
}

/// Typed from the seed's text (`shared/seeds/000_*`, §4.2.1): Table 4.3
/// (peak and average fragmentation, KiB, seed 42, 1000 requests) and
/// Table 4.4 (slab resets, and per 100 allocation requests), the 16 % and
/// 32 % free-chance columns for best fit and the original next fit.
const THESIS: [Thesis; 4] = [
    Thesis {
        free: 16,
        dir: "best_fit",
        policy: "best-fit",
        peak: [553.80, 411.77, 951.66],
        avg: [281.05, 231.73, 512.79],
        resets: 30,
        per_100: 3.55,
    },
    Thesis {
        free: 16,
        dir: "next_fit",
        policy: "blind-next-fit",
        peak: [1106.69, 477.67, 1584.36],
        avg: [407.09, 299.89, 706.98],
        resets: 23,
        per_100: 2.71,
    },
    Thesis {
        free: 32,
        dir: "best_fit",
        policy: "best-fit",
        peak: [865.92, 381.89, 1237.80],
        avg: [442.09, 184.08, 626.17],
        resets: 37,
        per_100: 5.17,
    },
    Thesis {
        free: 32,
        dir: "next_fit",
        policy: "blind-next-fit",
        peak: [1267.75, 449.03, 1691.00],
        avg: [726.41, 267.21, 993.61],
        resets: 24,
        per_100: 3.35,
    },
];

#[test]
fn the_16_and_32_percent_runs_give_every_figure_of_tables_4_3_and_4_4() {
    for t in &THESIS {
        let log = format!(
            "log:traces/cantrip/logs/{dir}/random_uniform_{dir}_seed_42_count_1000_dealloc_chance_{free}.log",
            dir = t.dir,
            free = t.free
        );
        let rows = json_lines(&retype(&[
            "study",
            "--policy",
            t.policy,
            "--workload",
            &log,
            "--json",
        ]));
        assert_eq!(rows.len(), 1, "{log}");
        let r = &rows[0];
        let two = |v: f64| format!("{v:.2}");
        let ours = |key: &str| two(r[key].as_f64().unwrap_or(f64::NAN));
        let names = ["watermark", "alignment", "total"];
        for (i, name) in names.iter().enumerate() {
            let what = format!("{} % {}: {name}", t.free, t.policy);
            assert_eq!(
                ours(&format!("peak_frag_{name}_kib")),
                two(t.peak[i]),
                "peak {what}"
            );
            assert_eq!(
                ours(&format!("avg_frag_{name}_kib")),
                two(t.avg[i]),
                "average {what}"
            );
        }
        assert_eq!(r["slab_resets"], t.resets, "{} % {}", t.free, t.policy);
        assert_eq!(
            ours("slab_resets_per_100_allocs"),
            two(t.per_100),
            "{} % {}",
            t.free,
            t.policy
        );
    }
}
