//! Next fit (Knuth's roving pointer): the search starts where the previous one
//! ended and wraps around the LIFO free list once.

use super::block::Block;
use super::fit::{FitHeap, FreeIndex};
use super::free_list::{self, FreeList};
use super::CheckError;
use super::HeapKind;

/// Next fit, LIFO list with a rover.
pub type NextFit<S> = FitHeap<Roving, S>;

#[derive(Default)]
pub struct Roving {
    list: FreeList,
    /// Where the next search starts; `None` means the head.
    rover: Option<Block>,
}

impl FreeIndex for Roving {
    const KIND: HeapKind = HeapKind::NextFit;
    const LINKS: usize = free_list::LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.push_front(b) }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract; `b` is still linked when we read its successor.
        unsafe {
            if self.rover == Some(b) {
                self.rover = FreeList::next(b);
            }
            self.list.remove(b)
        }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        // SAFETY: the list holds free blocks; the rover is one of them or None.
        unsafe {
            let start = self.rover.or(self.list.head())?;
            let from_rover = core::iter::successors(Some(start), |&b| FreeList::next(b));
            let wrapped = self.list.iter().take_while(|&b| b != start);
            let found = from_rover.chain(wrapped).find(|b| b.size() >= size);
            if found.is_some() {
                self.rover = found;
            }
            found
        }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        let mut rover_listed = self.rover.is_none();
        // SAFETY: forwarded contract.
        unsafe {
            self.list.visit(&mut |b| {
                rover_listed |= Some(b) == self.rover;
                f(b)
            })?;
        }
        super::ensure!(rover_listed, "next fit: the rover is not a listed block");
        Ok(())
    }
}
