//! Typed capabilities as in Barrelfish (seed 001): capability types for all
//! memory, CSpaces of two-level CNodes, the retype rules in both the
//! Barrelfish (offset) and seL4 (watermark) modes, copy, mint, delete with
//! cascades, revoke, and page tables that applications build themselves
//! through `map`, `unmap` and `modify_flags` with Mapping capabilities.
//!
//! - [`types`]: the capability types and the retype rules table.
//! - [`cap`]: a capability, its rights, badge and ordering key.
//! - [`mdb`]: the mapping database (augmented AA tree and the seL4 list).

pub mod cap;
pub mod mdb;
pub mod types;
