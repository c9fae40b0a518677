//! A capability: its bits (tag, PESBT, address) and what they decode to.
//!
//! [`Capability::decode`] reads any bits, as a load from memory does;
//! [`Capability::encode`] builds the bits for given fields, refusing fields
//! that no bits hold. The fields a capability has are [`Parts`], and for
//! every valid capability `decode(encode(parts)).parts() == parts`.

use super::concentrate::{self, Bounds};
use super::encoding::{self, BoundsBits};
use super::error::Error;
use super::format::{FlagsAt, Format};

/// A capability of one format. The fields are the module's own: the
/// operations of [`crate::cheri`] keep these invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capability {
    pub(super) format: Format,
    /// The validity tag, kept out of band beside memory. Set only on
    /// derivable bits: well-formed bounds, `base <= top <= 2^AW`, no
    /// reserved bit set.
    pub(super) tag: bool,
    /// The address (cursor), AW bits; Morello's flags in its top byte.
    pub(super) address: u64,
    /// The architectural upper word (see [`encoding`]), AW bits.
    pub(super) pesbt: u64,
    /// What `pesbt` decodes to at the address it was last decoded at: an
    /// address change that stays representable keeps it (and decoding at
    /// the new address would give the same).
    pub(super) base: u64,
    /// One past the last address granted, decoded likewise: at most `2^AW`
    /// when tagged, up to `2^(AW+1) - 1` for arbitrary bits.
    pub(super) top: u128,
    /// Morello: false for an exponent between the largest a length needs
    /// and the all-ones one (malformed bounds); always true elsewhere.
    pub(super) bounds_valid: bool,
}

/// The fields of a capability, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub tag: bool,
    pub address: u64,
    pub base: u64,
    pub top: u128,
    /// The permissions value, bits as [`Format::permission_mask`] gives them.
    pub permissions: u32,
    pub otype: u32,
    /// ISAv9: the flag bit; Morello: the address's top byte.
    pub flags: u8,
}

impl Capability {
    /// The capability for `pesbt` (architectural, not the memory form) and
    /// `address`, with the tag `tag`.
    ///
    /// Refuses a tag on bits no derivation produces.
    ///
    /// # Panics
    /// If `pesbt` or `address` is wider than the format's addresses.
    pub fn decode(
        format: Format,
        pesbt: u64,
        address: u64,
        tag: bool,
    ) -> Result<Capability, Error> {
        let cap = Capability::untagged(format, pesbt, address);
        if tag && !cap.derivable() {
            return Err(Error::NotDerivable);
        }
        Ok(Capability { tag, ..cap })
    }

    /// `pesbt` and `address` decoded, with the tag clear: what a load of
    /// arbitrary bits gives.
    pub(super) fn untagged(format: Format, pesbt: u64, address: u64) -> Capability {
        assert!(
            pesbt <= format.max_address() && address <= format.max_address(),
            "{format}: PESBT {pesbt:#x} or address {address:#x} wider than {} bits",
            format.params().addr_width
        );
        let bits = encoding::bounds_bits(format, pesbt);
        let Bounds { base, top, valid } = concentrate::decode(format, &bits, address);
        Capability {
            format,
            tag: false,
            address,
            pesbt,
            base,
            top,
            bounds_valid: valid,
        }
    }

