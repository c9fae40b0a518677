//! The capability's upper word, PESBT (permissions, object type, flags and
//! the bounds: exponent, bottom, top), field by field.
//!
//! A capability is this word and its address, plus the tag out of band.
//! The bounds field (EBT) has two forms. Without an internal exponent the
//! exponent is 0 and B (MW bits) and the low MW-2 bits of T are stored
//! whole. With one, the low three bits of both hold the exponent (six bits,
//! high half in T), and those bits of B and T read as zero. T's top two bits
//! are never stored: T = B + L, and L's top two bits are 0b01 when the
//! exponent is internal (the length is normalised), 0b00 when it is not, plus
//! a carry when the stored part of T is below B's.
//!
//! PESBT here is always the architectural ("raw") word. In memory ISAv9 xors
//! it with the null capability's so that null is all zeros ([`to_memory`]);
//! Morello's null already is.

use super::format::{FlagsAt, Format};

/// The bounds fields of a PESBT word, with T's top two bits inferred.
///
/// Invariants: `bottom` and `top` are below `2^MW`; without an internal
/// exponent `exponent` is 0; with one, the low three bits of `bottom` and
/// `top` are 0 (they hold the exponent in PESBT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundsBits {
    /// E: the bounds count in units of `2^E`. Morello's six stored bits can
    /// exceed the largest exponent a length needs.
    pub exponent: u32,
    /// Whether the exponent is stored in B and T (a length of `2^(MW-2)` or
    /// more) rather than 0.
    pub internal_exponent: bool,
    /// B: the base's bits from `E` to `E + MW - 1`.
    pub bottom: u64,
    /// T: the top's bits from `E` to `E + MW - 1`.
    pub top: u64,
}

const fn low_bits(width: u32) -> u64 {
    (1 << width) - 1
}

/// The bounds fields of `pesbt`.
pub fn bounds_bits(format: Format, pesbt: u64) -> BoundsBits {
    let p = format.params();
    let mw = p.mantissa_width;
    let internal_exponent = ((pesbt >> (2 * mw - 2)) & 1 == 1) != p.inverted_exponent;
    let b = pesbt & low_bits(mw);
    let t = (pesbt >> mw) & low_bits(mw - 2);
    let (exponent, bottom, top, length_msb) = if internal_exponent {
        let stored = ((t & 7) << 3 | (b & 7)) as u32;
        let exponent = if p.inverted_exponent {
            !stored & 63
        } else {
            stored
        };
        (exponent, b & !7, t & !7, 1)
    } else {
        (0, b, t, 0)
    };
    let carry = u64::from(top < bottom & low_bits(mw - 2));
    let top_two = ((bottom >> (mw - 2)) + carry + length_msb) & 3;
    BoundsBits {
        exponent,
        internal_exponent,
        bottom,
        top: top | top_two << (mw - 2),
    }
}

/// `pesbt` with its bounds fields replaced by `bits` (T's top two bits and,
/// with an internal exponent, the low three bits of B and T are not stored).
pub fn with_bounds_bits(format: Format, pesbt: u64, bits: &BoundsBits) -> u64 {
    let p = format.params();
    let mw = p.mantissa_width;
    let (b, t) = if bits.internal_exponent {
        let stored = if p.inverted_exponent {
            !bits.exponent & 63
        } else {
            bits.exponent
        };
        let stored = u64::from(stored);
        (bits.bottom & !7 | stored & 7, bits.top & !7 | stored >> 3)
    } else {
        (bits.bottom, bits.top)
    };
    let ebt = (u64::from(bits.internal_exponent != p.inverted_exponent) << (2 * mw - 2))
        | (t & low_bits(mw - 2)) << mw
        | b & low_bits(mw);
    pesbt & !low_bits(2 * mw - 1) | ebt
}

/// The permissions value (as `CGetPerm` reads it): hardware and user
/// permissions at their bits.
pub fn permissions(format: Format, pesbt: u64) -> u32 {
    let p = format.params();
    (p.permissions.get(pesbt) | p.user_permissions.get(pesbt) << p.user_permissions_at) as u32
}

/// `pesbt` with the permissions value `permissions` (which must be bits of
/// [`Format::all_permissions`]).
pub fn with_permissions(format: Format, pesbt: u64, permissions: u32) -> u64 {
    debug_assert_eq!(permissions & !format.all_permissions(), 0);
    let p = format.params();
    let permissions = u64::from(permissions);
    let pesbt = p.permissions.set(pesbt, permissions);
    p.user_permissions
        .set(pesbt, permissions >> p.user_permissions_at)
}

pub fn otype(format: Format, pesbt: u64) -> u32 {
    format.params().otype.get(pesbt) as u32
}

/// `pesbt` with object type `otype` (which must fit the field).
pub fn with_otype(format: Format, pesbt: u64, otype: u32) -> u64 {
    let field = format.params().otype;
    debug_assert!(u64::from(otype) <= field.max());
    field.set(pesbt, u64::from(otype))
}

/// The flags: ISAv9's flag bit of PESBT, Morello's top byte of the address.
pub fn flags(format: Format, pesbt: u64, address: u64) -> u8 {
    match format.params().flags {
        FlagsAt::Pesbt(field) => field.get(pesbt) as u8,
        FlagsAt::Address(field) => field.get(address) as u8,
    }
}

/// The reserved bits, in place; a valid capability has none set.
pub fn reserved(format: Format, pesbt: u64) -> u64 {
    let field = format.params().reserved;
    pesbt & field.max() << field.lsb
}

/// The null capability's PESBT: no permissions, unsealed, bounds of the
/// whole address space encoded with the largest exponent.
pub fn null_pesbt(format: Format) -> u64 {
    let p = format.params();
    let bits = BoundsBits {
        exponent: p.whole_space_exponent.unwrap_or(p.max_exponent),
        internal_exponent: true,
        bottom: 0,
        top: 0,
    };
    with_otype(format, with_bounds_bits(format, 0, &bits), p.otype_unsealed)
}

/// PESBT as stored in memory, where the null capability is all zeros. A
/// xor, so it also turns a stored word back into PESBT.
pub fn to_memory(format: Format, pesbt: u64) -> u64 {
    pesbt ^ null_pesbt(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every RV32 bounds field (15 bits) reads back as it was written.
    #[test]
    fn every_rv32_bounds_field_round_trips() {
        for ebt in 0..1u64 << 15 {
            let bits = bounds_bits(Format::Rv32, ebt);
            assert_eq!(with_bounds_bits(Format::Rv32, 0, &bits), ebt);
        }
    }

    /// Writing bounds bits leaves every other field alone.
    #[test]
    fn bounds_bits_stay_in_their_field() {
        for &format in Format::ALL {
            let p = format.params();
            let ebt_width = 2 * p.mantissa_width - 1;
            let others = format.max_address() & !low_bits(ebt_width);
            let bits = bounds_bits(format, 0x1234_5678_9abc_def0 & low_bits(ebt_width));
            let pesbt = with_bounds_bits(format, others, &bits);
            assert_eq!(pesbt & others, others, "{format}");
            assert_eq!(bounds_bits(format, pesbt), bits, "{format}");
        }
    }
}
