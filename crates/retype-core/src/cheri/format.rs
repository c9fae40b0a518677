//! The three compressed-capability formats and the numbers that set them
//! apart: address and mantissa widths, the largest exponent, where each
//! field sits in the capability's upper word (PESBT), the object types that
//! are reserved, and which bit is which permission.
//!
//! Every other file of [`crate::cheri`] is written once for all formats and
//! reads these tables; a format differs from another only here.

use core::ops::RangeInclusive;

use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// A compressed capability format, spelled `morello`, `rv64` or `rv32` by
/// `FromStr` and `Display`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Format {
    /// Arm Morello: 64-bit addresses, 128-bit capabilities, the address's top
    /// byte holds flags that bounds ignore.
    Morello,
    /// CHERI-RISC-V for RV64 (ISAv9; the reference library's CC128):
    /// 64-bit addresses, 128-bit capabilities.
    Rv64,
    /// CHERI-RISC-V for RV32 (ISAv9; the reference library's CC64): 32-bit
    /// addresses, 64-bit capabilities.
    Rv32,
}

/// A bit field of a 64-bit word: `width` bits from bit `lsb` up. A field of
/// width 0 is absent: it reads as 0 and holds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub lsb: u32,
    pub width: u32,
}

impl Field {
    /// The largest value the field holds.
    pub const fn max(self) -> u64 {
        (1u64 << self.width) - 1
    }

    pub const fn get(self, word: u64) -> u64 {
        (word >> self.lsb) & self.max()
    }

    /// `word` with the field replaced by `value`'s low `width` bits.
    pub const fn set(self, word: u64, value: u64) -> u64 {
        (word & !(self.max() << self.lsb)) | ((value & self.max()) << self.lsb)
    }
}

/// Where a format keeps its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagsAt {
    /// A field of PESBT (ISAv9's one flag bit, the RISC-V capability mode).
    Pesbt(Field),
    /// Bits of the address that bounds ignore (Morello's top byte).
    Address(Field),
}

/// The architectural permissions. Each format gives each a bit of its
/// permissions value (the one `CGetPerm`/`GCPERM` reads), or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// May be stored through a capability without Store Local.
    Global,
    Execute,
    Load,
    Store,
    LoadCapability,
    StoreCapability,
    /// May store capabilities that are not Global.
    StoreLocalCapability,
    Seal,
    Unseal,
    /// ISAv9's CInvoke, Morello's Branch Sealed Pair.
    Invoke,
    /// ISAv9's Access System Registers, Morello's System.
    System,
    SetCid,
    /// Morello only: executes in Executive rather than Restricted mode.
    Executive,
    /// Morello only: capabilities loaded through it keep their store permissions.
    MutableLoad,
    /// Software-defined permissions (Morello and RV64 have four, RV32 none).
    User0,
    User1,
    User2,
    User3,
}

impl Permission {
    /// The permission's name as `retype cheri decode` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Global => "global",
            Permission::Execute => "execute",
            Permission::Load => "load",
            Permission::Store => "store",
            Permission::LoadCapability => "load-cap",
            Permission::StoreCapability => "store-cap",
            Permission::StoreLocalCapability => "store-local-cap",
            Permission::Seal => "seal",
            Permission::Unseal => "unseal",
            Permission::Invoke => "invoke",
            Permission::System => "system",
            Permission::SetCid => "set-cid",
            Permission::Executive => "executive",
            Permission::MutableLoad => "mutable-load",
            Permission::User0 => "user0",
            Permission::User1 => "user1",
            Permission::User2 => "user2",
            Permission::User3 => "user3",
        }
    }
}

