//! Representability: which lengths and bases bounds hold exactly, and which
//! addresses a capability may move to and keep its bounds.
//!
//! [`representable_length`] (CRRL) and [`representable_alignment_mask`]
//! (CRAM) are what an allocator asks before it sets bounds: a base aligned
//! with the mask and the length rounded up give exact bounds.
//!
//! Bounds are decoded relative to the address, so they stay the same only
//! while the address stays in the representable region, the `2^(E+MW)` bytes
//! that start an eighth of a region below the base's eighth. Moving the
//! address out of it clears the tag ([`Capability::set_address`]). The
//! hardware's check, which this is, compares only the mantissa bits of the
//! address change: it is conservative by up to `2^E` at either end of the
//! region, and every address within the bounds passes it (Morello: within
//! them as the bounds read it, the top byte dropped and bit 55 a sign that
//! small bounds do not let change).

use super::capability::Capability;
use super::concentrate::{self, bounds_address, uses_address};
use super::encoding;
use super::format::Format;

/// CRAM: the mask a base must be aligned with for bounds of `length` bytes
/// to be exact (all ones for lengths that need no alignment), AW bits.
///
/// # Panics
/// If `length` exceeds `2^AW`.
pub fn representable_alignment_mask(format: Format, length: u128) -> u64 {
    assert!(
        length <= format.max_top(),
        "{format}: length {length:#x} exceeds the address space"
    );
    concentrate::round(format, 0, length).alignment_mask
}

/// CRRL: the smallest length of at least `length` that bounds hold exactly
/// from a base aligned with [`representable_alignment_mask`]. At most `2^AW`
/// (the instruction returns it modulo `2^AW`, so 0 for `2^AW`).
///
/// # Panics
/// If `length` exceeds `2^AW`.
pub fn representable_length(format: Format, length: u128) -> u128 {
    let mask = u128::from(representable_alignment_mask(format, length));
    let granule = !mask & u128::from(format.max_address());
    (length + granule) & !granule
}

impl Capability {
    /// Whether the capability keeps its bounds (and tag) at `address`: the
    /// hardware's fast check.
    pub fn is_representable_with_address(&self, address: u64) -> bool {
        let format = self.format;
        let p = format.params();
        let (aw, mw) = (p.addr_width, p.mantissa_width);
        let bits = encoding::bounds_bits(format, self.pesbt);
        let e = bits.exponent;
        // Morello: flipping the bounds address's sign bit moves small bounds.
        let sign = p.bounds_address_width - 1;
        if p.bounds_address_width < aw
            && ((address ^ self.address) >> sign) & 1 == 1
            && uses_address(format, e)
        {
            return false;
        }
        if !self.bounds_valid {
            return false;
        }
        let a = bounds_address(format, address);
        if self.base <= a && u128::from(a) < self.top {
            return true;
        }
        if self.base == 0 && self.top == format.max_top() {
            return true;
        }
        // The change in address, and where the address sits, in units of 2^E.
        let increment = bounds_address(
            format,
            address.wrapping_sub(self.address) & format.max_address(),
        );
        let cursor = bounds_address(format, self.address);
        let mantissa = (1u64 << mw) - 1;
        let high_shift = (e + mw).min(aw - 1);
        let e_shift = e.min(aw - 1);
        let signed = ((increment << (64 - aw)) as i64) >> (64 - aw);
        let i_high = signed >> high_shift;
        let i_mid = (increment >> e_shift) & mantissa;
        let a_mid = (cursor >> e_shift) & mantissa;
        // R: the region's lower boundary, an eighth below B's eighth.
        let r = ((bits.bottom >> (mw - 3)).wrapping_sub(1) & 7) << (mw - 3);
        let to_boundary = r.wrapping_sub(a_mid) & mantissa;
        let in_limits = match i_high {
            0 => i_mid < to_boundary.wrapping_sub(1) & mantissa,
            -1 => i_mid >= to_boundary && r != a_mid,
            _ => false,
        };
        in_limits || e + 2 >= p.max_exponent
    }

    /// CSetAddr: the capability at `address`. Its tag is cleared if it is
    /// sealed, or if `address` is not representable, when the bounds are
    /// decoded anew from it.
    ///
    /// # Panics
    /// If `address` is wider than the format's addresses.
    pub fn set_address(&self, address: u64) -> Capability {
        let format = self.format;
        assert!(
            address <= format.max_address(),
            "{format}: address {address:#x} wider than {} bits",
            format.params().addr_width
        );
        if self.is_representable_with_address(address) {
            Capability {
                address,
                tag: self.tag && !self.is_sealed(),
                ..*self
            }
        } else {
            Capability::untagged(format, self.pesbt, address)
        }
    }
}
