//! retype-core: the machine-independent heart of retype.
//!
//! Everything here is `no_std + alloc` and free of I/O so that the same code
//! can run inside a kernel, a simulator, a benchmark or a property test.
//!
//! - [`objects`]: seL4 object types and their sizes per architecture.
//! - [`untyped`]: seL4's untyped retype rule (watermark, alignment, reset).
//! - [`kernel`]: the minimal seL4 kernel the memory manager drives.
//! - [`mm`]: the CantripOS memory manager: slabs, bookkeeping, placement policies.
//! - [`workload`]: request streams: the uniform generator, scripts.
//! - [`rng`]: SplitMix64, the generator behind every synthetic workload.
//! - [`caps`]: Barrelfish-style typed capabilities and the mapping database.
//! - [`heap`]: heap allocators over real memory.
//! - [`cheri`]: CHERI compressed capabilities (Morello, CHERI-RISC-V).
//!
//! Definitions, test vectors and the layering rules: `docs/design.md`.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod caps;
pub mod cheri;
pub mod heap;
pub mod kernel;
pub mod mm;
pub mod objects;
pub mod rng;
pub mod untyped;
pub mod workload;