/// Everything that distinguishes one format from another.
///
/// Invariants: `max_exponent == addr_width - mantissa_width + 2` (the
/// exponent that makes a length of `2^addr_width` fit);
/// `bounds_address_width <= addr_width`; the fields do not overlap and fit
/// the PESBT word, whose low `2 * mantissa_width - 1` bits are the bounds
/// (EBT: B, then T without its top two bits, then the exponent-format bit).
#[derive(Debug)]
pub struct Params {
    /// AW: addresses, bases and PESBT are AW bits; a top is at most `2^AW`.
    pub addr_width: u32,
    /// MW: the width of the bounds' bottom B (and of the top T, whose two
    /// highest bits are not stored but inferred).
    pub mantissa_width: u32,
    /// The largest exponent a length needs.
    pub max_exponent: u32,
    /// The low address bits the bounds are computed from, the highest of them
    /// sign-extended (Morello: 56, its top byte is flags); AW elsewhere.
    pub bounds_address_width: u32,
    /// Morello stores "exponent is zero" and the exponent bit-inverted (so that
    /// the null capability is all zeros); ISAv9 stores "internal exponent" and
    /// the exponent as it is (and xors PESBT in memory instead).
    pub inverted_exponent: bool,
    /// Morello: exponents above `max_exponent` mean the whole address space,
    /// and only this one is well formed (the null capability's all-ones
    /// exponent). ISAv9 has none: larger exponents count as `max_exponent`.
    pub whole_space_exponent: Option<u32>,
    /// The permissions value's bits from bit 0 up (Morello: all 18, its user
    /// permissions among them; ISAv9: the 12 hardware permissions).
    pub permissions: Field,
    /// ISAv9's user permissions, a field of their own, at `user_permissions_at`
    /// in the permissions value.
    pub user_permissions: Field,
    pub user_permissions_at: u32,
    /// Bits that must be zero in a valid capability (RV64's two).
    pub reserved: Field,
    pub flags: FlagsAt,
    pub otype: Field,
    /// The object type of an unsealed capability.
    pub otype_unsealed: u32,
    /// The object type of a sealed entry (a sentry).
    pub otype_sentry: u32,
    /// The object types `seal` may give: all but the reserved ones.
    pub sealing_otypes: RangeInclusive<u32>,
    /// Whether sealing an entry needs Execute (ISAv9's CSealEntry does,
    /// Morello's SEAL does not).
    pub sentry_needs_execute: bool,
    /// The permission bits, in the order names are printed.
    pub permission_bits: &'static [(Permission, u32)],
}

/// ISAv9's hardware permissions (RV64 adds four user permissions at 15 to 18).
const ISAV9_PERMISSIONS: [(Permission, u32); 12] = [
    (Permission::Global, 0),
    (Permission::Execute, 1),
    (Permission::Load, 2),
    (Permission::Store, 3),
    (Permission::LoadCapability, 4),
    (Permission::StoreCapability, 5),
    (Permission::StoreLocalCapability, 6),
    (Permission::Seal, 7),
    (Permission::Invoke, 8),
    (Permission::Unseal, 9),
    (Permission::System, 10),
    (Permission::SetCid, 11),
];

const RV64_PERMISSIONS: [(Permission, u32); 16] = {
    let user = [
        (Permission::User0, 15),
        (Permission::User1, 16),
        (Permission::User2, 17),
        (Permission::User3, 18),
    ];
    let mut all = [(Permission::Global, 0); 16];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < ISAV9_PERMISSIONS.len() {
            ISAV9_PERMISSIONS[i]
        } else {
            user[i - ISAV9_PERMISSIONS.len()]
        };
        i += 1;
    }
    all
};

const MORELLO_PERMISSIONS: [(Permission, u32); 18] = [
    (Permission::Global, 0),
    (Permission::Executive, 1),
    (Permission::User0, 2),
    (Permission::User1, 3),
    (Permission::User2, 4),
    (Permission::User3, 5),
    (Permission::MutableLoad, 6),
    (Permission::SetCid, 7),
    (Permission::Invoke, 8),
    (Permission::System, 9),
    (Permission::Unseal, 10),
    (Permission::Seal, 11),
    (Permission::StoreLocalCapability, 12),
    (Permission::StoreCapability, 13),
    (Permission::LoadCapability, 14),
    (Permission::Execute, 15),
    (Permission::Store, 16),
    (Permission::Load, 17),
];

