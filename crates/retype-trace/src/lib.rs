//! retype-trace: the trace format and the importers of other people's traces.

pub mod cantrip;
pub mod malloclab;
