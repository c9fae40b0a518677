//! The memory a CHERI heap hands out, as capabilities of one format see it:
//! which machine address is capability address 0, and the region capability
//! every block's capability is derived from.
//!
//! On a 64-bit format a capability's address is the machine's. RV32's
//! addresses are 32 bits, so there the heap's memory is moved into the
//! 32-bit space: capability address 0 is the machine address at the start of
//! the heap's 2 GiB-aligned window, so that every alignment up to 2 GiB is
//! the same in both spaces.

use core::ptr::NonNull;

use crate::cheri::{Capability, Error as CapError, Format, Permission};

/// A heap's memory in capability terms.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    capability: Capability,
    /// The machine address of capability address 0.
    origin: usize,
}

/// Why a region cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// The memory does not fit the format's address space.
    TooLarge {
        format: Format,
        base: usize,
        len: usize,
    },
    /// Setting the region's bounds failed.
    Capability(CapError),
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            RegionError::TooLarge { format, base, len } => write!(
                f,
                "{len} bytes at {base:#x} do not fit {format}'s {}-bit addresses",
                format.params().addr_width
            ),
            RegionError::Capability(e) => write!(f, "the region capability: {e}"),
        }
    }
}

impl core::error::Error for RegionError {}

/// The permissions of a data capability: load and store data and
/// capabilities, nothing else.
pub fn data_permissions(format: Format) -> u32 {
    [
        Permission::Global,
        Permission::Load,
        Permission::Store,
        Permission::LoadCapability,
        Permission::StoreCapability,
        Permission::StoreLocalCapability,
        Permission::MutableLoad,
    ]
    .into_iter()
    .filter_map(|p| format.permission_mask(p))
    .fold(0, |all, p| all | p)
}

impl Region {
    /// The `len` bytes of this machine at `base` as a region of `format`: a
    /// data capability derived from the root, its bounds rounded outwards
    /// where they are not representable.
    pub fn new(format: Format, base: usize, len: usize) -> Result<Region, RegionError> {
        let aw = format.params().addr_width;
        let origin = if aw >= usize::BITS {
            0
        } else {
            base & !((1usize << (aw - 1)) - 1)
        };
        let start = (base - origin) as u64;
        let too_large = RegionError::TooLarge { format, base, len };
        if u128::from(start) + len as u128 > format.max_top() {
            return Err(too_large);
        }
        let capability = Capability::root(format)
            .set_address(start)
            .set_bounds(len as u128)
            .and_then(|s| s.capability.restrict_permissions(data_permissions(format)))
            .map_err(RegionError::Capability)?;
        Ok(Region { capability, origin })
    }

    pub fn format(&self) -> Format {
        self.capability.format()
    }

    /// The capability for the whole region.
    pub fn capability(&self) -> Capability {
        self.capability
    }

    /// The capability address of a machine pointer into the region.
    pub fn address(&self, ptr: NonNull<u8>) -> u64 {
        (ptr.as_ptr() as usize - self.origin) as u64
    }

    /// The machine pointer at capability address `address`.
    pub fn pointer(&self, address: u64) -> NonNull<u8> {
        let p = self.origin.wrapping_add(address as usize) as *mut u8;
        NonNull::new(p).expect("a region never holds the null address")
    }

    /// The capability for `length` bytes at `ptr`, derived from the region's
    /// by set-bounds, exactly.
    ///
    /// # Panics
    /// If the bounds are not exact or not within the region: the caller sized
    /// and aligned them, and the region covers the heap's memory.
    pub fn derive(&self, ptr: NonNull<u8>, length: u64) -> Capability {
        let address = self.address(ptr);
        self.capability
            .set_address(address)
            .set_bounds_exact(length.into())
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {length} bytes at {address:#x} within {:#x}..{:#x}: {e}",
                    self.format(),
                    self.capability.base(),
                    self.capability.top()
                )
            })
    }
}
