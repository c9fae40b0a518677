//! The CS:APP malloc-lab trace format (`.rep`), read and written.
//!
//! A `.rep` file has four header integers (suggested heap size, number of ids,
//! number of ops, weight) and then one request a line: `a ID SIZE` (malloc),
//! `r ID SIZE` (realloc) and `f ID` (free). The reader turns the file into
//! [`Requests`] with C semantics already applied, so a replayer never sees an
//! ill-formed request:
//!
//! - `f -1` is `free(NULL)`: a no-op, dropped and recorded as a [`Quirk`];
//! - `r ID SIZE` of an id that is not live is `realloc(NULL, SIZE)`: a [`Request::Alloc`];
//! - `r ID 0` of a live id is `realloc(p, 0)`, which frees `p` (glibc): a [`Request::Free`];
//! - an id may be reused once it has been freed.
//!
//! What mdriver would reject or mis-replay is refused with an error naming the
//! file and line: a bad token, a missing or extra field, an id at or above the
//! header's id count, `a` of an id that is still live, `f` of an id that is not
//! live, and an op count that differs from the header (a truncated file).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use crate::error::ParseError;
use crate::requests::{Quirk, Request, Requests, MALLOC_ALIGN};

/// The four header integers of a `.rep` file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Suggested heap size; unused by mdriver.
    pub heap_hint: u64,
    /// Number of distinct ids; ids run from 0 to `num_ids - 1`.
    pub num_ids: u64,
    /// Number of request lines.
    pub num_ops: u64,
    /// Weight; unused by mdriver.
    pub weight: u64,
}

/// Reads and parses a `.rep` file.
pub fn read(path: &Path) -> Result<Requests, ParseError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| ParseError::new(&file, 0, e.to_string()))?;
    parse(&file, &bytes)
}

/// Parses the text of a `.rep` file; `file` names it in errors.
pub fn parse(file: &str, text: &[u8]) -> Result<Requests, ParseError> {
    let end = text.split(|&b| b == b'\n').count() - usize::from(text.ends_with(b"\n"));
    Parser {
        file,
        lines: text.split(|&b| b == b'\n').enumerate(),
        end: end.max(1),
    }
    .trace()
}

struct Parser<'a, I> {
    file: &'a str,
    lines: I,
    /// The file's last line (1 for an empty file): where a file cut short ends.
    end: usize,
}

