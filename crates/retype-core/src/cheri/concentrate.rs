//! CHERI Concentrate, the arithmetic of compressed bounds (Woodruff et al.,
//! "CHERI Concentrate", IEEE Transactions on Computers 2019; the CHERI ISA
//! v9 §3.5): from bounds bits and an address to base and top ([`decode`]),
//! and from a requested base and top to bounds bits, rounded outwards when
//! they cannot be held exactly ([`round`]).
//!
//! Bounds store only B and T, the base's and top's bits `E..E+MW`. The
//! higher bits come from the address: base and top lie in the
//! `2^(E+MW)`-byte representable region around the address, which starts an
//! eighth of a region below B's eighth, so comparing the top three bits of
//! the address, B and T with that boundary tells whether each lies in the
//! address's aligned window, the one above or the one below.

use super::encoding::{bounds_bits, with_bounds_bits, BoundsBits};
use super::format::Format;

/// Decoded bounds. Invariant (for bounds bits that some derivation
/// produced): `base <= top <= 2^AW`. Arbitrary bits can decode to a top
/// beyond `2^AW` (up to `2^(AW+1) - 1`) or below the base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub base: u64,
    /// One past the last address: `2^AW` for bounds that reach the end.
    pub top: u128,
    /// Morello only: false for an exponent between the largest needed and
    /// the all-ones one (malformed bounds, which read as the whole space).
    pub valid: bool,
}

/// Bounds bits for a requested range, and what rounding did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounded {
    pub bits: BoundsBits,
    /// Whether the bits hold the request exactly; if not, the bounds they
    /// decode to contain it.
    pub exact: bool,
    /// The mask a base must be aligned with for these bits to be exact
    /// (all ones when the exponent is not internal), AW bits.
    pub alignment_mask: u64,
}

/// The address the bounds see: the low `bounds_address_width` bits,
/// sign-extended (Morello's top byte holds flags, not address).
pub fn bounds_address(format: Format, address: u64) -> u64 {
    let width = format.params().bounds_address_width;
    if width == format.params().addr_width {
        address
    } else {
        let shift = 64 - width;
        (((address << shift) as i64) >> shift) as u64
    }
}

/// Whether bounds with exponent `exponent` depend on the address, that is
/// whether the representable region is smaller than the address space.
pub fn uses_address(format: Format, exponent: u32) -> bool {
    let p = format.params();
    exponent < p.addr_width - p.mantissa_width
}

/// Base and top from bounds bits and the address.
pub fn decode(format: Format, bits: &BoundsBits, address: u64) -> Bounds {
    let p = format.params();
    let (aw, mw) = (p.addr_width, p.mantissa_width);
    if let Some(whole) = p.whole_space_exponent {
        if bits.exponent > p.max_exponent {
            return Bounds {
                base: 0,
                top: format.max_top(),
                valid: bits.exponent == whole,
            };
        }
    }
    let e = bits.exponent.min(p.max_exponent);
    let a = bounds_address(format, address);
    // The top three bits of the address's, B's and T's mantissas, against
    // the representable region's lower boundary R (an eighth below B's).
    let a3 = (a >> (e + mw - 3)) & 7;
    let b3 = bits.bottom >> (mw - 3);
    let t3 = bits.top >> (mw - 3);
    let r3 = b3.wrapping_sub(1) & 7;
    let above = |x3: u64| i64::from(x3 < r3);
    let a_top = if e + mw >= aw { 0 } else { a >> (e + mw) };
    let len_mask = (1u128 << (aw + 1)) - 1;
    let at = |correction: i64, mantissa: u64| {
        let window = (a_top as i64).wrapping_add(correction) as u64 & format.max_address();
        ((u128::from(window) << mw | u128::from(mantissa)) << e) & len_mask
    };
    let base = at(above(b3) - above(a3), bits.bottom);
    let mut top = at(above(t3) - above(a3), bits.top);
    // Where the region wraps around the address space, base and top can come
    // out more than a space apart: then top's bit AW is wrong. (Base's own
    // bit AW is ignored: it would break monotonicity.)
    let base_msb = (base >> (aw - 1)) & 1;
    let top_msbs = (top >> (aw - 1)) & 3;
    if e + 1 < p.max_exponent && !(base_msb..=base_msb + 1).contains(&top_msbs) {
        top ^= 1 << aw;
    }
    Bounds {
        base: base as u64 & format.max_address(),
        top,
        valid: true,
    }
}

/// The exponent that puts the length's most significant bit second from the
/// top of the mantissa (a length that needs no exponent gets 0).
fn exponent_for(format: Format, length: u128) -> u32 {
    let p = format.params();
    if length > u128::from(format.max_address()) {
        p.max_exponent
    } else if length < 1 << (p.mantissa_width - 1) {
        0
    } else {
        127 - length.leading_zeros() - (p.mantissa_width - 2)
    }
}

