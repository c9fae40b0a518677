//! `retype bench mdb`: the mapping-database benchmark (`crate::bench::mdb`)
//! as text or JSON lines, in TSC cycles and nanoseconds: a row per
//! implementation and size, each operation's median with its standard
//! deviation and 99th percentile.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::Args as ClapArgs;

use crate::bench::mdb::{self, ops::Op};
use crate::timing::{ticks_per_ns, timer_overhead};

#[derive(ClapArgs)]
pub struct Args {
    /// One JSON object per implementation and size.
    #[arg(long)]
    json: bool,
    /// Database sizes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4096,8192,16384,32768,65536"
    )]
    caps: Vec<usize>,
    /// Measurements per operation and implementation (the thesis: 1000).
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Seed of the capability generator and of the target choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// log2 of the memory the capabilities cover.
    #[arg(long, default_value_t = 32)]
    mem_bits: u32,
}

pub fn run(a: Args) -> Result<()> {
    let tpn = ticks_per_ns();
    let overhead = timer_overhead();
    let config = mdb::Config {
        caps: a.caps,
        samples: a.samples,
        seed: a.seed,
        mem_bits: a.mem_bits,
    };
    let rows = mdb::run(&config, overhead)?;
    for r in &rows {
        if a.json {
            let ns = |m: &BTreeMap<&str, f64>| -> serde_json::Value {
                m.iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::from(v / tpn)))
                    .collect()
            };
            let line = serde_json::json!({
                "impl": r.name,
                "caps": r.caps,
                "score_boot_cycles": r.boot,
                "score_procmgmt_cycles": r.procmgmt,
                "score_boot_ns": r.boot / tpn,
                "score_procmgmt_ns": r.procmgmt / tpn,
                "median_cycles": r.medians,
                "median_ns": ns(&r.medians),
                "stddev_cycles": r.stddevs,
                "p99_cycles": r.p99s,
                "samples": config.samples,
                "seed": config.seed,
                "ticks_per_ns": tpn,
                "timer_overhead_cycles": overhead,
            });
            outln!("{line}");
        } else {
            let ops: Vec<String> = Op::ALL
                .iter()
                .map(|op| {
                    let op = op.name();
                    format!(
                        "{op}={:.0}±{:.0} (p99 {})",
                        r.medians[op], r.stddevs[op], r.p99s[op]
                    )
                })
                .collect();
            outln!(
                "{:<13} caps={:<6} boot={:>8.0} cycles ({:>7.0} ns)  procmgmt={:>8.0} cycles ({:>7.0} ns)  {}",
                r.name,
                r.caps,
                r.boot,
                r.boot / tpn,
                r.procmgmt,
                r.procmgmt / tpn,
                ops.join(" ")
            );
        }
    }
    if !a.json {
        outln!("each operation: median ± standard deviation (99th percentile), TSC cycles.");
    }
    Ok(())
}
