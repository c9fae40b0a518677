//! retype-trace: the trace format and the importers of other people's traces.
//!
//! - [`event`]: what a trace holds (events, thread summaries, metadata, RSS samples, mapping calls).
//! - [`codec`]: the byte encoding, allocation-free (the recorder uses it inside malloc).
//! - [`writer`], [`reader`]: streaming I/O of `.rtr` files; [`trace`]: a whole trace in memory.
//! - [`requests`]: the request stream, what every format comes to and the replay runs:
//!   made from events ([`requests::from_events`]) or from a malloc-lab file.
//! - [`malloclab`], [`wee_alloc`], [`valgrind`], [`csv`]: text formats of other tools, each
//!   read with one [`ParseError`] naming the file and line; [`format`](mod@format): which is
//!   which, and any file read as a trace or as requests.
//! - [`summary`]: what `retype trace info` reports; [`heap`]: the live
//!   blocks as events change them, which [`sites`] (what `retype trace sites`
//!   counts per call stack) and [`timeline`] (live bytes over time) walk;
//!   [`window`]: the part of a trace they look at; [`mapped`]: the bytes the
//!   program mapped itself (mmap, brk), the timeline's third series; [`recorded`]: the stretches of
//!   the run a trace recorded, when recording was started and stopped; [`kind`]: whether a
//!   trace holds every call, per-stack counters (aggregate) or sampled calls, and what a
//!   sampled call stands for;
//!   [`phase`]: the stretches the program named itself (`retype_mark`), each a window.

pub mod codec;
pub mod csv;
pub mod error;
pub mod event;
pub mod format;
pub mod heap;
pub mod kind;
pub mod malloclab;
pub mod mapped;
pub mod phase;
pub mod reader;
pub mod recorded;
pub mod requests;
pub mod sites;
pub mod summary;
pub mod timeline;
pub mod trace;
pub mod valgrind;
pub mod wee_alloc;
pub mod window;
pub mod writer;

pub use error::{ParseError, TraceError};
pub use event::{
    Counters, CutShort, Event, MapOp, Mapping, Module, Op, Record, RssSample, Snapshot, Stack,
    ThreadSummary,
};
pub use kind::Kind;
pub use reader::Reader;
pub use requests::{Request, Requests};
pub use trace::Trace;
pub use writer::Writer;
