//! CSV: one event a row, for spreadsheets and plotting scripts.
//!
//! Columns: `thread,time_ns,latency_ns,op,size,align,ptr,ret`; addresses in
//! hex (`0x...`), the rest in decimal, `op` by C name. Thread summaries,
//! metadata, stacks and the descheduled flag are not exported. [`parse`] reads
//! the same columns back.

use std::io::{self, Write};

use crate::error::ParseError;
use crate::event::{Event, Op};
use crate::trace::Trace;

pub const HEADER: &str = "thread,time_ns,latency_ns,op,size,align,ptr,ret";

pub fn write(t: &Trace, mut out: impl Write) -> io::Result<()> {
    writeln!(out, "{HEADER}")?;
    for e in &t.events {
        writeln!(
            out,
            "{},{},{},{},{},{},{:#x},{:#x}",
            e.thread,
            e.time_ns,
            e.latency_ns,
            e.op.name(),
            e.size,
            e.align,
            e.ptr,
            e.ret
        )?;
    }
    out.flush()
}

/// Reads CSV rows back into a trace (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Trace, ParseError> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == HEADER => {}
        _ => {
            return Err(ParseError::new(
                file,
                1,
                format!("expected the header {HEADER:?}"),
            ))
        }
    }
    let mut t = Trace::default();
    for (i, line) in lines {
        let lineno = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 8 {
            return Err(ParseError::new(
                file,
                lineno,
                format!("expected 8 columns, found {}", f.len()),
            ));
        }
        let num = |k: usize| -> Result<u64, ParseError> {
            let s = f[k];
            let v = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            v.map_err(|_| {
                ParseError::new(
                    file,
                    lineno,
                    format!("column {}: {s:?} is not a number", k + 1),
                )
            })
        };
        let op = Op::from_name(f[3])
            .ok_or_else(|| ParseError::new(file, lineno, format!("unknown op {:?}", f[3])))?;
        let thread = u32::try_from(num(0)?)
            .map_err(|_| ParseError::new(file, lineno, "thread id exceeds 32 bits"))?;
        t.events.push(
            Event {
                op,
                thread,
                time_ns: num(1)?,
                latency_ns: num(2)?,
                size: num(4)?,
                align: num(5)?,
                ptr: num(6)?,
                ret: num(7)?,
                stack: 0,
                descheduled: false,
            }
            .canonical(),
        );
    }
    Ok(t)
}
