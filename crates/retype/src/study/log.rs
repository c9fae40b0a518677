//! Reader of the CantripOS evaluation logs (seed 000; `traces/cantrip/logs`):
//! text in, [`LoggedOp`]s out, for the study to replay.
//!
//! The logs are Renode UART captures. Only lines tagged `[output]` count
//! (each line is printed again with a `[virt: …]` tag). After every request
//! the memory manager prints a Python-dict line of counters:
//!
//! ```text
//! … [output] {'bytes in-use': 16384, 'slab resets': 0,'untyped_too_small': 0, 'oom': 0, …}
//! ```
//!
//! with `lhs fragmentation` (watermarking) and `in-between fragmentation`
//! (alignment); `latency_*` logs add `instruction count`. The kernel reports
//! each refused retype as `Insufficient memory (K * S bytes needed, …)`.
//! Other lines are skipped, and so are per-slab dumps (`{'idx': …}`) here:
//! [`parse_dumps`] reads them from the `memory_stats_*` logs, where the
//! uniform runs print one every 250 steps.

use std::fmt;

use retype_recovery::{Checkpoint, LogCounters, LoggedOp, SlabCounters};

/// A malformed log line, named by 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for LogError {}

/// Every request's counters in the log, in order.
pub fn parse(text: &str) -> Result<Vec<LoggedOp>, LogError> {
    let mut ops = Vec::new();
    let mut refused = None;
    for (i, line) in text.lines().enumerate() {
        let Some((_, out)) = line.split_once("[output] ") else {
            continue;
        };
        if let Some(pos) = out.find("Insufficient memory (") {
            refused = Some(parse_refusal(&out[pos..]).ok_or_else(|| LogError {
                line: i + 1,
                message: "unreadable 'Insufficient memory' message".into(),
            })?);
        } else if out.starts_with("{'bytes in-use'") {
            let after = parse_counters(out).map_err(|message| LogError {
                line: i + 1,
                message,
            })?;
            // Every request changes some counter; a repeated line (the dump at
            // the end of a run) is no request.
            if ops.last().is_some_and(|o: &LoggedOp| o.after == after.0) {
                continue;
            }
            ops.push(LoggedOp {
                after: after.0,
                refused: refused.take(),
                instructions: after.1,
            });
        }
    }
    if ops.is_empty() {
        return Err(LogError {
            line: text.lines().count(),
            message: "no per-request counters (`[output] {'bytes in-use': …}` lines) in this log"
                .into(),
        });
    }
    Ok(ops)
}

/// The per-slab dumps of a `memory_stats_*` log of a uniform run, placed
/// among the `requests` requests of the same run's log:
///
/// ```text
/// … [output] {'idx': 250, 'slab_resets': 5, …, 'lhs_fragmentation_per_slab': [0, …],
///   'in_between_fragmentation_per_slab': […], 'occupied_memory_per_slab': […], …}
/// ```
///
/// The workload (`synthetic_random_alloc SEED COUNT FREE …`) dumps after
/// step `idx` of its COUNT steps when `idx` is a multiple of 250, once more
/// after its last step (labelled COUNT), and once after freeing what was
/// left (labelled COUNT again): every step logs one request, the frees at
/// the end one each, so step `idx` is request `idx` and the last dump follows
/// the log's last request.
pub fn parse_dumps(text: &str, requests: usize) -> Result<Vec<Checkpoint>, LogError> {
    let mut count = None;
    let mut dumps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((_, out)) = line.split_once("[output] ") else {
            continue;
        };
        let fail = |message: String| LogError {
            line: i + 1,
            message,
        };
        if let Some((_, args)) = out.split_once("synthetic_random_alloc ") {
            let steps = args.split_whitespace().nth(1).and_then(|c| c.parse().ok());
            count = Some(
                steps.ok_or_else(|| fail("the workload's command names no step count".into()))?,
            );
            continue;
        }
        if !out.starts_with("{'idx'") {
            continue;
        }
        let count: usize =
            count.ok_or_else(|| fail("a per-slab dump before the workload's command".into()))?;
        let (idx, slabs) = parse_dump(out).map_err(fail)?;
        let op = match idx {
            i if i < count => i,
            i if i == count && dumps.last().is_none_or(|d: &Checkpoint| d.op < count - 1) => {
                count - 1
            }
            i if i == count => requests.saturating_sub(1),
            i => return Err(fail(format!("dump after step {i} of a {count}-step run"))),
        };
        if op >= requests {
            return Err(fail(format!(
                "dump after request {op}, but the run's log has {requests} requests"
            )));
        }
        dumps.push(Checkpoint { op, slabs });
    }
    Ok(dumps)
}

/// The step and the slabs of one `{'idx': …}` dump line.
fn parse_dump(line: &str) -> Result<(usize, Vec<SlabCounters>), String> {
    let field = |key: &str| -> Result<&str, String> {
        let at = line
            .find(&format!("'{key}': "))
            .ok_or_else(|| format!("per-slab dump has no {key:?}"))?;
        Ok(&line[at + key.len() + 4..])
    };
    let list = |key: &str| -> Result<Vec<u64>, String> {
        let rest = field(key)?;
        let inner = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .ok_or_else(|| format!("{key:?} is not a […] list"))?
            .0;
        inner
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("{key:?}: {:?} is not a number", v.trim()))
            })
            .collect()
    };
    let idx = field("idx")?
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|d| d.parse().ok())
        .ok_or("the dump's 'idx' is not a number")?;
    let watermark = list("occupied_memory_per_slab")?;
    let lhs = list("lhs_fragmentation_per_slab")?;
    let between = list("in_between_fragmentation_per_slab")?;
    if lhs.len() != watermark.len() || between.len() != watermark.len() {
        return Err("the dump's per-slab lists differ in length".into());
    }
    let slabs = (0..watermark.len())
        .map(|s| SlabCounters {
            watermark: watermark[s],
            frag_watermark: lhs[s],
            frag_alignment: between[s],
        })
        .collect();
    Ok((idx, slabs))
}

