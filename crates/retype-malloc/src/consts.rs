//! The geometry every layer shares: segment, slice and header sizes, alignments. A leaf: it
//! imports nothing, so any module may use it without creating an import cycle.

/// log2 of [`SEGMENT_SIZE`].
pub(crate) const SEGMENT_SHIFT: usize = 21;
/// Size and alignment of a segment: one transparent huge page.
pub const SEGMENT_SIZE: usize = 1 << SEGMENT_SHIFT;
/// The offset of an address inside its segment.
pub(crate) const SEGMENT_MASK: usize = SEGMENT_SIZE - 1;
/// log2 of [`SLICE_SIZE`].
pub(crate) const SLICE_SHIFT: usize = 16;
/// Bytes in a slice, the unit pages are made of (see [`crate::size_class::span_of`]).
pub const SLICE_SIZE: usize = 1 << SLICE_SHIFT;
/// Slices in a segment.
pub(crate) const SLICES: usize = SEGMENT_SIZE / SLICE_SIZE;
/// The OS page size: mappings are multiples of it.
pub(crate) const OS_PAGE: usize = 4096;
/// Bytes at the start of a segment reserved for its header: the segment descriptor rounded up
/// to OS pages (`segment` checks at compile time that this is exactly its size).
pub const HEADER_SIZE: usize = 5 * OS_PAGE;
/// Smallest alignment of every block.
pub const MIN_ALIGN: usize = 16;
/// At most this many segments created before huge pages are switched on are remembered, to
/// be collapsed into huge pages later; this caps the huge-page threshold at 128 MiB.
pub(crate) const EARLY_SLOTS: usize = 64;