    /// The capability with these fields, its bounds encoded with the
    /// smallest exponent that holds them exactly.
    pub fn encode(format: Format, parts: &Parts) -> Result<Capability, Error> {
        let p = format.params();
        let wide = |field: &'static str, value: u64, max: u64| {
            if value > max {
                Err(Error::FieldTooWide { field, value })
            } else {
                Ok(())
            }
        };
        wide("address", parts.address, format.max_address())?;
        wide("base", parts.base, format.max_address())?;
        let unknown = parts.permissions & !format.all_permissions();
        if unknown != 0 {
            return Err(Error::UnknownPermissions { bits: unknown });
        }
        wide("otype", parts.otype.into(), p.otype.max())?;
        let mut pesbt = encoding::with_otype(format, 0, parts.otype);
        pesbt = encoding::with_permissions(format, pesbt, parts.permissions);
        match p.flags {
            FlagsAt::Pesbt(field) => {
                wide("flags", parts.flags.into(), field.max())?;
                pesbt = field.set(pesbt, parts.flags.into());
            }
            FlagsAt::Address(field) => {
                if field.get(parts.address) != u64::from(parts.flags) {
                    return Err(Error::FlagsMismatch {
                        flags: parts.flags,
                        address: parts.address,
                    });
                }
            }
        }
        let unrepresentable = Error::Unrepresentable {
            base: parts.base,
            top: parts.top,
            address: parts.address,
        };
        if u128::from(parts.base) > parts.top || parts.top > format.max_top() {
            return Err(unrepresentable);
        }
        let rounded = concentrate::round(format, parts.base, parts.top);
        pesbt = encoding::with_bounds_bits(format, pesbt, &rounded.bits);
        let cap = Capability::decode(format, pesbt, parts.address, parts.tag)?;
        if !rounded.exact || (cap.base, cap.top) != (parts.base, parts.top) {
            return Err(unrepresentable);
        }
        Ok(cap)
    }

    pub fn parts(&self) -> Parts {
        Parts {
            tag: self.tag,
            address: self.address,
            base: self.base,
            top: self.top,
            permissions: self.permissions(),
            otype: self.otype(),
            flags: self.flags(),
        }
    }

    /// The root capability (CHERI's "almighty", the one a machine resets
    /// with): tagged, every permission, unsealed, the whole address space.
    pub fn root(format: Format) -> Capability {
        Capability::encode(
            format,
            &Parts {
                tag: true,
                address: 0,
                base: 0,
                top: format.max_top(),
                permissions: format.all_permissions(),
                otype: format.params().otype_unsealed,
                flags: 0,
            },
        )
        .expect("the whole address space is representable")
    }

    /// The null capability: untagged, no permissions, all zeros in memory.
    pub fn null(format: Format) -> Capability {
        Capability::untagged(format, encoding::null_pesbt(format), 0)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn tag(&self) -> bool {
        self.tag
    }

    pub fn address(&self) -> u64 {
        self.address
    }

    /// The architectural upper word; [`encoding::to_memory`] gives its
    /// memory form.
    pub fn pesbt(&self) -> u64 {
        self.pesbt
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    /// One past the last address the capability grants: up to `2^AW`.
    pub fn top(&self) -> u128 {
        self.top
    }

    /// `top - base`, or 0 for the inverted bounds of arbitrary bits.
    pub fn length(&self) -> u128 {
        self.top.saturating_sub(self.base.into())
    }

    /// Morello: false for malformed bounds (an exponent out of range).
    pub fn bounds_valid(&self) -> bool {
        self.bounds_valid
    }

    pub fn bounds_bits(&self) -> BoundsBits {
        encoding::bounds_bits(self.format, self.pesbt)
    }

    pub fn exponent(&self) -> u32 {
        self.bounds_bits().exponent
    }

    pub fn permissions(&self) -> u32 {
        encoding::permissions(self.format, self.pesbt)
    }

    pub fn otype(&self) -> u32 {
        encoding::otype(self.format, self.pesbt)
    }

    pub fn is_sealed(&self) -> bool {
        self.otype() != self.format.params().otype_unsealed
    }

    /// ISAv9: the flag bit of PESBT; Morello: the address's top byte.
    pub fn flags(&self) -> u8 {
        encoding::flags(self.format, self.pesbt, self.address)
    }

    /// Reserved PESBT bits that are set, in place (RV64 has two).
    pub fn reserved(&self) -> u64 {
        encoding::reserved(self.format, self.pesbt)
    }

    /// Whether the bits may carry a tag (see the field `tag`).
    fn derivable(&self) -> bool {
        self.bounds_valid
            && u128::from(self.base) <= self.top
            && self.top <= self.format.max_top()
            && self.reserved() == 0
    }

    /// Whether the address is within the bounds (as the bounds see it:
    /// without Morello's flags).
    pub fn in_bounds(&self) -> bool {
        let a = concentrate::bounds_address(self.format, self.address);
        self.base <= a && u128::from(a) < self.top
    }
}
