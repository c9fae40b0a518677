//! `valgrind --trace-malloc=yes` output: one stderr line per call, such as
//! `--1234-- malloc(10) = 0x4A40040`, `--1234-- realloc(0x4A40040,100) = 0x4A40090`,
//! `--1234-- memalign(al 64, size 100) = 0x4A40200` or `--1234-- free(0x4A40090)`.
//! A realloc may print the call it becomes: `realloc(0x0,8)malloc(8) = 0x..`, and
//! `realloc(p, 0)` spans two lines (`realloc(0x..,0)free(0x..)` then ` = 0`).
//! Lines without the `--PID--` prefix (the program's own output) are skipped.
//! The pid becomes the event's thread; event `i` gets time `i`.

use crate::error::ParseError;
use crate::event::{Event, Op};
use crate::trace::Trace;
use crate::wee_alloc::call;

/// Parses valgrind's output (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Trace, ParseError> {
    let mut t = Trace::default();
    t.meta
        .push(("source".into(), "valgrind --trace-malloc=yes".into()));
    // A realloc whose result is on the next line.
    let mut pending: Option<(usize, Event)> = None;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let Some((pid, body)) = prefixed(line) else {
            continue;
        };
        let bad = |m: String| ParseError::new(file, lineno, m);
        if let Some((_, mut e)) = pending.take() {
            let ret = body.trim().strip_prefix("= ").ok_or_else(|| {
                bad(format!(
                    "expected \" = ADDR\" ending a realloc, found {body:?}"
                ))
            })?;
            e.ret = addr(ret).ok_or_else(|| bad(format!("{ret:?} is not an address")))?;
            t.events.push(e);
            continue;
        }
        let (call_text, ret) = match body.split_once(" = ") {
            Some((c, r)) => (c, Some(r.trim())),
            None => (body, None),
        };
        // A realloc prints the call it turns into right after its own arguments:
        // `realloc(0x0,8)malloc(8) = 0x..`, `realloc(0x..,0)free(0x..)`.
        let call_text = match call_text.find(')') {
            Some(k) => &call_text[..=k],
            None => call_text,
        };
        let (name, args) =
            call(call_text).ok_or_else(|| bad(format!("expected NAME(ARGS), found {body:?}")))?;
        let mut e = Event {
            thread: pid,
            time_ns: t.events.len() as u64,
            ..Event::default()
        };
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        let num = |s: &str| -> Result<u64, ParseError> {
            let s = s.trim_start_matches("al ").trim_start_matches("size ");
            s.parse()
                .or_else(|_| addr(s).ok_or(()))
                .map_err(|_| bad(format!("{s:?} is not a number")))
        };
        let argn = |k: usize| {
            args.get(k)
                .copied()
                .ok_or_else(|| bad(format!("{name} needs {} arguments", k + 1)))
        };
        match name {
            "malloc" | "__builtin_new" | "__builtin_vec_new" | "new" | "new[]" | "_Znwm"
            | "_Znam" => {
                e.op = Op::Malloc;
                e.size = num(argn(0)?)?;
            }
            "calloc" => {
                e.op = Op::Calloc;
                e.size = num(argn(0)?)?.saturating_mul(num(argn(1)?)?);
            }
            "realloc" => {
                e.op = Op::Realloc;
                e.ptr = num(argn(0)?)?;
                e.size = num(argn(1)?)?;
            }
            "memalign" | "posix_memalign" | "aligned_alloc" | "new_aligned" | "new[]_aligned" => {
                e.op = match name {
                    "posix_memalign" => Op::PosixMemalign,
                    "aligned_alloc" => Op::AlignedAlloc,
                    _ => Op::Memalign,
                };
                let (mut a, mut s) = (argn(0)?, argn(1)?);
                if a.starts_with("size") {
                    std::mem::swap(&mut a, &mut s);
                }
                e.align = num(a)?;
                e.size = num(s)?;
            }
            "valloc" => {
                e.op = Op::Valloc;
                e.size = num(argn(0)?)?;
            }
            "free"
            | "__builtin_delete"
            | "__builtin_vec_delete"
            | "delete"
            | "delete[]"
            | "delete_aligned"
            | "delete[]_aligned"
            | "_ZdlPv"
            | "_ZdaPv" => {
                e.op = Op::Free;
                e.ptr = num(argn(0)?)?;
                t.events.push(e);
                continue;
            }
            "malloc_usable_size" => continue,
            _ => return Err(bad(format!("unknown call {name:?}"))),
        }
        match ret {
            Some(r) => {
                e.ret = addr(r).ok_or_else(|| bad(format!("{r:?} is not an address")))?;
                t.events.push(e);
            }
            None if e.op == Op::Realloc => pending = Some((lineno, e)),
            None => return Err(bad(format!("{name} without \" = ADDR\""))),
        }
    }
    if let Some((lineno, _)) = pending {
        return Err(ParseError::new(
            file,
            lineno,
            "realloc without its result line",
        ));
    }
    Ok(t)
}

/// `--PID-- rest` as (pid, rest).
fn prefixed(line: &str) -> Option<(u32, &str)> {
    let rest = line.strip_prefix("--")?;
    let (pid, body) = rest.split_once("-- ")?;
    Some((pid.parse().ok()?, body))
}

/// `0x1A2B` or `0` as a number.
fn addr(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}
