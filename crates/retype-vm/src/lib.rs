//! The capability system of `retype-core` with real effect in one Linux
//! process (seed 001 chapter 3): physical memory is a memfd whose offsets
//! RAM capabilities cover; a reserved window of address space shows what
//! the application's page tables say, so mapping a Frame through a page
//! table is `mmap(MAP_FIXED | MAP_SHARED)` of the frame's offset, unmapping
//! puts the reservation back, `modify_flags` is `mprotect` (inaccessible
//! pages lose their entries instead: see [`space`]), and revoking a Frame
//! removes every mapping of it. Protection faults go to the application's
//! handler, missing pages to its pager (userfaultfd), and the dirty bits of
//! a mapping are an invocation on it.
//!
//! If a system call fails part-way through making the window follow an
//! invocation (the kernel refuses a mapping: too many of them, no memory),
//! the invocation returns [`VmError::Behind`]: its effect on the
//! capabilities stands, and the window is emptied, so it grants no access
//! the tables do not; the next invocation or fault in the window rebuilds it
//! from the tables, its pages reading dirty.
//!
//! - [`memory`]: the memfd (4 KiB pages, or hugetlb 2 MiB / 1 GiB).
//! - [`window`]: the reserved window and the three system calls on it.
//! - [`walk`]: reading the page tables from the root, as an MMU does.
//! - [`sync`]: the system calls that make the window show a range.
//! - [`space`]: the invocations, checked by retype-core, then applied.
//! - [`vm`]: the handle: a locked space ([`shared`]), its fault handler and pager.
//! - [`fault`] and `signal`: SIGSEGV (and SIGBUS) to the application's handler.
//! - [`pager`] and [`uffd`]: missing pages to the application's pager.
//! - [`status`]: dirty and accessed bits (PAGEMAP_SCAN).
//! - [`shadow`]: shadow page tables, the application's record of its
//!   mappings (list or array tables), which uses nothing above.
//! - [`probe`]: can this address be read, written? (without faulting)
//! - [`vregion`]: virtual regions, each backed by a memory object
//!   ([`memobj`]) whose frames and page tables come from [`frames`]; they
//!   use the handle and its fault handler.
//! - `ranges`: which parts of the window take minor faults.

#[cfg(not(target_os = "linux"))]
compile_error!("retype-vm is Linux only");

pub mod error;
pub mod fault;
pub mod frames;
pub mod memobj;
pub mod memory;
pub mod pager;
pub mod probe;
mod ranges;
pub mod shadow;
pub mod shared;
pub mod signal;
pub mod space;
pub mod status;
pub mod sync;
pub mod uffd;
pub mod vm;
pub mod vregion;
pub mod walk;
pub mod window;

pub use error::VmError;
pub use fault::{Fault, Resolution};
pub use memobj::Memobj;
pub use memory::Backing;
pub use pager::PageRequest;
pub use probe::Probe;
pub use shared::SpaceGuard;
pub use space::{Options, Space};
pub use vm::Vm;
pub use vregion::{Vregion, Vregions};
