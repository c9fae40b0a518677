//! Fixed request sequences and their text format.
//!
//! One request a line; `#` starts a comment:
//!
//! ```text
//! alloc ID DESC [DESC ...]    # DESC = TYPE[/SIZE_BITS][*COUNT], e.g. page*4 cnode/2
//! free ID [ID ...]            # one request freeing these allocations
//! ```
//!
//! Types are the names of [`ObjectType::name`]. Ids are any numbers, each
//! allocated at most once while live.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use super::{Op, Workload};
use crate::mm::ObjDesc;
use crate::objects::ObjectType;

/// A parse error, naming the 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl core::error::Error for ScriptError {}

/// A fixed sequence of requests, replayed in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    ops: Vec<Op>,
    next: usize,
    refused: BTreeSet<u32>,
}

impl Script {
    pub fn new(ops: Vec<Op>) -> Script {
        Script {
            ops,
            ..Script::default()
        }
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Parses the text format, checking that every free names a live id and
    /// no id is allocated twice while live.
    pub fn parse(text: &str) -> Result<Script, ScriptError> {
        let mut ops = Vec::new();
        let mut live = BTreeSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| ScriptError { line, message };
            let content = raw.split('#').next().unwrap_or("").trim();
            let mut words = content.split_whitespace();
            let Some(verb) = words.next() else { continue };
            let id = |w: &str| w.parse::<u32>().map_err(|_| err(format!("bad id {w:?}")));
            match verb {
                "alloc" => {
                    let id = id(words
                        .next()
                        .ok_or_else(|| err("alloc needs an id".into()))?)?;
                    let request = words
                        .map(parse_desc)
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(err)?;
                    if request.is_empty() {
                        return Err(err("alloc needs at least one descriptor".into()));
                    }
                    if !live.insert(id) {
                        return Err(err(format!("id {id} is already live")));
                    }
                    ops.push(Op::Alloc { id, request });
                }
                "free" => {
                    let ids = words.map(id).collect::<Result<Vec<_>, _>>()?;
                    if ids.is_empty() {
                        return Err(err("free needs at least one id".into()));
                    }
                    for id in &ids {
                        if !live.remove(id) {
                            return Err(err(format!("id {id} is not live")));
                        }
                    }
                    ops.push(Op::Free { ids });
                }
                other => return Err(err(format!("unknown request {other:?} (alloc or free)"))),
            }
        }
        Ok(Script::new(ops))
    }