impl<'a, I: Iterator<Item = (usize, &'a [u8])>> Parser<'a, I> {
    fn error(&self, line: usize, message: String) -> ParseError {
        ParseError::new(self.file, line, message)
    }

    /// The next non-blank line as (1-based number, tokens).
    fn next_line(&mut self) -> Option<(usize, Vec<&'a [u8]>)> {
        for (i, raw) in self.lines.by_ref() {
            let tokens: Vec<&[u8]> = raw
                .split(|b| b.is_ascii_whitespace())
                .filter(|t| !t.is_empty())
                .collect();
            if !tokens.is_empty() {
                return Some((i + 1, tokens));
            }
        }
        None
    }

    fn number<T: std::str::FromStr>(
        &self,
        line: usize,
        token: &[u8],
        what: &str,
    ) -> Result<T, ParseError> {
        std::str::from_utf8(token)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                self.error(
                    line,
                    format!(
                        "expected {what}, found `{}`",
                        String::from_utf8_lossy(token)
                    ),
                )
            })
    }

    fn header(&mut self) -> Result<Header, ParseError> {
        let mut values = [0u64; 4];
        let names = [
            "the heap size hint",
            "the number of ids",
            "the number of ops",
            "the weight",
        ];
        let mut n = 0;
        while n < 4 {
            let Some((line, tokens)) = self.next_line() else {
                return Err(self.error(
                    self.end,
                    format!("truncated header: expected 4 integers, found {n}"),
                ));
            };
            for token in tokens {
                if n == 4 {
                    return Err(self.error(line, "extra token after the 4 header integers".into()));
                }
                values[n] = self.number(line, token, names[n])?;
                n += 1;
            }
        }
        Ok(Header {
            heap_hint: values[0],
            num_ids: values[1],
            num_ops: values[2],
            weight: values[3],
        })
    }

    fn trace(mut self) -> Result<Requests, ParseError> {
        let header = self.header()?;
        let mut trace = Requests::default();
        let mut live: HashMap<u32, ()> = HashMap::new();
        let mut requests: u64 = 0;
        while let Some((line, tokens)) = self.next_line() {
            requests += 1;
            if requests > header.num_ops {
                return Err(self.error(
                    line,
                    format!(
                        "more requests than the {} the header announces",
                        header.num_ops
                    ),
                ));
            }
            let arity = match tokens[0] {
                b"a" | b"r" => 3,
                b"f" => 2,
                other => {
                    return Err(self.error(
                        line,
                        format!(
                            "unknown request `{}` (expected a, r or f)",
                            String::from_utf8_lossy(other)
                        ),
                    ))
                }
            };
            if tokens.len() != arity {
                return Err(self.error(
                    line,
                    format!(
                        "`{}` takes {} field(s), found {}",
                        tokens[0][0] as char,
                        arity - 1,
                        tokens.len() - 1
                    ),
                ));
            }
            let raw_id: i64 = self.number(line, tokens[1], "an id")?;
            if tokens[0] == b"f" && raw_id == -1 {
                trace.quirks.push(Quirk {
                    line,
                    what: "f -1 is free(NULL): no-op",
                });
                continue;
            }
            let id = u32::try_from(raw_id)
                .ok()
                .filter(|&id| u64::from(id) < header.num_ids)
                .ok_or_else(|| {
                    self.error(
                        line,
                        format!(
                            "id {raw_id} out of range (header says {} ids)",
                            header.num_ids
                        ),
                    )
                })?;
            let op = match tokens[0] {
                b"a" => {
                    let size = self.number(line, tokens[2], "a size")?;
                    if live.insert(id, ()).is_some() {
                        return Err(
                            self.error(line, format!("`a {id}` while id {id} is still live"))
                        );
                    }
                    Request::Alloc {
                        id,
                        size,
                        align: MALLOC_ALIGN,
                    }
                }
                b"r" => {
                    let size = self.number(line, tokens[2], "a size")?;
                    match (live.contains_key(&id), size) {
                        (false, _) => {
                            trace.quirks.push(Quirk {
                                line,
                                what: "realloc of an id that is not live is malloc",
                            });
                            live.insert(id, ());
                            Request::Alloc {
                                id,
                                size,
                                align: MALLOC_ALIGN,
                            }
                        }
                        (true, 0) => {
                            trace.quirks.push(Quirk {
                                line,
                                what: "realloc to 0 bytes is free",
                            });
                            live.remove(&id);
                            Request::Free { id }
                        }
                        (true, _) => Request::Realloc { id, size },
                    }
                }
                _ => {
                    if live.remove(&id).is_none() {
                        return Err(self.error(line, format!("`f {id}` but id {id} is not live")));
                    }
                    Request::Free { id }
                }
            };
            trace.requests.push(op);
            trace.lines.push(line);
        }
        if requests < header.num_ops {
            return Err(self.error(
                self.end,
                format!(
                    "truncated: the header announces {} requests, the file ends after {requests}",
                    header.num_ops
                ),
            ));
        }
        Ok(trace)
    }
}

/// Writes `ops` as a `.rep` file whose header counts them (heap hint and weight as given).
///
/// Fails with `InvalidInput` on an alignment other than [`MALLOC_ALIGN`] or smaller,
/// which the format cannot express (see [`clamp_alignments`]).
pub fn write(out: &mut impl Write, heap_hint: u64, weight: u64, ops: &[Request]) -> io::Result<()> {
    let num_ids = ops
        .iter()
        .map(|op| u64::from(op.id()) + 1)
        .max()
        .unwrap_or(0);
    writeln!(out, "{heap_hint}\n{num_ids}\n{}\n{weight}", ops.len())?;
    for op in ops {
        match *op {
            Request::Alloc { align, .. } if align > MALLOC_ALIGN => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a .rep file cannot express alignment {align}"),
                ))
            }
            Request::Alloc { id, size, .. } => writeln!(out, "a {id} {size}")?,
            Request::Realloc { id, size } => writeln!(out, "r {id} {size}")?,
            Request::Free { id } => writeln!(out, "f {id}")?,
        }
    }
    Ok(())
}

