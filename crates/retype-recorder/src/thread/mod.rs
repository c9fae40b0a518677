//! Each thread's part of the recording, bottom-up (each module imports only
//! those listed before it):
//!
//! - [`cost`]: when each thread started, and what it cost at its exit (CPU,
//!   wait time, context switches); the `pthread_create` wrapper;
//! - [`buffer`]: the per-thread event buffers, all in one registry;
//! - [`local`]: this thread's state (one thread-local), which points to its buffer;
//! - [`exit`]: a thread's exit: its events and summary written, its buffer given back;
//! - [`own`]: this thread's buffer, taken on its first event.

pub mod buffer;
pub mod cost;
pub mod exit;
pub mod local;
pub mod own;
