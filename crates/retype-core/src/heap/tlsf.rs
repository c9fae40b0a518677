//! Two-level segregated fit (Masmano et al., ECRTS 2004): free lists indexed by
//! the size's power of two (first level) and by the next `SL_BITS` bits (second
//! level), with a bitmap per level, so that allocate and free are O(1).
//!
//! A request is rounded up to the start of the next list ("good fit"), so any
//! block of the first non-empty list at or above it fits without a search.

use super::block::{Block, GRANULE};
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::HeapKind;
use super::{ensure, CheckError};

/// TLSF.
pub type Tlsf<S> = FitHeap<TwoLevel, S>;

const SL_BITS: u32 = 4;
const SL: usize = 1 << SL_BITS;
/// Sizes below this share first level 0, in lists one granule apart.
const SMALL: usize = SL * GRANULE;
const SMALL_SHIFT: u32 = SMALL.trailing_zeros();
const FL: usize = (usize::BITS - SMALL_SHIFT + 1) as usize;

pub struct TwoLevel {
    lists: [[FreeList; SL]; FL],
    /// Bit f is set when first level f has a non-empty list.
    fl_map: u64,
    /// Bit s of `sl_map[f]` is set when list (f, s) is not empty.
    sl_map: [u32; FL],
}

impl Default for TwoLevel {
    fn default() -> Self {
        TwoLevel {
            lists: core::array::from_fn(|_| core::array::from_fn(|_| FreeList::default())),
            fl_map: 0,
            sl_map: [0; FL],
        }
    }
}

/// The list (first level, second level) that holds blocks of `size` bytes.
fn mapping(size: usize) -> (usize, usize) {
    if size < SMALL {
        (0, size / GRANULE)
    } else {
        let f = usize::BITS - 1 - size.leading_zeros();
        let s = (size >> (f - SL_BITS)) ^ SL;
        ((f - SMALL_SHIFT + 1) as usize, s)
    }
}

/// Rounds `size` up to the first size of the next list, so that every block
/// of that list or any later one holds it.
fn round_up(size: usize) -> Option<usize> {
    if size < SMALL {
        Some(size)
    } else {
        let f = usize::BITS - 1 - size.leading_zeros();
        let step = (1usize << (f - SL_BITS)) - 1;
        Some(size.checked_add(step)? & !step)
    }
}

impl TwoLevel {
    fn set(&mut self, f: usize, s: usize, nonempty: bool) {
        if nonempty {
            self.sl_map[f] |= 1 << s;
            self.fl_map |= 1 << f;
        } else {
            self.sl_map[f] &= !(1 << s);
            if self.sl_map[f] == 0 {
                self.fl_map &= !(1 << f);
            }
        }
    }
}

impl FreeIndex for TwoLevel {
    const KIND: HeapKind = HeapKind::Tlsf;
    const LINKS: usize = free_list::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe {
            let (f, s) = mapping(b.size());
            self.lists[f][s].push_front(b);
            self.set(f, s, true);
        }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract; the size locates the list.
        unsafe {
            let (f, s) = mapping(b.size());
            self.lists[f][s].remove(b);
            if self.lists[f][s].is_empty() {
                self.set(f, s, false);
            }
        }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        let (f, s) = mapping(round_up(size)?);
        if f >= FL {
            return None;
        }
        let here = self.sl_map[f] & (!0u32).checked_shl(s as u32).unwrap_or(0);
        let (f, s) = if here != 0 {
            (f, here.trailing_zeros() as usize)
        } else {
            let above = self.fl_map & (!0u64).checked_shl(f as u32 + 1).unwrap_or(0);
            if above == 0 {
                return None;
            }
            let f = above.trailing_zeros() as usize;
            (f, self.sl_map[f].trailing_zeros() as usize)
        };
        self.lists[f][s].head()
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        for (fl, row) in self.lists.iter().enumerate() {
            ensure!(
                (self.sl_map[fl] != 0) == (self.fl_map & (1 << fl) != 0),
                "tlsf: first-level bitmap disagrees at {fl}"
            );
            for (sl, list) in row.iter().enumerate() {
                ensure!(
                    list.is_empty() == (self.sl_map[fl] & (1 << sl) == 0),
                    "tlsf: second-level bitmap disagrees at ({fl}, {sl})"
                );
                // SAFETY: forwarded contract; `f` accepts `b` before we read its size.
                unsafe {
                    list.visit(&mut |b| {
                        f(b)?;
                        ensure!(
                            mapping(b.size()) == (fl, sl),
                            "tlsf: block {:p} in the wrong list",
                            b.addr()
                        );
                        Ok(())
                    })?;
                }
            }
        }
        Ok(())
    }
}
