//! retype-recovery: recovering the requests of a CantripOS run from its logs,
//! for seed 000's study.
//!
//! The logs print the manager's counters after every request, not the
//! requests. An allocation shows as growth of bytes and objects in use: `b`
//! bytes over `k` objects are `k` objects of `b/k` bytes (every logged bundle
//! is uniform). A refused allocation shows as one more OOM; its size comes
//! from the kernel's "Insufficient memory (k * s bytes needed" message when
//! the log has one. A free shows as a drop of bytes and objects but does not
//! say *which* allocation went: we take the live allocations that add up to
//! exactly that drop (one allocation, or a run of consecutive ones: an
//! application exiting frees everything it holds), replay each on a copy of
//! the manager with the log's own policy and accounting, and search for the
//! choices under which every counter agrees with the log after every request.
//! Three searches do it, side by side: the deferred search, which puts a
//! free down to a slab only when the logs tell which (fast, and a proof when
//! every branch dies); the depth-first search over every choice, best by
//! look-ahead first, within a bound; and the sweep over every distinct
//! state, request by request (a proof when the states stay few).
//!
//! The modules, bottom-up; each imports only those before it:
//! - `log`: what a log says: the counters after each request, the per-slab
//!   dumps, and the descriptors its sizes read as;
//! - `dumps`: what the per-slab dumps say about the requests before them;
//! - `replay`: one branch: the requests replayed so far, one manager per log,
//!   and what one more logged request can make of it;
//! - `end`: what the searches share: how a search ends (a match, or a
//!   [`Death`] with its proof), and the errors of a log;
//! - `occupancy`: the rule the deferred search keeps: a slab keeps an object
//!   between its resets;
//! - `lookahead`: a free's choices ordered by replaying further, and the
//!   recovery by that order alone;
//! - `deferred`, `depth_first`, `sweep`: the three searches;
//! - `resolve`: the entry, [`resolve()`]: checks the logs and picks among the
//!   searches.

#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

// Bottom-up, as listed above: each imports only those before it.
mod log;

mod dumps;

mod replay;

mod end;

mod occupancy;

mod lookahead;

// The three searches, side by side.
mod deferred;
mod depth_first;
mod sweep;

mod resolve;

pub use end::{Death, ResolveError};
pub use log::{type_for_size, Checkpoint, LogCounters, LoggedOp, SlabCounters};
pub use resolve::{resolve, Log, Resolved, SetAside};
