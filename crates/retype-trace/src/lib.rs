//! retype-trace: the trace format and the importers of other people's traces.
//!
//! - [`event`]: what a trace holds (events, thread summaries, metadata).
//! - [`codec`]: the byte encoding, allocation-free (the recorder uses it inside malloc).
//! - [`writer`], [`reader`]: streaming I/O of `.rtr` files; [`trace`]: a whole trace in memory.
//! - [`malloclab`], [`wee_alloc`], [`valgrind`], [`csv`]: text formats of other tools.
//! - [`summary`]: what `retype trace info` reports; [`sites`]: what
//!   `retype trace sites` counts per call stack; [`window`]: the stretches of
//!   the run a trace recorded, when recording was started and stopped.

pub mod codec;
pub mod csv;
pub mod error;
pub mod event;
pub mod format;
pub mod malloclab;
pub mod reader;
pub mod rep;
pub mod sites;
pub mod summary;
pub mod trace;
pub mod valgrind;
pub mod wee_alloc;
pub mod window;
pub mod writer;

pub use error::{ParseError, TraceError};
pub use event::{CutShort, Event, Module, Op, Record, Stack, ThreadSummary};
pub use reader::Reader;
pub use trace::Trace;
pub use writer::Writer;
