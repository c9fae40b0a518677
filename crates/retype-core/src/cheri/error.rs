//! Why a capability could not be built or derived. Where the hardware would
//! clear the tag (or trap), the checked operations return one of these
//! instead, so that no derived capability ever grants more than its source.

use core::fmt;

use super::format::Permission;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The source's tag is clear: it grants nothing to derive from.
    Untagged,
    /// The source is sealed: it can only be unsealed (or, a sentry, jumped to).
    Sealed,
    /// Morello: the source's exponent is out of range, its bounds malformed.
    MalformedBounds,
    /// The requested base lies below the source's base.
    BelowBase { requested: u64, base: u64 },
    /// The requested top lies above the source's top.
    AboveTop { requested: u128, top: u128 },
    /// Morello: bounds small enough to depend on the address were asked of a
    /// capability whose bounds did not, at an address that is not what such
    /// bounds read (they drop the top byte, the flags, and sign-extend bit
    /// 55): the result would not be the bounds asked for.
    FlagsInAddress { address: u64 },
    /// The requested bounds are not representable and exactness was required;
    /// `base`..`top` is what they round to.
    Inexact { base: u64, top: u128 },
    /// The permissions asked for include these, which the source lacks.
    Widens { extra: u32 },
    /// Bits that are no permission of the format.
    UnknownPermissions { bits: u32 },
    /// The capability operated on must be sealed and is not.
    NotSealed,
    /// A reserved object type (a sentry, say): not unsealed by `unseal`.
    ReservedOtype { otype: u32 },
    /// The authorising capability lacks this permission.
    MissingPermission { permission: Permission },
    /// The authorising capability's address is outside its own bounds.
    AddressOutOfBounds { address: u64 },
    /// The address is not an object type that `seal` may give.
    NotASealingOtype { address: u64 },
    /// The unsealing capability's address is not the sealed one's object type.
    WrongOtype { otype: u32, address: u64 },
    /// The bounds cannot be encoded exactly, or the address lies outside the
    /// region in which they decode back unchanged.
    Unrepresentable { base: u64, top: u128, address: u64 },
    /// A value too large for its field.
    FieldTooWide { field: &'static str, value: u64 },
    /// Morello keeps its flags in the address's top byte; these disagree with it.
    FlagsMismatch { flags: u8, address: u64 },
    /// Bits that no derivation produces (malformed or out-of-range bounds,
    /// reserved bits set) cannot carry a tag.
    NotDerivable,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Untagged => write!(f, "the capability is untagged"),
            Error::Sealed => write!(f, "the capability is sealed"),
            Error::MalformedBounds => write!(f, "the capability's bounds are malformed"),
            Error::BelowBase { requested, base } => {
                write!(f, "base {requested:#x} lies below the base {base:#x}")
            }
            Error::AboveTop { requested, top } => {
                write!(f, "top {requested:#x} lies above the top {top:#x}")
            }
            Error::FlagsInAddress { address } => write!(
                f,
                "address {address:#x} is not what bounds this small read (the top byte dropped, bit 55 extended)"
            ),
            Error::Inexact { base, top } => {
                write!(f, "the bounds are not exact: they round to {base:#x}..{top:#x}")
            }
            Error::Widens { extra } => {
                write!(f, "permissions {extra:#x} are not held: that would widen")
            }
            Error::UnknownPermissions { bits } => {
                write!(f, "bits {bits:#x} are no permission of this format")
            }
            Error::NotSealed => write!(f, "the capability is not sealed"),
            Error::ReservedOtype { otype } => {
                write!(f, "object type {otype:#x} is reserved")
            }
            Error::MissingPermission { permission } => {
                write!(f, "the authorising capability lacks {}", permission.name())
            }
            Error::AddressOutOfBounds { address } => write!(
                f,
                "the authorising capability's address {address:#x} is outside its bounds"
            ),
            Error::NotASealingOtype { address } => {
                write!(f, "{address:#x} is not an object type to seal with")
            }
            Error::WrongOtype { otype, address } => write!(
                f,
                "object type {otype:#x} is not the unsealing capability's address {address:#x}"
            ),
            Error::Unrepresentable { base, top, address } => write!(
                f,
                "bounds {base:#x}..{top:#x} with address {address:#x} are not representable"
            ),
            Error::FieldTooWide { field, value } => {
                write!(f, "{field} {value:#x} does not fit its field")
            }
            Error::FlagsMismatch { flags, address } => write!(
                f,
                "flags {flags:#x} disagree with the top byte of address {address:#x}"
            ),
            Error::NotDerivable => write!(f, "no derivation produces these bits: no tag"),
        }
    }
}

impl core::error::Error for Error {}
