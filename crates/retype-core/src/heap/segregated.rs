//! Segregated fits (Wilson et al. §3.6): one LIFO free list per power-of-two
//! size class. A request is served first fit from its own class; failing
//! that, by the first block of the next non-empty larger class (found through
//! a bitmap), all of whose blocks are large enough.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::HeapKind;
use super::{ensure, CheckError};

/// Segregated fits with power-of-two classes.
pub type Segregated<S> = FitHeap<SizeClasses, S>;

const CLASSES: usize = usize::BITS as usize;

pub struct SizeClasses {
    lists: [FreeList; CLASSES],
    /// Bit c is set when class c is not empty.
    nonempty: u64,
}

impl Default for SizeClasses {
    fn default() -> Self {
        SizeClasses {
            lists: core::array::from_fn(|_| FreeList::default()),
            nonempty: 0,
        }
    }
}

/// The class of a block size: blocks in class c have sizes in [2^c, 2^(c+1)).
fn class(size: usize) -> usize {
    (usize::BITS - 1 - size.leading_zeros()) as usize
}

impl FreeIndex for SizeClasses {
    const KIND: HeapKind = HeapKind::Segregated;
    const LINKS: usize = free_list::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe {
            let c = class(b.size());
            self.lists[c].push_front(b);
            self.nonempty |= 1 << c;
        }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract; the size locates the list.
        unsafe {
            let c = class(b.size());
            self.lists[c].remove(b);
            if self.lists[c].is_empty() {
                self.nonempty &= !(1 << c);
            }
        }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        let c = class(size);
        // SAFETY: the lists hold free blocks.
        if let Some(b) = unsafe { self.lists[c].iter().find(|b| b.size() >= size) } {
            return Some(b);
        }
        let larger = self
            .nonempty
            .checked_shr(c as u32 + 1)?
            .checked_shl(c as u32 + 1)?;
        (larger != 0).then(|| self.lists[larger.trailing_zeros() as usize].head())?
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        for (c, list) in self.lists.iter().enumerate() {
            ensure!(
                list.is_empty() == (self.nonempty & (1 << c) == 0),
                "segregated: bitmap disagrees with class {c}"
            );
            // SAFETY: forwarded contract; `f` accepts `b` before we read its size.
            unsafe {
                list.visit(&mut |b| {
                    f(b)?;
                    ensure!(
                        class(b.size()) == c,
                        "segregated: block {:p} in the wrong class",
                        b.addr()
                    );
                    Ok(())
                })?;
            }
        }
        Ok(())
    }
}
