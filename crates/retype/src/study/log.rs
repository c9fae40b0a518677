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
//! Per-slab dumps (`{'idx': …}`) and other lines are skipped.

use std::fmt;

use retype_core::workload::logged::{LogCounters, LoggedOp};

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
