//! Memory objects (Barrelfish's `memobj`): what backs a virtual region.
//! A fault in a region asks its object for the page behind the faulting
//! address, which the region then maps; an object that made its frames
//! itself frees them when the region is unmapped.

use retype_core::caps::CapRef;

/// What backs a virtual region, as Barrelfish's library offers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memobj {
    /// Zeroed frames made on the first touch of each page, one page each
    /// (`memobj_anon`): memory costs nothing until used.
    Anonymous,
    /// One frame of the application's, its pages from `offset` mapped on
    /// first touch (`memobj_one_frame_lazy`); it stays the application's
    /// when the region goes.
    OneFrame { frame: CapRef, offset: u64 },
    /// Frames made and mapped with the region (`memobj_pinned`): no page of
    /// it ever faults for want of memory.
    Pinned,
}

/// Where the page a fault asks for comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A fresh frame of one zeroed page, which the region owns.
    Fresh,
    /// The page at `offset` bytes into the application's `frame`.
    Borrowed { frame: CapRef, offset: u64 },
    /// Nothing: the object fills no page on demand.
    None,
}

impl Memobj {
    /// What a fault on the page `offset` bytes into the region gets.
    pub(crate) fn page(&self, offset: u64) -> Source {
        match *self {
            Memobj::Anonymous => Source::Fresh,
            Memobj::OneFrame { frame, offset: o } => Source::Borrowed {
                frame,
                offset: o + offset,
            },
            Memobj::Pinned => Source::None,
        }
    }
}
