//! The heaps in CHERI mode: any [`Heap`] behind an adapter that hands out
//! capabilities instead of pointers, as a CHERI allocator (CheriBSD's
//! jemalloc and snmalloc, seed 004's) does.
//!
//! Each request is sized and aligned so that its bounds are exactly
//! representable ([`exact_bounds`]: the length rounded up to CRRL, the base
//! aligned with CRAM), and the capability handed out is derived from the
//! heap's [`Region`] by set-bounds, exactly: it covers the block and nothing
//! else. Free and realloc accept only a capability the heap handed out and
//! that is still live: tagged, unsealed, at its base, with the very bounds
//! and permissions it was given. A derived (narrower), widened, moved or
//! forged one is refused with the reason ([`Error`]), and the heap is left
//! as it was.
//!
//! What exactness costs is counted as [`Padding`] by size range. The
//! heap's growth beyond its plain run that padding does not explain is the
//! alignment fragmentation ([`CheriHeap::alignment_fragmentation`]).
//!
//! A request stream (alloc, realloc, free) runs on a `CheriHeap` as on the
//! plain heap, with capabilities where pointers were; [`CheriHeap::access`]
//! is the bounds check of a load or store, and gives the machine pointer.
//!
//! - [`padding`]: exact bounds for a size, and the counts by size range;
//! - [`region`]: the heap's memory in capability terms.

pub mod padding;
pub mod region;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::fmt;
use core::ptr::NonNull;

use super::source::SOURCE_ALIGN;
use super::{Heap, MIN_ALIGN};
use crate::cheri::{Capability, Format};
pub use padding::{exact_bounds, ExactBounds, Padding, Rounding, SizeRange, SIZE_RANGES};
pub use region::{Region, RegionError};

/// Why a request was not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The heap could not give `length` bytes aligned to `align` (exhausted,
    /// or a size or alignment out of its range).
    HeapRefused { length: u64, align: u64 },
    /// The capability is of another format than the heap's.
    WrongFormat { format: Format },
    /// The capability's tag is clear: forged from bits, or invalidated.
    Untagged,
    /// The capability is sealed.
    Sealed,
    /// The capability's address is not its base (an interior pointer).
    NotAtBase { address: u64, base: u64 },
    /// No live block starts at the capability's base: never handed out,
    /// or freed already.
    NotLive { base: u64 },
    /// A live block starts there, with other bounds: the capability was
    /// derived (narrower) or widened.
    OtherBounds {
        base: u64,
        top: u128,
        block_top: u128,
    },
    /// The block's bounds, with other permissions than were handed out.
    OtherPermissions { permissions: u32, block: u32 },
    /// An access of `len` bytes at the address is not within the bounds.
    OutOfBounds {
        address: u64,
        len: u64,
        base: u64,
        top: u128,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::HeapRefused { length, align } => write!(
                f,
                "the heap cannot give {length} bytes aligned to {align}"
            ),
            Error::WrongFormat { format } => {
                write!(f, "a {format} capability given to another format's heap")
            }
            Error::Untagged => write!(f, "the capability is untagged (forged or invalidated)"),
            Error::Sealed => write!(f, "the capability is sealed"),
            Error::NotAtBase { address, base } => write!(
                f,
                "the capability's address {address:#x} is not its base {base:#x}"
            ),
            Error::NotLive { base } => write!(f, "no live block starts at {base:#x}"),
            Error::OtherBounds {
                base,
                top,
                block_top,
            } => write!(
                f,
                "bounds {base:#x}..{top:#x} are not the block's {base:#x}..{block_top:#x} (derived or widened)"
            ),
            Error::OtherPermissions { permissions, block } => write!(
                f,
                "permissions {permissions:#x} are not the block's {block:#x}"
            ),
            Error::OutOfBounds {
                address,
                len,
                base,
                top,
            } => write!(
                f,
                "{len} bytes at {address:#x} are outside the bounds {base:#x}..{top:#x}"
            ),
        }
    }
}

impl core::error::Error for Error {}

