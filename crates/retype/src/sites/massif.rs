//! A recording as valgrind massif's output (`massif.out.PID`), which
//! `ms_print` and massif-visualizer read: snapshots of the live heap bytes
//! over time ([`retype_trace::timeline`]), every tenth and the peak with its
//! heap tree (who allocated the live bytes: the allocator's callers, then
//! theirs), as massif writes them with `--time-unit=ms`.

use std::fmt::Write;

use retype_trace::timeline::timeline;
use retype_trace::window::Window;
use retype_trace::Trace;

use super::tree::StackTree;
use super::{Analysis, NO_STACK};

/// Snapshots massif takes by default (and at most 100, as here: up to two per span).
const SPANS: usize = 50;
/// Every how many snapshots one is detailed, as massif's `--detailed-freq`.
const DETAILED_EVERY: usize = 10;

/// Writes `node` as massif does: `nCHILDREN: BYTES LABEL`, callers with the most bytes
/// first, one space deeper.
fn write(node: &StackTree, out: &mut String, depth: usize, label: &str) {
    let _ = writeln!(
        out,
        "{:depth$}n{}: {} {label}",
        "",
        node.children.len(),
        node.bytes
    );
    let mut callers: Vec<(&String, &StackTree)> = node.children.iter().collect();
    callers.sort_by(|a, b| (b.1.bytes, a.0).cmp(&(a.1.bytes, b.0)));
    for (label, n) in callers {
        write(n, out, depth + 1, label);
    }
}

/// `trace` (analysed as `a`) in `window` as a massif.out file.
pub fn massif(trace: &Trace, a: &Analysis, window: Window) -> String {
    // Each stack's frames as massif labels, innermost first.
    let paths: Vec<Vec<String>> = a
        .stacks
        .iter()
        .map(|r| {
            if r.frames.is_empty() {
                return vec![NO_STACK.to_string()];
            }
            r.frames
                .iter()
                // ms_print reads `#` as the start of a comment.
                .map(|f| format!("0x{:X}: {}", f.offset, f.label().replace('#', " ")))
                .collect()
        })
        .collect();
    let group: Vec<usize> = (0..a.stacks.len()).collect();
    let t = timeline(trace, window, SPANS, &group, group.len());
    let peak = t
        .points
        .iter()
        .enumerate()
        .max_by(|x, y| x.1.live_bytes.cmp(&y.1.live_bytes).then(y.0.cmp(&x.0)))
        .map(|(i, _)| i);
    let cmd = trace
        .meta_value("cmdline")
        .unwrap_or("(unknown)")
        .replace('#', " ");
    let mut out = format!("desc: (recorded by retype)\ncmd: {cmd}\ntime_unit: ms\n");
    let mut snapshots: Vec<(u64, u64, Option<&[u64]>)> = Vec::new();
    if window.is_all() {
        snapshots.push((0, 0, None));
    }
    for (i, p) in t.points.iter().enumerate() {
        let detailed = Some(i) == peak || (i + 1) % DETAILED_EVERY == 0;
        snapshots.push((p.time_ns, p.live_bytes, detailed.then_some(&p.groups[..])));
    }
    let peak = peak.map(|i| i + usize::from(window.is_all()));
    for (n, (time_ns, bytes, groups)) in snapshots.into_iter().enumerate() {
        let kind = match groups {
            None => "empty",
            Some(_) if Some(n) == peak => "peak",
            Some(_) => "detailed",
        };
        let _ = write!(
            out,
            "#-----------\nsnapshot={n}\n#-----------\ntime={}\nmem_heap_B={bytes}\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree={kind}\n",
            time_ns / 1_000_000
        );
        if let Some(groups) = groups {
            let mut root = StackTree::default();
            for (k, &b) in groups.iter().enumerate().filter(|(_, &b)| b > 0) {
                root.add(&paths[k], b);
            }
            write(
                &root,
                &mut out,
                0,
                "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
            );
        }
    }
    out
}
