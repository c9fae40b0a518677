//! Typed capabilities as in Barrelfish (seed 001): capability types for all
//! memory, CSpaces of two-level CNodes, the retype rules in both the
//! Barrelfish (offset) and seL4 (watermark) modes, copy, mint, delete with
//! cascades, revoke, and page tables that applications build themselves
//! through `map`, `unmap` and `modify_flags` with Mapping capabilities.
//!
//! One of two capability models, on purpose. [`Caps`] is the whole system of
//! one core: slots addressed through CSpaces, every capability in the mapping
//! database, every invocation checked before it changes anything. It is what
//! the cross-core protocol ([`protocol`], one replica per core) extends.
//! [`crate::kernel`] is the flat seL4 kernel that only the memory manager
//! drives, kept apart so its requests stay cheap; the two have their own
//! `CapId` and `CapError` (an arena slot here, a bare index there) and share
//! the watermark rule of [`crate::untyped`].
//!
//! - [`types`]: the capability types and the retype rules table.
//! - [`cap`]: a capability, its rights, badge and ordering key.
//! - [`mdb`]: the mapping database (three augmented AA trees and the seL4 list).
//! - [`cspace`]: CSpaces and capability references.
//! - [`cow_vec`]: the vector of slots, whose copies share what they do not change.
//! - [`vnode`]: which page-table level maps which type.
//! - [`protocol`]: the replicas of seed 001's chapter 4 and their protocol.
//! - [`system`]: the invocations: copy, mint, retype (both modes), delete,
//!   revoke, map, unmap, modify_flags.

pub mod cap;
pub mod cow_vec;
pub mod cspace;
pub mod error;
pub mod mdb;
pub mod protocol;
pub mod system;
pub mod types;
pub mod vnode;

pub use cap::{Cap, Rights};
pub use cspace::{CSpace, CapRef, Level};
pub use error::CapError;
pub use mdb::{AaTree, List, Mdb};
pub use system::{Boot, Caps};
pub use types::CapType;

#[cfg(test)]
mod tests;