/// A live block: the capability handed out and where the heap holds it.
#[derive(Clone, Copy, Debug)]
struct Live {
    capability: Capability,
    /// What the heap returned: the capability's base, or before it where the
    /// heap could not align the block (see [`CheriHeap::place`]).
    block: NonNull<u8>,
    /// The alignment the heap was asked for: a realloc in place keeps it.
    align: usize,
    size: u64,
}

/// A heap in CHERI mode (see the module's documentation).
pub struct CheriHeap<'a> {
    heap: Box<dyn Heap + 'a>,
    region: Region,
    /// Live blocks by their capability's base.
    live: BTreeMap<u64, Live>,
    padding: Padding,
    high_water: usize,
}

impl<'a> CheriHeap<'a> {
    /// `heap` handing out capabilities derived from `region`, which must
    /// cover all the memory the heap's source can give.
    pub fn new(heap: Box<dyn Heap + 'a>, region: Region) -> CheriHeap<'a> {
        let high_water = heap.heap_size();
        CheriHeap {
            heap,
            region,
            live: BTreeMap::new(),
            padding: Padding::default(),
            high_water,
        }
    }

    pub fn format(&self) -> Format {
        self.region.format()
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    /// The heap underneath, for its size and its check.
    pub fn heap(&self) -> &dyn Heap {
        &*self.heap
    }

    /// What exact bounds have cost so far.
    pub fn padding(&self) -> &Padding {
        &self.padding
    }

    /// The live blocks' capabilities, by address.
    pub fn live(&self) -> impl Iterator<Item = Capability> + '_ {
        self.live.values().map(|l| l.capability)
    }

    /// Heap bytes beyond a plain run's `plain_heap_size` that padding does
    /// not explain: what the stricter alignment of bases cost (with the
    /// changes of layout it brought; negative where those saved more).
    pub fn alignment_fragmentation(&self, plain_heap_size: usize) -> i64 {
        self.heap.heap_size() as i64 - plain_heap_size as i64 - self.padding.at_high_water as i64
    }

    /// A block for `size` bytes aligned to `align` (a power of two): a
    /// capability whose bounds are exactly the block.
    pub fn allocate(&mut self, size: usize, align: usize) -> Result<Capability, Error> {
        let (bounds, need) = self.shape(size, align)?;
        let (block, base, asked) = self.place(bounds.length, need)?;
        Ok(self.admit(size, align, bounds, block, base, asked))
    }

    /// Frees the block `cap` is the capability of.
    pub fn free(&mut self, cap: &Capability) -> Result<(), Error> {
        let live = self.claim(cap)?;
        self.live.remove(&live.capability.base());
        self.padding.live -= live.capability.length() as u64 - live.size;
        // SAFETY: the block is live in the heap: it was handed out and not freed.
        unsafe { self.heap.free(live.block) };
        Ok(())
    }

    /// Resizes the block of `cap` to `size` bytes aligned to `align`,
    /// keeping its first bytes; returns the new capability (the old one is
    /// no longer live). On an error the block is untouched.
    pub fn reallocate(
        &mut self,
        cap: &Capability,
        size: usize,
        align: usize,
    ) -> Result<Capability, Error> {
        let old = self.claim(cap)?;
        let (bounds, need) = self.shape(size, align)?;
        let old_base = self.region.pointer(old.capability.base());
        let (block, base, asked) = if old.block == old_base && need <= old.align {
            // SAFETY: `old.block` is live, allocated with `old.align`.
            let p = unsafe {
                self.heap
                    .reallocate(old.block, bounds.length as usize, old.align)
            }
            .ok_or(Error::HeapRefused {
                length: bounds.length,
                align: old.align as u64,
            })?;
            (p, p, old.align)
        } else {
            let (block, base, asked) = self.place(bounds.length, need)?;
            let keep = (old.capability.length() as u64).min(bounds.length) as usize;
            // SAFETY: both blocks are live and distinct, each at least `keep` bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(old_base.as_ptr(), base.as_ptr(), keep);
                self.heap.free(old.block);
            }
            (block, base, asked)
        };
        self.live.remove(&old.capability.base());
        self.padding.live -= old.capability.length() as u64 - old.size;
        Ok(self.admit(size, align, bounds, block, base, asked))
    }