    /// The text format of this script.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for op in &self.ops {
            match op {
                Op::Alloc { id, request } => {
                    out += &format!("alloc {id}");
                    for d in request {
                        out.push(' ');
                        out += &format_desc(d);
                    }
                }
                Op::Free { ids } => {
                    out += "free";
                    for id in ids {
                        out += &format!(" {id}");
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

impl Workload for Script {
    fn next_op(&mut self) -> Option<Op> {
        loop {
            let op = self.ops.get(self.next)?.clone();
            self.next += 1;
            match op {
                Op::Free { ids } if !self.refused.is_empty() => {
                    let ids: Vec<u32> = ids
                        .into_iter()
                        .filter(|i| !self.refused.remove(i))
                        .collect();
                    if !ids.is_empty() {
                        return Some(Op::Free { ids });
                    }
                }
                op => return Some(op),
            }
        }
    }

    fn refused(&mut self, id: u32) {
        self.refused.insert(id);
    }
}

fn parse_desc(word: &str) -> Result<ObjDesc, String> {
    let (head, count) = match word.split_once('*') {
        Some((h, c)) => (
            h,
            c.parse::<u32>()
                .map_err(|_| format!("bad count in {word:?}"))?,
        ),
        None => (word, 1),
    };
    let (name, size_bits) = match head.split_once('/') {
        Some((n, b)) => (
            n,
            b.parse::<u32>()
                .map_err(|_| format!("bad size bits in {word:?}"))?,
        ),
        None => (head, 0),
    };
    let ty: ObjectType = name
        .parse()
        .map_err(|_| format!("unknown object type {name:?}"))?;
    Ok(ObjDesc::new(ty, size_bits, count))
}

fn format_desc(d: &ObjDesc) -> String {
    let mut s = d.ty.name().to_string();
    if d.ty.is_variable_size() {
        s += &format!("/{}", d.size_bits);
    }
    if d.count != 1 {
        s += &format!("*{}", d.count);
    }
    s
}

/// The three sequences of seed 000's Table 4.2: `app` starts an application
/// (all its requests but the last), `app_s` stops it (its last request, which
/// frees all it still holds); `app2` is a second copy of `app`.
pub const SEQUENCES: [&str; 3] = [
    "hello hello_s timer timer_s mltest mltest_s fibonacci fibonacci_s \
     hello2 hello2_s timer2 timer2_s mltest2 mltest2_s fibonacci2 fibonacci2_s",
    "hello timer mltest fibonacci hello2 timer2 mltest2 fibonacci2 \
     fibonacci2_s mltest2_s timer2_s hello2_s fibonacci_s mltest_s timer_s hello_s",
    "hello timer mltest timer_s mltest_s fibonacci hello2 timer2 \
     hello_s fibonacci_s mltest2 fibonacci2 fibonacci2_s mltest2_s hello2_s timer2_s",
];

/// Builds a sequence of application starts and stops. `app(name)` gives the
/// script of an application; each instance gets its own ids.
pub fn sequence(events: &str, app: impl Fn(&str) -> Option<Script>) -> Result<Script, String> {
    let mut ops = Vec::new();
    let mut stops: Vec<(String, Op)> = Vec::new();
    let mut next_base = 0u32;
    for event in events.split_whitespace() {
        if let Some(instance) = event.strip_suffix("_s") {
            let k = stops
                .iter()
                .position(|(n, _)| n == instance)
                .ok_or_else(|| format!("{instance} stops before it starts"))?;
            ops.push(stops.remove(k).1);
            continue;
        }
        let name = event.trim_end_matches(|c: char| c.is_ascii_digit());
        let script = app(name).ok_or_else(|| format!("unknown application {name:?}"))?;
        let (body, last) = script.ops.split_at(script.ops.len().saturating_sub(1));
        let Some(stop @ Op::Free { .. }) = last.first() else {
            return Err(format!("application {name} does not end with a free"));
        };
        let base = next_base;
        let max_id = script.ops.iter().flat_map(op_ids).max().unwrap_or(0);
        next_base += max_id + 1;
        ops.extend(body.iter().map(|op| shift(op, base)));
        stops.push((event.into(), shift(stop, base)));
    }
    if let Some((n, _)) = stops.first() {
        return Err(format!("{n} never stops"));
    }
    Ok(Script::new(ops))
}

fn op_ids(op: &Op) -> Vec<u32> {
    match op {
        Op::Alloc { id, .. } => alloc::vec![*id],
        Op::Free { ids } => ids.clone(),
    }
}

fn shift(op: &Op, base: u32) -> Op {
    match op {
        Op::Alloc { id, request } => Op::Alloc {
            id: id + base,
            request: request.clone(),
        },
        Op::Free { ids } => Op::Free {
            ids: ids.iter().map(|i| i + base).collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "alloc 0 page*2\nalloc 1 cnode/2 tcb # two descs\nfree 0 1\n";

    #[test]
    fn text_round_trips() {
        let s = Script::parse(APP).unwrap();
        assert_eq!(s.ops().len(), 3);
        assert_eq!(Script::parse(&s.to_text()).unwrap(), s);
    }

    #[test]
    fn bad_scripts_name_the_line() {
        for (text, line) in [
            ("alloc 0 page\nfree 1\n", 2),
            ("alloc 0 pgae\n", 1),
            ("alloc 0 page\nalloc 0 tcb\n", 2),
            ("\n\nfree\n", 3),
            ("alloc x page\n", 1),
            ("grow 1\n", 1),
            ("alloc 1 page*z\n", 1),
        ] {
            assert_eq!(Script::parse(text).unwrap_err().line, line, "{text:?}");
        }
    }

    #[test]
    fn sequences_start_and_stop_instances() {
        let app = |n: &str| (n == "a").then(|| Script::parse(APP).unwrap());
        let s = sequence("a a2 a_s a2_s", app).unwrap();
        let text = s.to_text();
        assert_eq!(text, "alloc 0 page*2\nalloc 1 cnode/2 tcb\nalloc 2 page*2\nalloc 3 cnode/2 tcb\nfree 0 1\nfree 2 3\n");
        assert!(sequence("a_s", app).is_err());
        assert!(sequence("a", app).is_err());
        assert!(sequence("b", app).is_err());
    }

    #[test]
    fn refused_ids_are_not_freed() {
        let mut s = Script::parse(APP).unwrap();
        s.next_op();
        s.refused(0);
        s.next_op();
        assert_eq!(
            s.next_op(),
            Some(Op::Free {
                ids: alloc::vec![1]
            })
        );
    }
}
