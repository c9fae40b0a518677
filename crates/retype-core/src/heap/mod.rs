//! Heap allocators over real memory: the sequential fits (first, address-ordered
//! first, next, best and worst fit), the indexed fits (best and first fit in a
//! balanced tree), segregated fits, the binary buddy system and TLSF.
//!
//! Every heap manages raw memory that it obtains from a [`Source`], an `sbrk`
//! that can only grow, and keeps its metadata (boundary tags, free-list links,
//! tree nodes) inside that memory as the textbook designs do, so that the heap
//! size it reports is the honest cost of its policy.
//!
//! - [`source`]: the `sbrk`-like memory source and a fixed buffer implementing it;
//! - [`block`]: boundary tags shared by all boundary-tag heaps;
//! - [`fit`]: the boundary-tag heap engine, generic over a [`fit::FreeIndex`] that
//!   holds the free blocks and embodies the placement policy;
//! - [`free_list`] and [`treap`]: the intrusive structures the indexes are made of;
//! - one module per policy: [`first_fit`], [`address_first_fit`], [`next_fit`],
//!   [`best_fit`], [`worst_fit`], [`indexed_best_fit`], [`indexed_first_fit`],
//!   [`segregated`], [`tlsf`], and [`buddy`] (which has its own block format);
//! - [`cheri`]: any heap in CHERI mode, handing out capabilities whose bounds
//!   are exactly the block.

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;
use core::ptr::NonNull;
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

pub mod address_first_fit;
pub mod best_fit;
pub mod block;
pub mod buddy;
pub mod cheri;
pub mod first_fit;
pub mod fit;
pub mod free_list;
pub mod indexed_best_fit;
pub mod indexed_first_fit;
pub mod next_fit;
pub mod segregated;
pub mod source;
pub mod tlsf;
pub mod treap;
pub mod worst_fit;

pub use source::{Arena, Source};

/// A heap: `malloc`, `free` and `realloc` over memory from a [`Source`].
///
/// `align` must be a power of two; every heap guarantees at least
/// [`MIN_ALIGN`] for any `align`. A request that cannot be met (the source is
/// exhausted, or the size or alignment is out of range) returns `None` and
/// leaves the heap unchanged.
pub trait Heap {
    /// Which heap this is.
    fn kind(&self) -> HeapKind;

    /// Allocates `size` bytes aligned to `align`.
    fn allocate(&mut self, size: usize, align: usize) -> Option<NonNull<u8>>;

    /// Frees a block.
    ///
    /// # Safety
    /// `ptr` must have been returned by this heap and not freed since.
    unsafe fn free(&mut self, ptr: NonNull<u8>);

    /// Resizes a block to `size` bytes, in place when it can, keeping the
    /// first `min(old, new)` bytes. On `None` the old block is untouched.
    ///
    /// # Safety
    /// `ptr` must be live in this heap and have been allocated with `align`.
    unsafe fn reallocate(
        &mut self,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
    ) -> Option<NonNull<u8>>;

    /// Bytes usable at `ptr` (at least the size requested).
    ///
    /// # Safety
    /// `ptr` must be live in this heap.
    unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize;

    /// Bytes obtained from the source so far (the heap's high-water mark, since
    /// a source never shrinks). O(1).
    fn heap_size(&self) -> usize;

    /// Walks the whole heap and checks every invariant of its blocks and of its
    /// free structure; returns the statistics of the walk. O(heap blocks).
    fn check(&self) -> Result<Stats, CheckError>;
}

/// The smallest alignment every heap gives (a machine word).
pub const MIN_ALIGN: usize = core::mem::size_of::<usize>();

/// What a heap walk found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes obtained from the source.
    pub heap_size: usize,
    /// Allocated blocks and the bytes usable in them (the live payload as the heap sees it).
    pub live_blocks: usize,
    pub live_bytes: usize,
    /// Free blocks, their total bytes and the largest one.
    pub free_blocks: usize,
    pub free_bytes: usize,
    pub largest_free: usize,
}

/// A broken heap invariant, found by [`Heap::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError(pub String);

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Returns `Err(CheckError)` with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::heap::CheckError(alloc::format!($($msg)+)));
        }
    };
}
pub(crate) use ensure;

/// The heaps, in the order reports list them; each is spelled on the command
/// line and in reports as its name in kebab case (`first-fit`, `tlsf`, …),
/// which `FromStr` and `Display` share.
#[derive(Display, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "kebab-case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeapKind {
    /// LIFO free list, first fit.
    FirstFit,
    /// Address-ordered free list, first fit.
    AddressFirstFit,
    NextFit,
    BestFit,
    WorstFit,
    /// Best fit over a balanced tree of free blocks, O(log n).
    IndexedBestFit,
    /// First fit over a balanced tree of free blocks, O(log n).
    IndexedFirstFit,
    /// Segregated fits: a free list per size class.
    Segregated,
    /// Two-level segregated fit.
    Tlsf,
    /// The binary buddy system.
    Buddy,
}

impl HeapKind {
    /// Every heap, in the order reports list them.
    pub const ALL: &'static [HeapKind] = <HeapKind as strum::VariantArray>::VARIANTS;

    /// The heap's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Builds this heap over `source`; `None` when the source cannot give the
    /// heap its first word.
    pub fn build<'a, S: Source + 'a>(self, source: S) -> Option<Box<dyn Heap + 'a>> {
        fn boxed<'a, H: Heap + 'a>(h: Option<H>) -> Option<Box<dyn Heap + 'a>> {
            h.map(|h| Box::new(h) as Box<dyn Heap + 'a>)
        }
        match self {
            HeapKind::FirstFit => boxed(first_fit::FirstFit::new(source)),
            HeapKind::AddressFirstFit => boxed(address_first_fit::AddressFirstFit::new(source)),
            HeapKind::NextFit => boxed(next_fit::NextFit::new(source)),
            HeapKind::BestFit => boxed(best_fit::BestFit::new(source)),
            HeapKind::WorstFit => boxed(worst_fit::WorstFit::new(source)),
            HeapKind::IndexedBestFit => boxed(indexed_best_fit::IndexedBestFit::new(source)),
            HeapKind::IndexedFirstFit => boxed(indexed_first_fit::IndexedFirstFit::new(source)),
            HeapKind::Segregated => boxed(segregated::Segregated::new(source)),
            HeapKind::Tlsf => boxed(tlsf::Tlsf::new(source)),
            HeapKind::Buddy => boxed(buddy::Buddy::new(source)),
        }
    }
}