    /// The machine pointer for `len` bytes at `cap`'s address, if a load or
    /// store through `cap` may touch them: the check the hardware makes.
    pub fn access(&self, cap: &Capability, len: usize) -> Result<NonNull<u8>, Error> {
        self.usable(cap)?;
        let address = cap.address();
        if address < cap.base() || u128::from(address) + len as u128 > cap.top() {
            return Err(Error::OutOfBounds {
                address,
                len: len as u64,
                base: cap.base(),
                top: cap.top(),
            });
        }
        Ok(self.region.pointer(address))
    }

    /// The exact bounds of `size` bytes and the alignment to ask for.
    fn shape(&self, size: usize, align: usize) -> Result<(ExactBounds, usize), Error> {
        let refused = Error::HeapRefused {
            length: size as u64,
            align: align as u64,
        };
        let bounds = exact_bounds(self.format(), size as u64).ok_or(refused)?;
        let need = usize::try_from(bounds.alignment)
            .map_err(|_| refused)?
            .max(align);
        Ok((bounds, need))
    }

    /// A block of `length` bytes whose base is aligned to `need`: the heap's
    /// own aligned allocation, or, where the heap cannot align so far (the
    /// buddy system stops at [`SOURCE_ALIGN`]), a larger block with the base
    /// aligned inside it. Returns the heap's block, the base and the
    /// alignment the heap was asked for.
    fn place(
        &mut self,
        length: u64,
        need: usize,
    ) -> Result<(NonNull<u8>, NonNull<u8>, usize), Error> {
        let refused = Error::HeapRefused {
            length,
            align: need as u64,
        };
        let length = usize::try_from(length).map_err(|_| refused)?;
        if let Some(p) = self.heap.allocate(length, need) {
            return Ok((p, p, need));
        }
        if !need.is_power_of_two() || need <= SOURCE_ALIGN {
            return Err(refused);
        }
        let wider = length.checked_add(need - SOURCE_ALIGN).ok_or(refused)?;
        let block = self.heap.allocate(wider, SOURCE_ALIGN).ok_or(refused)?;
        let base = (block.as_ptr() as usize).next_multiple_of(need);
        // SAFETY: `base` lies within the block: at most `need - SOURCE_ALIGN` past it.
        let base = unsafe { block.add(base - block.as_ptr() as usize) };
        Ok((block, base, SOURCE_ALIGN))
    }

    /// Records a new block and hands out its capability.
    fn admit(
        &mut self,
        size: usize,
        align: usize,
        bounds: ExactBounds,
        block: NonNull<u8>,
        base: NonNull<u8>,
        asked: usize,
    ) -> Capability {
        let capability = self.region.derive(base, bounds.length);
        let size = size as u64;
        self.padding
            .record(size, align.max(MIN_ALIGN) as u64, &bounds, 1);
        self.padding.live += bounds.padding(size);
        let live = Live {
            capability,
            block,
            align: asked,
            size,
        };
        self.live.insert(capability.base(), live);
        let heap_size = self.heap.heap_size();
        if heap_size > self.high_water {
            self.high_water = heap_size;
            self.padding.at_high_water = self.padding.live;
        }
        capability
    }

    /// A capability that may be used at all: this format's, tagged, unsealed.
    fn usable(&self, cap: &Capability) -> Result<(), Error> {
        if cap.format() != self.format() {
            return Err(Error::WrongFormat {
                format: cap.format(),
            });
        }
        if !cap.tag() {
            return Err(Error::Untagged);
        }
        if cap.is_sealed() {
            return Err(Error::Sealed);
        }
        Ok(())
    }

    /// The live block `cap` is exactly the capability of.
    fn claim(&self, cap: &Capability) -> Result<Live, Error> {
        self.usable(cap)?;
        let base = cap.base();
        if cap.address() != base {
            return Err(Error::NotAtBase {
                address: cap.address(),
                base,
            });
        }
        let live = *self.live.get(&base).ok_or(Error::NotLive { base })?;
        let block = live.capability;
        if cap.top() != block.top() {
            return Err(Error::OtherBounds {
                base,
                top: cap.top(),
                block_top: block.top(),
            });
        }
        if cap.permissions() != block.permissions() {
            return Err(Error::OtherPermissions {
                permissions: cap.permissions(),
                block: block.permissions(),
            });
        }
        Ok(live)
    }
}
