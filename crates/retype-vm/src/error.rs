//! Why an invocation was refused or could not take effect.

use std::fmt;
use std::io;

use retype_core::caps::CapError;

#[derive(Debug)]
pub enum VmError {
    /// retype-core refused the invocation: nothing changed.
    Cap(CapError),
    /// The physical memory of this space has no pages of the asked size
    /// (a hugetlb memfd maps only its huge pages, a plain memfd only 4 KiB).
    PageSize { asked: u64, backing: u64 },
    /// Device frames have no memory behind them inside one process.
    DeviceFrame,
    /// The mapping's page table is not reachable from the space's root, so
    /// it has no address in the window.
    NotInWindow,
    /// The virtual regions ran out of what they were given: RAM pages,
    /// CNode slots or address space (see [`crate::vregion`]).
    Exhausted(&'static str),
    /// No virtual region starts at this window offset.
    NoRegion(u64),
    /// A Linux facility this needs is not available here (and why).
    Unsupported(String),
    /// A system call failed.
    Os { call: &'static str, err: io::Error },
    /// The invocation took effect on the capabilities, but a system call
    /// failed part-way through making the window show it: the window was
    /// emptied (it grants no access the tables do not) and is rebuilt from
    /// the tables at the next invocation or fault in it.
    Behind(Box<VmError>),
}

impl VmError {
    /// The last OS error of `call`.
    pub fn os(call: &'static str) -> VmError {
        VmError::Os {
            call,
            err: io::Error::last_os_error(),
        }
    }
}

impl From<CapError> for VmError {
    fn from(e: CapError) -> VmError {
        VmError::Cap(e)
    }
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::Cap(e) => write!(f, "capability refused: {e}"),
            VmError::PageSize { asked, backing } => write!(
                f,
                "this space's memory has {} KiB pages, not {} KiB",
                backing >> 10,
                asked >> 10
            ),
            VmError::DeviceFrame => write!(f, "device frames cannot be mapped in one process"),
            VmError::NotInWindow => write!(f, "the page table is not reachable from the root"),
            VmError::Exhausted(what) => write!(f, "the virtual regions have no {what} left"),
            VmError::NoRegion(va) => write!(f, "no virtual region starts at {va:#x}"),
            VmError::Unsupported(why) => write!(f, "not available here: {why}"),
            VmError::Os { call, err } => write!(f, "{call}: {err}"),
            VmError::Behind(e) => write!(
                f,
                "the capabilities changed, but the window could not follow ({e}); \
                 it shows nothing until the next invocation or fault rebuilds it"
            ),
        }
    }
}

impl std::error::Error for VmError {}