/// The stream as a `.rep` file can hold it: alignments above malloc-lab's are
/// lost; returns how many were.
pub fn clamp_alignments(ops: &mut [Request]) -> u64 {
    let mut lost = 0;
    for op in ops {
        if let Request::Alloc { align, .. } = op {
            if *align > MALLOC_ALIGN {
                *align = MALLOC_ALIGN;
                lost += 1;
            }
        }
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(text: &str) -> String {
        parse("t.rep", text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn reads_requests_and_applies_c_semantics() {
        let t = parse(
            "t.rep",
            b"0\n3\n7\n1\na 0 10\nr 0 20\nf -1\nr 1 5\nr 1 0\nf 0\na 0 4\n",
        )
        .unwrap();
        assert_eq!(
            t.requests,
            vec![
                Request::Alloc {
                    id: 0,
                    size: 10,
                    align: 8
                },
                Request::Realloc { id: 0, size: 20 },
                Request::Alloc {
                    id: 1,
                    size: 5,
                    align: 8
                },
                Request::Free { id: 1 },
                Request::Free { id: 0 },
                Request::Alloc {
                    id: 0,
                    size: 4,
                    align: 8
                },
            ]
        );
        assert_eq!(t.lines, vec![5, 6, 8, 9, 10, 11]);
        assert_eq!(
            t.quirks.iter().map(|q| q.line).collect::<Vec<_>>(),
            vec![7, 8, 9]
        );
    }

    #[test]
    fn crlf_and_extra_whitespace_read_as_lf() {
        let lf = parse("t.rep", b"0\n2\n3\n1\na 0 10\na 1 5\nf 0\n").unwrap();
        let crlf = parse("t.rep", b"0\r\n2 3\r\n1\r\n\r\na\t0  10\r\na 1 5\r\nf 0").unwrap();
        assert_eq!(lf.requests, crlf.requests);
        assert_eq!(crlf.lines, vec![5, 6, 7]);
    }

    #[test]
    fn refuses_bad_input_naming_file_and_line() {
        assert_eq!(
            err("0\n1\n"),
            "t.rep:2: truncated header: expected 4 integers, found 2"
        );
        assert_eq!(
            err("0 1 2 1\na 0 8\n"),
            "t.rep:2: truncated: the header announces 2 requests, the file ends after 1"
        );
        assert_eq!(
            err("0 1 1 1\na 0 8\nf 0\n"),
            "t.rep:3: more requests than the 1 the header announces"
        );
        assert_eq!(
            err("0 1 1 1\na 0\n"),
            "t.rep:2: `a` takes 2 field(s), found 1"
        );
        assert_eq!(
            err("0 1 1 1\nx 0\n"),
            "t.rep:2: unknown request `x` (expected a, r or f)"
        );
        assert_eq!(
            err("0 1 1 1\na 0 -4\n"),
            "t.rep:2: expected a size, found `-4`"
        );
        assert_eq!(
            err("0 1 1 1\na 1 4\n"),
            "t.rep:2: id 1 out of range (header says 1 ids)"
        );
        assert_eq!(
            err("0 1 2 1\na 0 4\na 0 4\n"),
            "t.rep:3: `a 0` while id 0 is still live"
        );
        assert_eq!(err("0 1 1 1\nf 0\n"), "t.rep:2: `f 0` but id 0 is not live");
        assert_eq!(
            err("0 x 1 1\n"),
            "t.rep:1: expected the number of ids, found `x`"
        );
    }

    fn ops_strategy() -> impl Strategy<Value = Vec<Request>> {
        prop::collection::vec((0u32..8, 0u64..100_000, 0u8..3), 0..200).prop_map(|raw| {
            let mut live = [false; 8];
            raw.into_iter()
                .map(|(id, size, kind)| {
                    let i = id as usize;
                    match (live[i], kind) {
                        (false, _) => {
                            live[i] = true;
                            Request::Alloc { id, size, align: 8 }
                        }
                        (true, 0) => {
                            live[i] = false;
                            Request::Free { id }
                        }
                        (true, _) => Request::Realloc { id, size: size + 1 },
                    }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn write_then_read_gives_the_same_ops(ops in ops_strategy()) {
            let mut text = Vec::new();
            write(&mut text, 0, 1, &ops).unwrap();
            let t = parse("w.rep", &text).unwrap();
            prop_assert_eq!(t.requests, ops);
            prop_assert!(t.quirks.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse("junk.rep", &bytes);
        }

        #[test]
        fn every_truncation_of_a_valid_trace_is_refused(ops in ops_strategy(), cut in 0usize..10_000) {
            let mut text = Vec::new();
            write(&mut text, 0, 1, &ops).unwrap();
            let full = text.len();
            // Cut at a line boundary so the remaining lines still parse.
            let cut = cut % (full + 1);
            let end = text[..cut].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            prop_assume!(end < full);
            prop_assert!(parse("cut.rep", &text[..end]).is_err());
        }
    }
}
