//! retype-core: the machine-independent heart of retype.
//!
//! Everything here is `no_std + alloc` and free of I/O so that the same code
//! can run inside a kernel, a simulator, a benchmark or a property test.
//!
//! - [`objects`]: seL4 object types and their sizes per architecture.
//! - [`caps`]: Barrelfish-style typed capabilities and the mapping database.
//! - [`heap`]: heap allocators over real memory.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod caps;
pub mod heap;
pub mod kernel;
pub mod mm;
pub mod objects;
pub mod rng;
pub mod untyped;
pub mod workload;
