//! wee_alloc's traces (rustwasm/wee_alloc `test/traces/*.trace`): one event a
//! line, `Alloc(SIZE),` or `Free(K),` where K is the 0-based index of the K-th
//! `Alloc` line. They come from valgrind, without addresses or threads.

use crate::error::ParseError;
use crate::event::{Event, Op};
use crate::trace::Trace;

/// The synthetic address of the block with id `id` in a trace that names blocks
/// by id rather than by address: distinct, non-NULL and 16-byte aligned.
pub fn synthetic_addr(id: u64) -> u64 {
    (id + 1) << 4
}

/// Parses a wee_alloc trace (`file` names it in errors). Event `i` gets time `i` (the trace has no clock).
pub fn parse(file: &str, text: &str) -> Result<Trace, ParseError> {
    let mut t = Trace::default();
    t.meta.push(("source".into(), "wee_alloc".into()));
    t.meta.push(("addresses".into(), "synthetic".into()));
    let mut allocs = 0u64;
    let mut freed = Vec::<bool>::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let body = line.strip_suffix(',').unwrap_or(line);
        let (name, arg) = call(body).ok_or_else(|| {
            ParseError::new(
                file,
                lineno,
                format!("expected Alloc(N) or Free(K), found {line:?}"),
            )
        })?;
        let n: u64 = arg.parse().map_err(|_| {
            ParseError::new(
                file,
                lineno,
                format!("{arg:?} is not a non-negative integer"),
            )
        })?;
        let time_ns = t.events.len() as u64;
        let e = match name {
            "Alloc" => {
                let e = Event {
                    op: Op::Malloc,
                    time_ns,
                    size: n,
                    ret: synthetic_addr(allocs),
                    ..Event::default()
                };
                allocs += 1;
                freed.push(false);
                e
            }
            "Free" => {
                match freed.get_mut(n as usize) {
                    Some(f) if !*f => *f = true,
                    Some(_) => {
                        return Err(ParseError::new(
                            file,
                            lineno,
                            format!("Free({n}) frees block {n} a second time"),
                        ))
                    }
                    None => {
                        return Err(ParseError::new(
                            file,
                            lineno,
                            format!("Free({n}) names a block not yet allocated ({allocs} so far)"),
                        ))
                    }
                }
                Event {
                    op: Op::Free,
                    time_ns,
                    ptr: synthetic_addr(n),
                    ..Event::default()
                }
            }
            _ => {
                return Err(ParseError::new(
                    file,
                    lineno,
                    format!("unknown event {name:?}"),
                ))
            }
        };
        t.events.push(e);
    }
    Ok(t)
}

/// Splits `name(arg)` into its name and argument.
pub(crate) fn call(s: &str) -> Option<(&str, &str)> {
    let (name, rest) = s.split_once('(')?;
    Some((name.trim(), rest.strip_suffix(')')?.trim()))
}
