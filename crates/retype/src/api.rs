//! The laboratory for embedding (the Python module): one study run and one
//! replay, parsed and reported exactly as the command line does, so that the
//! figures, the JSON keys and the error messages are the command line's.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{anyhow, bail, Result};
use retype_core::heap::HeapKind;
use retype_core::mm::Layout;
use retype_core::objects::{Arch, Config};
use retype_trace::format;
use retype_trace::summary::Summary;
use retype_trace::Trace;

use crate::names::{self, List};
use crate::replay::score::Timing;
use crate::replay::Replay;
use crate::study::data::Prepared;
use crate::study::run;
use crate::study::series;
pub use crate::study::series::Column;
use crate::study::spec::{parse_layout, Policies, PolicySpec, Workloads};
use crate::trace_info;

/// One run of `retype study --json`: its JSON object, and on request the
/// per-request series (the columns of `--csv`).
pub struct StudyRun {
    pub metrics: serde_json::Value,
    pub series: Option<Vec<(&'static str, Column)>>,
}

/// `retype study --workload W --policy P [--layout L] [--arch A] --json`
/// for one workload under one policy, parsed.
pub struct Study {
    workload: Prepared,
    policy: PolicySpec,
    layout: Layout,
    config: Config,
}

impl Study {
    /// Parses the four as the command line's flags (`cantrip` and `riscv32`
    /// when left out); a list of workloads or policies is refused.
    pub fn parse(
        workload: &str,
        policy: &str,
        layout: Option<&str>,
        arch: Option<&str>,
    ) -> Result<Study> {
        let [w] = one("workload", Workloads::from_str(workload)?.0)?;
        let [policy] = one("policy", Policies::from_str(policy)?.0)?;
        let layout = parse_layout(layout.unwrap_or("cantrip"))?;
        let arch = names::one_of::<Arch>("architecture", arch.unwrap_or("riscv32"))?;
        let config = run::config_for(arch);
        let workload = Prepared::from_spec(&w, config, &layout)?;
        Ok(Study {
            workload,
            policy,
            layout,
            config,
        })
    }

    /// Runs it.
    pub fn run(&self, with_series: bool) -> Result<StudyRun> {
        let run = run::run_one(
            &self.workload,
            self.policy,
            self.config,
            &self.layout,
            false,
            None,
        )?;
        Ok(StudyRun {
            metrics: run::json(&run),
            series: with_series.then(|| series::columns(&run.steps)),
        })
    }
}

/// `retype replay TRACE --heap HEAP --json` for one trace on one heap, timed
/// for at least `min_time_ms` (the command line's default when `None`).
pub fn replay(trace: PathBuf, heap: &str, min_time_ms: Option<u64>) -> Result<serde_json::Value> {
    let [heap] = one("heap", List::<HeapKind>::from_str(heap)?.0)?;
    let mut timing = Timing::DEFAULT;
    if let Some(ms) = min_time_ms {
        timing.min_time = std::time::Duration::from_millis(ms);
    }
    let replay = Replay {
        traces: vec![trace],
        heaps: vec![heap],
        timing,
        cheri: None,
    };
    let mut rows = Vec::new();
    replay.run(&mut |row| {
        rows.push(row);
        Ok(())
    })?;
    let row = rows
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the replay gave no row"))?;
    Ok(serde_json::to_value(row)?)
}

/// The policies a `--policy` list names (`all` for every one), each as
/// `Study::parse` takes it.
pub fn policies(list: &str) -> Result<Vec<String>> {
    Ok(Policies::from_str(list)?
        .0
        .iter()
        .map(|p| p.to_string())
        .collect())
}

/// The heaps a `--heap` list names (`all` for every one).
pub fn heaps(list: &str) -> Result<Vec<String>> {
    let heaps = List::<HeapKind>::from_str(list)?.0;
    Ok(heaps.iter().map(|h| h.name().to_string()).collect())
}

/// `retype trace info --json FILE`, with the trace itself.
pub fn trace(path: &Path) -> Result<(Trace, serde_json::Value)> {
    let trace = format::load(path, None)?;
    let info = trace_info::json(path, &trace, &Summary::of(&trace));
    Ok((trace, info))
}

/// The single element of `items`, or an error that says an embedding call
/// takes one `what` (a sweep is the place for lists).
fn one<T>(what: &str, items: Vec<T>) -> Result<[T; 1]> {
    let n = items.len();
    match <[T; 1]>::try_from(items) {
        Ok(a) => Ok(a),
        Err(_) => bail!("one {what} per call, not {n}: sweep over a list instead"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_study_run_has_the_command_lines_keys_and_series() {
        let s = Study::parse("uniform:seed=7,ops=300,free=48", "best-fit", None, None);
        let r = s.unwrap().run(true).unwrap();
        assert_eq!(r.metrics["policy"], "best-fit");
        let series = r.series.unwrap();
        assert_eq!(series.len(), 11);
        for (name, column) in &series {
            assert_eq!(r.metrics["ops"], column.rows(), "{name}");
        }
    }

    #[test]
    fn lists_and_bad_names_are_refused_with_the_command_lines_words() {
        let e = Study::parse("uniform:seed=7,ops=300,free=48", "all", None, None);
        assert!(e.err().unwrap().to_string().contains("one policy per call"));
        let e = Study::parse(
            "uniform:seed=7,ops=300,free=48",
            "best-fit",
            None,
            Some("vax"),
        );
        assert!(e
            .err()
            .unwrap()
            .to_string()
            .contains("unknown architecture"));
        for p in policies("all").unwrap() {
            assert!(
                Study::parse("uniform:seed=1,ops=10,free=0", &p, None, None).is_ok(),
                "{p}"
            );
        }
        assert!(policies("best-fit:lifted").unwrap() == ["best-fit:lifted"]);
        assert!(heaps("all").unwrap().len() > 1);
        let e = replay("/nonexistent.rep".into(), "nope", None);
        assert!(e.err().unwrap().to_string().contains("nope"));
    }
}
