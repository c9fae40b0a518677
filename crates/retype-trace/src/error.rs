//! Errors of the trace reader and the text importers.

use std::fmt;

use crate::event::CutShort;

/// A trace that could not be read: what went wrong and at which byte.
#[derive(Debug)]
pub struct TraceError {
    /// Offset from the start of the file of the byte where reading failed.
    pub offset: u64,
    pub kind: TraceErrorKind,
}

#[derive(Debug)]
pub enum TraceErrorKind {
    Io(std::io::Error),
    /// Not a retype trace, or a version this reader does not know.
    BadHeader(String),
    /// The file ends inside a record or before the end record (`what` says
    /// which); `cut` says how much of it reads.
    Truncated {
        what: &'static str,
        cut: CutShort,
    },
    /// A record that breaks the format.
    Corrupt(String),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: ", self.offset)?;
        match &self.kind {
            TraceErrorKind::Io(e) => write!(f, "read error: {e}"),
            TraceErrorKind::BadHeader(m) => write!(f, "not a retype trace: {m}"),
            TraceErrorKind::Truncated { what, .. } => {
                write!(f, "truncated trace: file ends {what}")
            }
            TraceErrorKind::Corrupt(m) => write!(f, "corrupt trace: {m}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// A text trace (malloc-lab, wee_alloc, valgrind, CSV) that could not be read: the file and
/// the line, as compilers name them (`FILE:LINE: message`).
#[derive(Debug)]
pub struct ParseError {
    /// The file, as the caller named it.
    pub file: String,
    /// 1-based line number; 0 when the error is about the file as a whole.
    pub line: usize,
    pub message: String,
}

impl ParseError {
    pub fn new(file: &str, line: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.file, self.message),
            n => write!(f, "{}:{n}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ParseError {}
