//! What retype-malloc's size classes and large-block layout would pad on a
//! CHERI machine. Nothing on x86 enforces bounds, so this is computed, not
//! measured: from a description of the classes and the layout kept here,
//! because the CLI does not depend on retype-malloc (its sources:
//! `crates/retype-malloc/src/size_class.rs`, `consts.rs` and `large.rs`).
//!
//! Classes: multiples of 16 B up to 256 B, of 32 B up to 512 B, of 64 B up
//! to 1 KiB, then eight per doubling (`(9 + sub) << (7 + g)`) up to 128 KiB.
//! A page carves its blocks back to back from its area, which starts on a
//! 4 KiB boundary at least (a 64 KiB slice, or past the 20 KiB segment
//! header). A larger block is its own mapping: it starts 20 KiB in (the
//! segment header, rounded to its alignment) and the mapping is whole 4 KiB
//! pages; a block of 2 MiB or more starts 2 MiB in and the mapping is whole
//! 2 MiB pages.

use retype_core::cheri::Format;
use retype_core::heap::cheri::exact_bounds;

/// The largest block a page holds; beyond it blocks are mapped on their own.
const MEDIUM_MAX: u64 = 128 << 10;
/// What every page area's start is aligned to.
const AREA_ALIGN: u64 = 4 << 10;
/// The segment header in front of a large block.
const HEADER: u64 = 20 << 10;
const OS_PAGE: u64 = 4 << 10;
/// From this size large blocks start on, and fill, 2 MiB pages.
const HUGE: u64 = 2 << 20;
/// malloc's alignment.
const MIN_ALIGN: u64 = 16;

/// Every class's block size, smallest first.
pub fn block_sizes() -> Vec<u64> {
    let mut sizes: Vec<u64> = (16..=256).step_by(16).collect();
    sizes.extend((288..=512).step_by(32));
    sizes.extend((576..=1024).step_by(64));
    for g in 0.. {
        for sub in 0..8 {
            let size = (9 + sub) << (7 + g);
            if size > MEDIUM_MAX {
                return sizes;
            }
            sizes.push(size);
        }
    }
    unreachable!("the classes end at MEDIUM_MAX")
}

/// One class in one format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClassFigures {
    pub block: u64,
    /// Whether every block of a page has exact bounds as it is carved.
    pub exact: bool,
    /// The smallest block size whose length is exact and whose alignment
    /// divides it (so that every block of a page is aligned), and what it
    /// adds to the block.
    pub exact_block: u64,
    pub padding: u64,
    /// Whether that alignment exceeds what a page area's start gives, so
    /// that areas would have to start on larger boundaries too.
    pub area_realigned: bool,
}

/// The class of blocks of `block` bytes in `format` (block `i` starts
/// `i * block` into its page's area).
pub fn class(format: Format, block: u64) -> ClassFigures {
    let bounds = |size: u64| exact_bounds(format, size).expect("a class fits every format");
    let mut size = block;
    loop {
        let b = bounds(size);
        if b.length == size && size.is_multiple_of(b.alignment) {
            break;
        }
        size = b.length.next_multiple_of(b.alignment).max(size + MIN_ALIGN);
    }
    let area_realigned = bounds(size).alignment > AREA_ALIGN;
    ClassFigures {
        block,
        exact: size == block && !area_realigned,
        exact_block: size,
        padding: size - block,
        area_realigned,
    }
}

/// A large block of `size` bytes in `format`, against the layout as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LargeFigures {
    pub size: u64,
    /// Bytes added to the length (CRRL).
    pub padding: u64,
    /// The alignment exact bounds need, and what the layout gives.
    pub needs_align: u64,
    pub layout_align: u64,
    /// The mapping now, and with exact bounds (the block moved to an aligned
    /// offset, its length padded).
    pub mapping: u64,
    pub exact_mapping: u64,
}

pub fn large(format: Format, size: u64) -> Option<LargeFigures> {
    let b = exact_bounds(format, size)?;
    let (offset, unit) = if size >= HUGE {
        (HUGE, HUGE)
    } else {
        (HEADER.next_multiple_of(MIN_ALIGN), OS_PAGE)
    };
    let exact_offset = offset.next_multiple_of(b.alignment);
    Some(LargeFigures {
        size,
        padding: b.padding(size),
        needs_align: b.alignment,
        layout_align: 1 << offset.trailing_zeros(),
        mapping: (offset + size).next_multiple_of(unit),
        exact_mapping: (exact_offset + b.length).next_multiple_of(unit),
    })
}

/// The large sizes the table shows: just past the classes, round sizes,
/// and just past powers of two, where rounding costs most.
pub const LARGE_SIZES: [u64; 10] = [
    MEDIUM_MAX + 1,
    200_000,
    (256 << 10) + 1,
    1_000_000,
    HUGE,
    HUGE + 1,
    10_000_000,
    (32 << 20) + 1,
    100_000_000,
    (1 << 30) + 1,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classes_are_retype_mallocs() {
        let sizes = block_sizes();
        // Classes 1..=64 name 16-byte steps up to 1 KiB, of which 16 + 8 + 8
        // are classes; then 56 more up to 128 KiB (CLASSES = 121).
        assert_eq!(sizes.len(), 16 + 8 + 8 + 56);
        assert_eq!(sizes[..3], [16, 32, 48]);
        assert!(sizes.contains(&288) && sizes.contains(&576) && sizes.contains(&1152));
        assert_eq!(*sizes.last().unwrap(), MEDIUM_MAX);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_padded_class_is_exact_everywhere() {
        for &format in Format::ALL {
            for block in block_sizes() {
                let c = class(format, block);
                let b = exact_bounds(format, c.exact_block).unwrap();
                assert_eq!(b.length, c.exact_block, "{format} {block}");
                assert_eq!(c.exact_block % b.alignment, 0);
                assert_eq!(c.exact, c.padding == 0 && !c.area_realigned);
            }
        }
        // RV32 rounds from 64 B: 80-byte blocks need 8-byte granules, which they are.
        assert!(class(Format::Rv32, 80).exact);
    }

    #[test]
    fn a_large_block_pads_where_its_length_rounds() {
        let f = large(Format::Morello, HUGE + 1).unwrap();
        assert_eq!(f.layout_align, HUGE);
        assert!(f.padding > 0 && f.exact_mapping >= f.mapping);
        let small = large(Format::Morello, MEDIUM_MAX + 1).unwrap();
        assert_eq!(small.layout_align, 4 << 10);
    }
}
