//! An intrusive doubly linked list of free blocks: link 0 is the next block,
//! link 1 the previous one. Unlinking a known block is O(1).

use super::block::{get_link, set_link, Block};
use super::{ensure, CheckError};

/// Link words a listed block needs.
pub const LINKS: usize = 2;
const NEXT: usize = 0;
const PREV: usize = 1;

#[derive(Default)]
pub struct FreeList {
    head: Option<Block>,
}

impl FreeList {
    pub fn head(&self) -> Option<Block> {
        self.head
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// # Safety
    /// `b` must be in a list.
    pub unsafe fn next(b: Block) -> Option<Block> {
        // SAFETY: by the caller's contract.
        unsafe { get_link(b, NEXT) }
    }

    /// Inserts `b` after `at`, or at the front when `at` is `None`.
    ///
    /// # Safety
    /// `b` must be a free block not in a list; `at` must be in this list.
    pub unsafe fn insert_after(&mut self, at: Option<Block>, b: Block) {
        // SAFETY: by the caller's contract all blocks touched are free with link words.
        unsafe {
            let next = match at {
                None => self.head.replace(b),
                Some(a) => {
                    let n = get_link(a, NEXT);
                    set_link(a, NEXT, Some(b));
                    n
                }
            };
            set_link(b, NEXT, next);
            set_link(b, PREV, at);
            if let Some(n) = next {
                set_link(n, PREV, Some(b));
            }
        }
    }

    /// # Safety
    /// As for [`FreeList::insert_after`].
    pub unsafe fn push_front(&mut self, b: Block) {
        // SAFETY: by the caller's contract.
        unsafe { self.insert_after(None, b) }
    }

    /// # Safety
    /// `b` must be in this list.
    pub unsafe fn remove(&mut self, b: Block) {
        // SAFETY: by the caller's contract `b` and its neighbours are listed free blocks.
        unsafe {
            let (next, prev) = (get_link(b, NEXT), get_link(b, PREV));
            match prev {
                Some(p) => set_link(p, NEXT, next),
                None => self.head = next,
            }
            if let Some(n) = next {
                set_link(n, PREV, prev);
            }
        }
    }

    /// The blocks from the head on.
    ///
    /// # Safety
    /// The list must be well formed while the iterator lives.
    pub unsafe fn iter(&self) -> impl Iterator<Item = Block> {
        // SAFETY: by the caller's contract each listed block has link words.
        core::iter::successors(self.head, |&b| unsafe { get_link(b, NEXT) })
    }

    /// Visits each block, checking that the back links mirror the forward ones.
    ///
    /// # Safety
    /// As for [`super::fit::FreeIndex::visit`].
    pub unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        let mut prev = None;
        let mut at = self.head;
        while let Some(b) = at {
            f(b)?;
            // SAFETY: `f` accepted `b` as a free block of the heap.
            unsafe {
                ensure!(
                    get_link(b, PREV) == prev,
                    "free list: bad back link at {:p}",
                    b.addr()
                );
                at = get_link(b, NEXT);
            }
            prev = Some(b);
        }
        Ok(())
    }
}

/// How a policy over a LIFO free list picks its block; [`Lifo`] does the rest.
pub trait ListSearch: Default {
    /// Which heap this search makes.
    const KIND: super::HeapKind;

    /// The block of at least `size` bytes that the policy takes, if any.
    ///
    /// # Safety
    /// `list` must hold only free blocks.
    unsafe fn search(list: &FreeList, size: usize) -> Option<Block>;
}

/// A free index that is a LIFO list (freed blocks go to the front) searched by `P`.
#[derive(Default)]
pub struct Lifo<P: ListSearch> {
    list: FreeList,
    _policy: core::marker::PhantomData<P>,
}

impl<P: ListSearch> super::fit::FreeIndex for Lifo<P> {
    const KIND: super::HeapKind = P::KIND;
    const LINKS: usize = LINKS;

    unsafe fn insert(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.push_front(b) }
    }

    unsafe fn remove(&mut self, b: Block) {
        // SAFETY: forwarded contract.
        unsafe { self.list.remove(b) }
    }

    unsafe fn find(&mut self, size: usize) -> Option<Block> {
        // SAFETY: the list holds free blocks.
        unsafe { P::search(&self.list, size) }
    }

    unsafe fn visit(
        &self,
        f: &mut dyn FnMut(Block) -> Result<(), CheckError>,
    ) -> Result<(), CheckError> {
        // SAFETY: forwarded contract.
        unsafe { self.list.visit(f) }
    }
}
