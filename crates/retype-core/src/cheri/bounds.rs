//! Setting bounds: a capability for `address..address + length` derived from
//! another, its bounds rounded outwards where CHERI Concentrate cannot hold
//! them ([`concentrate::round`]).
//!
//! [`Capability::csetbounds`] is the CSetBounds instruction: it always gives
//! the rounded bounds and clears the tag where the request is not within the
//! source (or the source could not be derived from). [`Capability::set_bounds`]
//! and [`Capability::set_bounds_exact`] refuse instead, with the reason: what
//! they return never grants more than its source.
//!
//! This is what CHERI C's `cheri_setbounds(p, n)` compiles to; an allocator
//! such as seed 004's reads the rounded length back with `cheri_getlen`.

use super::capability::Capability;
use super::concentrate::{self, bounds_address, uses_address};
use super::encoding;
use super::error::Error;

/// A capability with bounds set, and whether they are the requested ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetBounds {
    pub capability: Capability,
    /// Whether base and top are exactly the requested ones (otherwise
    /// they contain them).
    pub exact: bool,
}

impl Capability {
    /// CSetBounds: bounds from the address for `length` bytes, rounded
    /// outwards; the tag cleared where [`Capability::set_bounds`] would refuse.
    ///
    /// # Panics
    /// If `length` exceeds `2^AW`.
    pub fn csetbounds(&self, length: u128) -> SetBounds {
        let (mut set, refused) = self.bounded(length);
        set.capability.tag &= refused.is_none();
        set
    }

    /// Bounds from the address for `length` bytes, rounded outwards where
    /// not representable; refused where the request is not within the bounds
    /// or the capability is untagged, sealed or malformed.
    ///
    /// # Panics
    /// If `length` exceeds `2^AW`.
    pub fn set_bounds(&self, length: u128) -> Result<SetBounds, Error> {
        match self.bounded(length) {
            (set, None) => Ok(set),
            (_, Some(why)) => Err(why),
        }
    }

    /// As [`Capability::set_bounds`], and refused where the bounds would be
    /// rounded (CSetBoundsExact).
    pub fn set_bounds_exact(&self, length: u128) -> Result<Capability, Error> {
        let set = self.set_bounds(length)?;
        if set.exact {
            Ok(set.capability)
        } else {
            Err(Error::Inexact {
                base: set.capability.base,
                top: set.capability.top,
            })
        }
    }

    /// The bounds CSetBounds gives, the tag as it was, and the reason the
    /// tag would go.
    fn bounded(&self, length: u128) -> (SetBounds, Option<Error>) {
        let format = self.format;
        assert!(
            length <= format.max_top(),
            "{format}: length {length:#x} exceeds the address space"
        );
        // Bounds that span the address space were computed from all of the
        // address; smaller ones from the bounds address (Morello: no flags).
        let from_large = !uses_address(format, self.exponent());
        let base = if from_large {
            self.address
        } else {
            bounds_address(format, self.address)
        };
        let top = u128::from(base) + length;
        let rounded = concentrate::round(format, base, top);
        let bounds = concentrate::decode(format, &rounded.bits, self.address);
        let capability = Capability {
            pesbt: encoding::with_bounds_bits(format, self.pesbt, &rounded.bits),
            base: bounds.base,
            top: bounds.top,
            bounds_valid: bounds.valid,
            ..*self
        };
        let refused = if !self.tag {
            Some(Error::Untagged)
        } else if self.is_sealed() {
            Some(Error::Sealed)
        } else if !self.bounds_valid {
            Some(Error::MalformedBounds)
        } else if base < self.base {
            Some(Error::BelowBase {
                requested: base,
                base: self.base,
            })
        } else if top > self.top {
            Some(Error::AboveTop {
                requested: top,
                top: self.top,
            })
        } else if from_large
            && uses_address(format, rounded.bits.exponent)
            && bounds_address(format, self.address) != self.address
        {
            Some(Error::FlagsInAddress {
                address: self.address,
            })
        } else {
            debug_assert!(capability.base >= self.base && capability.top <= self.top);
            None
        };
        let exact = rounded.exact;
        (SetBounds { capability, exact }, refused)
    }
}