/// `(count, bytes)` from `Insufficient memory (K * S bytes needed, …`.
fn parse_refusal(s: &str) -> Option<(u64, u64)> {
    let inner = s.strip_prefix("Insufficient memory (")?;
    let (count, rest) = inner.split_once(" * ")?;
    let (size, _) = rest.split_once(" bytes needed")?;
    Some((count.trim().parse().ok()?, size.trim().parse().ok()?))
}

/// The counters of one dict line, and its instruction count if any.
fn parse_counters(line: &str) -> Result<(LogCounters, Option<u64>), String> {
    let body = line
        .trim()
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or("counter line is not a {…} dict")?;
    let mut c = LogCounters::default();
    let mut instructions = None;
    let mut seen = 0u32;
    for field in body.split(',') {
        let (key, value) = field
            .split_once(':')
            .ok_or_else(|| format!("field {field:?} has no ':'"))?;
        let key = key.trim().trim_matches('\'');
        let value: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("field {key:?}: {:?} is not a number", value.trim()))?;
        let slot = match key {
            "bytes in-use" => &mut c.bytes_in_use,
            "objs in-use" => &mut c.objects_in_use,
            "slab resets" => &mut c.slab_resets,
            "untyped_too_small" => &mut c.failed_retypes,
            "oom" => &mut c.ooms,
            "bytes requested" => &mut c.bytes_requested,
            "lhs fragmentation" => &mut c.frag_watermark,
            "in-between fragmentation" => &mut c.frag_alignment,
            "instruction count" => {
                instructions = Some(value);
                continue;
            }
            _ => continue,
        };
        *slot = value;
        seen += 1;
    }
    if seen < 8 {
        return Err(format!("counter line has {seen} of the 8 counters"));
    }
    Ok((c, instructions))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "13:22:19.0083 [INFO] uart5: [output] {'bytes in-use': 16384, 'slab resets': 0,'untyped_too_small': 2, 'oom': 1, 'bytes free': 2707200, 'bytes requested': 16384, 'lhs fragmentation': 7, 'in-between fragmentation': 9, 'objs in-use': 1}";

    #[test]
    fn reads_counters_and_refusals() {
        let second = LINE.replace("'oom': 1", "'oom': 2");
        let text = format!(
            "x [output] CANTRIP> go\n{LINE}\nx [virt: 1s] {{'bytes in-use': 5}}\nx [output] [..]: Untyped Retype: Insufficient memory (4 * 4096 bytes needed, 11776 bytes available).\n{second}\n{second}\n"
        );
        let ops = parse(&text).unwrap();
        assert_eq!(ops.len(), 2, "the repeated last line is no request");
        let c = ops[0].after;
        assert_eq!(
            (
                c.bytes_in_use,
                c.failed_retypes,
                c.ooms,
                c.frag_watermark,
                c.frag_alignment,
                c.objects_in_use
            ),
            (16384, 2, 1, 7, 9, 1)
        );
        assert_eq!((ops[0].refused, ops[1].refused), (None, Some((4, 4096))));
    }

    fn dump(idx: usize, lhs: u64) -> String {
        format!("x [output] {{'idx': {idx}, 'slab_resets': 0, 'untyped_too_small': 0, 'oom': 0, 'lhs_fragmentation_per_slab': [{lhs}, 0], 'in_between_fragmentation_per_slab': [0, 3], 'occupied_memory_per_slab': [64, 32], 'available_space_per_slab': [512, 256]}}")
    }

    #[test]
    fn reads_per_slab_dumps_after_their_requests() {
        let text = [
            "x [output] CANTRIP> [ssynthetic_random_alloc 42 500 16 stats best_fit".to_string(),
            dump(0, 1),
            dump(250, 2),
            dump(500, 3),
            dump(500, 4),
        ]
        .join("\n");
        let dumps = parse_dumps(&text, 700).unwrap();
        let at: Vec<(usize, u64)> = dumps
            .iter()
            .map(|d| (d.op, d.slabs[0].frag_watermark))
            .collect();
        assert_eq!(
            at,
            [(0, 1), (250, 2), (499, 3), (699, 4)],
            "the step's request; the last step's; the log's last"
        );
        assert_eq!(
            dumps[0].slabs[1],
            SlabCounters {
                watermark: 32,
                frag_watermark: 0,
                frag_alignment: 3
            }
        );
    }

    #[test]
    fn bad_dumps_are_named() {
        let cmd = "x [output] synthetic_random_alloc 42 500 16 stats best_fit";
        let e = parse_dumps(&dump(0, 1), 10).unwrap_err();
        assert!(e.message.contains("before the workload"), "{e}");
        let e = parse_dumps(&format!("{cmd}\n{}", dump(600, 1)), 700).unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_dumps(&format!("{cmd}\n{}", dump(250, 1)), 100).unwrap_err();
        assert!(e.message.contains("100 requests"), "{e}");
        let short = dump(0, 1).replace("[0, 3]", "[0]");
        let e = parse_dumps(&format!("{cmd}\n{short}"), 10).unwrap_err();
        assert!(e.message.contains("length"), "{e}");
    }

    #[test]
    fn malformed_lines_are_named() {
        let bad = LINE.replace("'oom': 1", "'oom': x");
        let e = parse(&format!("a\n{bad}\n")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("oom"), "{e}");
        let short = LINE.replace(", 'objs in-use': 1", "");
        assert_eq!(parse(&short).unwrap_err().line, 1);
        assert!(parse("nothing here\n").is_err());
    }
}