/// Bounds bits for `base..top` (`base <= top <= 2^(AW+1)`), rounding base down
/// and top up when they have more significant bits than the mantissa holds.
pub fn round(format: Format, base: u64, top: u128) -> Rounded {
    let p = format.params();
    let mw = p.mantissa_width;
    debug_assert!(u128::from(base) <= top);
    let length = top - u128::from(base);
    let exponent = exponent_for(format, length);
    let internal_exponent = exponent != 0 || (length >> (mw - 2)) & 1 == 1;
    let raw = if !internal_exponent {
        Rounded {
            bits: BoundsBits {
                exponent: 0,
                internal_exponent,
                bottom: base & ((1 << mw) - 1),
                top: top as u64 & ((1 << mw) - 1),
            },
            exact: true,
            alignment_mask: format.max_address(),
        }
    } else {
        // Three bits of B and T hold the exponent: they count in units of 2^(E+3).
        let mantissa = (1u64 << (mw - 3)) - 1;
        let mut exponent = exponent;
        let mut shift = exponent + 3;
        let lost = |x: u128, shift: u32| x & ((1 << shift) - 1) != 0;
        let (mut lost_base, mut lost_top) = (lost(u128::from(base), shift), lost(top, shift));
        let cut = |shift: u32, lost_top: bool| {
            let b = (base >> shift) & mantissa;
            let t = ((top >> shift) as u64 + u64::from(lost_top)) & mantissa;
            (b, t)
        };
        let (mut b, mut t) = cut(shift, lost_top);
        // Rounding the top up may have carried the length into the bit
        // above the normalised one: then one more exponent step.
        if (t.wrapping_sub(b) & mantissa) >> (mw - 4) & 1 == 1 {
            lost_base |= b & 1 == 1;
            lost_top |= t & 1 == 1;
            exponent += 1;
            shift += 1;
            (b, t) = cut(shift, lost_top);
        }
        Rounded {
            bits: BoundsBits {
                exponent,
                internal_exponent,
                bottom: b << 3,
                top: t << 3,
            },
            exact: !lost_base && !lost_top,
            alignment_mask: (u64::MAX << shift) & format.max_address(),
        }
    };
    // Stored and read back: T's top two bits become the inferred ones.
    Rounded {
        bits: bounds_bits(format, with_bounds_bits(format, 0, &raw.bits)),
        ..raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A number of `width` bits whose magnitude is spread over all widths.
    fn any(rng: &mut SplitMix64, width: u32) -> u64 {
        let shift = 64 - width + rng.below(u64::from(width)) as u32;
        rng.next_u64() >> shift
    }

    /// Rounded bounds, decoded at the requested base, contain the request and
    /// equal it exactly when rounding says so; the base is aligned with the
    /// mask when it is exact. (In a debug build this also checks that no
    /// arithmetic overflows.) Morello's bases stay below 2^55, where the
    /// bounds address is the address.
    #[test]
    fn rounding_contains_the_request() {
        let mut rng = SplitMix64::new(43);
        for &format in Format::ALL {
            let p = format.params();
            let base_width = if p.bounds_address_width < p.addr_width {
                p.bounds_address_width - 1
            } else {
                p.addr_width
            };
            for _ in 0..20_000 {
                let base = any(&mut rng, base_width);
                let room = format.max_top() - u128::from(base);
                let top = u128::from(base) + u128::from(any(&mut rng, p.addr_width)).min(room);
                let rounded = round(format, base, top);
                let bounds = decode(format, &rounded.bits, base);
                assert!(bounds.valid);
                assert!(
                    bounds.base <= base && bounds.top >= top,
                    "{format} {base:#x}..{top:#x}"
                );
                let same = (bounds.base, bounds.top) == (base, top);
                assert_eq!(rounded.exact, same, "{format} {base:#x}..{top:#x}");
                if rounded.exact {
                    assert_eq!(base & rounded.alignment_mask, base);
                }
            }
        }
    }

    /// Any bits decode, at any address, to a base within the address space
    /// and a top of at most AW + 1 bits.
    #[test]
    fn arbitrary_bits_decode_within_range() {
        let mut rng = SplitMix64::new(4);
        for &format in Format::ALL {
            for _ in 0..20_000 {
                let pesbt = rng.next_u64() & format.max_address();
                let address = rng.next_u64() & format.max_address();
                let bounds = decode(format, &bounds_bits(format, pesbt), address);
                assert!(bounds.base <= format.max_address());
                assert!(bounds.top < 2 * format.max_top());
            }
        }
    }

    /// Morello's bounds see 56 address bits, bit 55 sign-extended; the
    /// others see the whole address.
    #[test]
    fn only_morello_drops_the_top_byte() {
        let a = 0xab80_0000_0000_1234;
        assert_eq!(bounds_address(Format::Morello, a), 0xff80_0000_0000_1234);
        assert_eq!(bounds_address(Format::Morello, 0xab00_1234), 0xab00_1234);
        assert_eq!(bounds_address(Format::Rv64, a), a);
        assert_eq!(bounds_address(Format::Rv32, 0xab80_1234), 0xab80_1234);
    }
}