const ABSENT: Field = Field { lsb: 0, width: 0 };

/// Morello: permissions 127..110, object type 109..95 (not inverted:
/// unsealed is 0, then the sentry and two load-branch types), bounds 94..64.
const MORELLO: Params = Params {
    addr_width: 64,
    mantissa_width: 16,
    max_exponent: 50,
    bounds_address_width: 56,
    inverted_exponent: true,
    whole_space_exponent: Some(63),
    permissions: Field { lsb: 46, width: 18 },
    user_permissions: ABSENT,
    user_permissions_at: 0,
    reserved: ABSENT,
    flags: FlagsAt::Address(Field { lsb: 56, width: 8 }),
    otype: Field { lsb: 31, width: 15 },
    otype_unsealed: 0,
    otype_sentry: 1,
    sealing_otypes: 4..=0x7fff,
    sentry_needs_execute: false,
    permission_bits: &MORELLO_PERMISSIONS,
};

/// RV64 (CC128): user permissions 127..124, hardware permissions 123..112,
/// reserved 111..110, flag 109, object type 108..91 (the top four values
/// reserved, unsealed the largest), bounds 90..64.
const RV64: Params = Params {
    addr_width: 64,
    mantissa_width: 14,
    max_exponent: 52,
    bounds_address_width: 64,
    inverted_exponent: false,
    whole_space_exponent: None,
    permissions: Field { lsb: 48, width: 12 },
    user_permissions: Field { lsb: 60, width: 4 },
    user_permissions_at: 15,
    reserved: Field { lsb: 46, width: 2 },
    flags: FlagsAt::Pesbt(Field { lsb: 45, width: 1 }),
    otype: Field { lsb: 27, width: 18 },
    otype_unsealed: 0x3_ffff,
    otype_sentry: 0x3_fffe,
    sealing_otypes: 0..=0x3_fffb,
    sentry_needs_execute: true,
    permission_bits: &RV64_PERMISSIONS,
};

/// RV32 (CC64): hardware permissions 63..52, flag 51, object type 50..47
/// (the top four values reserved), bounds 46..32.
const RV32: Params = Params {
    addr_width: 32,
    mantissa_width: 8,
    max_exponent: 26,
    bounds_address_width: 32,
    inverted_exponent: false,
    whole_space_exponent: None,
    permissions: Field { lsb: 20, width: 12 },
    user_permissions: ABSENT,
    user_permissions_at: 0,
    reserved: ABSENT,
    flags: FlagsAt::Pesbt(Field { lsb: 19, width: 1 }),
    otype: Field { lsb: 15, width: 4 },
    otype_unsealed: 0xf,
    otype_sentry: 0xe,
    sealing_otypes: 0..=0xb,
    sentry_needs_execute: true,
    permission_bits: &ISAV9_PERMISSIONS,
};

impl Format {
    pub const ALL: &'static [Format] = <Format as VariantArray>::VARIANTS;

    pub fn name(self) -> &'static str {
        self.into()
    }

    pub const fn params(self) -> &'static Params {
        match self {
            Format::Morello => &MORELLO,
            Format::Rv64 => &RV64,
            Format::Rv32 => &RV32,
        }
    }

    /// The largest address, `2^AW - 1`.
    pub const fn max_address(self) -> u64 {
        u64::MAX >> (64 - self.params().addr_width)
    }

    /// The largest top, `2^AW`: a capability may reach the end of the address space.
    pub const fn max_top(self) -> u128 {
        1 << self.params().addr_width
    }

    /// Every permission bit of the format.
    pub fn all_permissions(self) -> u32 {
        self.params()
            .permission_bits
            .iter()
            .fold(0, |all, &(_, bit)| all | 1 << bit)
    }

    /// The bit of `permission` in this format's permissions value (as a
    /// mask), if it has one.
    pub fn permission_mask(self, permission: Permission) -> Option<u32> {
        self.params()
            .permission_bits
            .iter()
            .find(|&&(p, _)| p == permission)
            .map(|&(_, bit)| 1 << bit)
    }
}
