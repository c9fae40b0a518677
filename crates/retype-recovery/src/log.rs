//! What a CantripOS log says: the manager's counters after each request,
//! the per-slab dumps some logs print, and the object descriptors its sizes
//! read as.
//!
//! The log does not name object types; only sizes matter for placement, and a
//! recovered descriptor names its type by its size ([`type_for_size`]).

use alloc::vec::Vec;

use retype_core::mm::slab::Slab;
use retype_core::mm::{MemoryManager, ObjDesc, Stats};
use retype_core::objects::ObjectType;

/// The counters a CantripOS log prints after each request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub bytes_in_use: u64,
    pub objects_in_use: u64,
    pub slab_resets: u64,
    pub failed_retypes: u64,
    pub ooms: u64,
    pub bytes_requested: u64,
    pub frag_watermark: u64,
    pub frag_alignment: u64,
}

impl LogCounters {
    /// The same counters of one of our runs.
    pub fn of(s: &Stats) -> LogCounters {
        LogCounters {
            bytes_in_use: s.bytes_in_use,
            objects_in_use: s.objects_in_use,
            slab_resets: s.slab_resets,
            failed_retypes: s.failed_retypes,
            ooms: s.ooms,
            bytes_requested: s.bytes_requested,
            frag_watermark: s.frag_watermark,
            frag_alignment: s.frag_alignment,
        }
    }

    /// The counters a replay must agree on, by name: all but bytes
    /// requested, which follows from the rest.
    fn compared(&self) -> [(&'static str, u64); 7] {
        [
            ("bytes in use", self.bytes_in_use),
            ("objects in use", self.objects_in_use),
            ("slab resets", self.slab_resets),
            ("watermarking", self.frag_watermark),
            ("alignment", self.frag_alignment),
            ("failed retypes", self.failed_retypes),
            ("OOMs", self.ooms),
        ]
    }

    /// How many counters [`LogCounters::compared`] has.
    pub(crate) const COMPARED: u32 = 7;

    /// How many of the compared counters agree (0..=7).
    pub(crate) fn agreement(&self, other: &LogCounters) -> u32 {
        self.compared()
            .iter()
            .zip(other.compared())
            .filter(|(a, b)| a.1 == b.1)
            .count() as u32
    }

    /// Whether bytes in use, slab resets and both fragmentations agree: what
    /// the study counts as an exact match.
    pub fn exact(&self, other: &LogCounters) -> bool {
        (
            self.bytes_in_use,
            self.slab_resets,
            self.frag_watermark,
            self.frag_alignment,
        ) == (
            other.bytes_in_use,
            other.slab_resets,
            other.frag_watermark,
            other.frag_alignment,
        )
    }

    /// The compared counters that differ: name, ours, theirs.
    pub fn differences(&self, other: &LogCounters) -> Vec<(&'static str, u64, u64)> {
        self.compared()
            .iter()
            .zip(other.compared())
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, b)| (a.0, a.1, b.1))
            .collect()
    }
}

/// One logged request: the counters after it, and the size of the last
/// retype the kernel refused while serving it, `(count, object bytes)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoggedOp {
    pub after: LogCounters,
    pub refused: Option<(u64, u64)>,
    /// Retired instructions of the request, in `latency_*` logs.
    pub instructions: Option<u64>,
}

/// One slab as a CantripOS per-slab dump prints it (the `memory_stats_*`
/// logs of the uniform runs): its watermark (`occupied_memory_per_slab`) and
/// both fragmentations (`lhs_…` watermarking, `in_between_…` alignment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabCounters {
    pub watermark: u64,
    pub frag_watermark: u64,
    pub frag_alignment: u64,
}

impl SlabCounters {
    /// The same figures of one of our slabs.
    pub fn of(slab: &Slab) -> SlabCounters {
        SlabCounters {
            watermark: slab.watermark(),
            frag_watermark: slab.frag_watermark(),
            frag_alignment: slab.frag_alignment(),
        }
    }

    /// Every slab of `mm`, in its order (the dumps' order: by descending size).
    pub fn all(mm: &MemoryManager) -> Vec<SlabCounters> {
        mm.slabs().iter().map(SlabCounters::of).collect()
    }

    /// The figures on which `self` (ours) and `log` differ: name, ours, the log's.
    pub fn differences(&self, log: &SlabCounters) -> Vec<(&'static str, u64, u64)> {
        [
            ("watermark", self.watermark, log.watermark),
            ("watermarking", self.frag_watermark, log.frag_watermark),
            ("alignment", self.frag_alignment, log.frag_alignment),
        ]
        .into_iter()
        .filter(|c| c.1 != c.2)
        .collect()
    }
}

/// A per-slab dump, taken after logged request `op`: a finer constraint than
/// the per-request counters, which sum over the slabs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub op: usize,
    pub slabs: Vec<SlabCounters>,
}

/// The object type a recovered descriptor is named by, from its size.
/// RISC-V 32 sizes: 16 B endpoint, 32 B notification (MCS), 512 B TCB,
/// 4 KiB page; any other size becomes an untyped of that size.
pub fn type_for_size(bytes: u64) -> ObjDesc {
    let bits = bytes.trailing_zeros();
    match bits {
        4 => ObjDesc::new(ObjectType::Endpoint, 0, 1),
        5 => ObjDesc::new(ObjectType::Notification, 0, 1),
        9 => ObjDesc::new(ObjectType::Tcb, 0, 1),
        12 => ObjDesc::new(ObjectType::SmallPage, 0, 1),
        b => ObjDesc::new(ObjectType::Untyped, b, 1),
    }
}

/// What request `i` of a log did to bytes and objects in use, and whether it
/// was refused: what two logs of the same requests share.
pub(crate) fn delta(log: &[LoggedOp], i: usize) -> Option<(i64, i64, bool)> {
    let now = log.get(i)?.after;
    let prev = if i == 0 {
        LogCounters::default()
    } else {
        log[i - 1].after
    };
    Some((
        now.bytes_in_use as i64 - prev.bytes_in_use as i64,
        now.objects_in_use as i64 - prev.objects_in_use as i64,
        now.ooms > prev.ooms,
    ))
}

/// `count` objects of `size` bytes as one descriptor.
pub(crate) fn descriptor(count: u64, size: u64) -> Option<ObjDesc> {
    if !size.is_power_of_two() || size < 16 || count == 0 || count > u64::from(u32::MAX) {
        return None;
    }
    Some(ObjDesc {
        count: count as u32,
        ..type_for_size(size)
    })
}
