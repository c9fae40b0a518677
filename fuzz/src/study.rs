//! The study's inputs: CantripOS logs (`--workload log:PATH`, with the
//! per-slab dumps of a `memory_stats_` log beside it), request scripts
//! (`script:PATH`), and the cells of a sweep grid, each of which the sweep
//! checks with `retype::api::Study::parse` before any task starts.

use retype::api::Study;
use retype_core::workload::script::Script;

use crate::{place, scratch};

/// A CantripOS log, then after the first NUL byte (if any) the
/// `memory_stats_` log of the same run, read as `--workload log:PATH`
/// reads them: parsed, and its requests recovered.
pub fn cantrip_log(data: &[u8]) {
    let (log, stats) = match data.iter().position(|&b| b == 0) {
        Some(k) => (&data[..k], Some(&data[k + 1..])),
        None => (data, None),
    };
    let path = scratch::file("run.log", log);
    match stats {
        Some(s) => scratch::file("memory_stats_run.log", s),
        None => scratch::remove("memory_stats_run.log"),
    };
    let spec = format!("log:{}", path.display());
    for policy in ["best-fit", "next-fit"] {
        if let Err(e) = Study::parse(&spec, policy, None, None) {
            // The log, or the memory_stats_ log beside it when the error is there.
            let message = format!("{e:#}");
            let stats = path.with_file_name("memory_stats_run.log");
            if !message.contains(&stats.display().to_string()) {
                place::assert_names_file(&message, &path);
            }
        }
    }
}

/// A request script; an error names its line.
pub fn script(data: &[u8]) {
    if let Err(e) = Script::parse(&String::from_utf8_lossy(data)) {
        place::assert_names_line_or_byte(&e);
    }
}

/// A grid cell: workload, policy, layout and architecture, one a line (the
/// last two may be left out). Workloads that name files are the other
/// targets' (here they could name any file, `/dev/zero` too).
pub fn grid_cell(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut fields = text.splitn(4, '\n');
    let workload = fields.next().unwrap_or_default();
    let policy = fields.next().unwrap_or_default();
    if workload.starts_with("log:") || workload.starts_with("script:") {
        return;
    }
    let _ = Study::parse(workload, policy, fields.next(), fields.next());
}
