//! CHERI compressed capabilities (seed 004): pointers that carry their own
//! bounds and permissions, in three formats: Arm Morello, CHERI-RISC-V RV64
//! and RV32 (ISAv9; the reference library cheri-compressed-cap calls them
//! CC128M, CC128 and CC64).
//!
//! Seed 004's allocator gives each block a capability with
//! `cheri_setbounds(p, size)` and learns a block's size on free from
//! `cheri_getlen(p)`: the length the bounds were rounded to, which for a
//! large block is more than was asked. What that rounding is, which lengths
//! and bases escape it, and what a capability may and may not be turned into
//! is modelled here bit for bit, and checked against the reference library.
//!
//! Layers, each using only those above it:
//! - [`format`]: the per-format parameters, field positions and permission bits.
//! - [`error`]: why a capability could not be built or derived.
//! - [`encoding`]: the PESBT word, field by field, and its form in memory.
//! - [`concentrate`]: the CHERI Concentrate arithmetic, bits to bounds and
//!   requested bounds to (rounded) bits.
//! - [`capability`]: a capability, decoded from bits or encoded from fields.
//! - [`bounds`]: setting bounds, as the hardware does and checked.
//! - [`representable`]: representable lengths and alignment (CRRL, CRAM) and
//!   address changes, which clear the tag outside the representable region.
//! - [`permissions`]: reducing permissions.
//! - [`sealing`]: sealing and unsealing with object types.
//!
//! The property tests (`crates/retype-core/tests/cheri.rs`) run proptest's
//! 256 cases each; for a million:
//! `PROPTEST_CASES=1000000 cargo test --release -p retype-core --test cheri`.
//! With `RETYPE_CHERI_VECTORS` naming the reference library's `test`
//! directory, they also check its published test inputs.

pub mod bounds;
pub mod capability;
pub mod concentrate;
pub mod encoding;
pub mod error;
pub mod format;
pub mod permissions;
pub mod representable;
pub mod sealing;

pub use bounds::SetBounds;
pub use capability::{Capability, Parts};
pub use error::Error;
pub use format::{Format, Permission};
pub use representable::{representable_alignment_mask, representable_length};
