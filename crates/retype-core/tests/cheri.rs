//! CHERI compressed capabilities (`retype_core::cheri`), for each format:
//!
//! - set bounds gives bounds that contain the request, exactly when the
//!   request is representable (a base aligned with CRAM, a length CRRL
//!   leaves alone), and a length rounded by CRRL from a base aligned with
//!   CRAM is always exact;
//! - decoding what was encoded gives back the same capability;
//! - no chain of derivations grants more than its start, and the checked
//!   operations refuse what would;
//! - an address change inside the representable region keeps the tag and
//!   the bounds, one outside it clears the tag;
//! - sealing and unsealing follow their rules.
//!
//! Then vectors derived by hand from the encoding, and the reference
//! library's published test inputs where `RETYPE_CHERI_VECTORS` names its
//! `test` directory. Proptest runs 256 cases of each property;
//! `PROPTEST_CASES=1000000` runs a million.

use proptest::prelude::*;
use retype_core::cheri::concentrate::{bounds_address, uses_address};
use retype_core::cheri::encoding::{null_pesbt, to_memory};
use retype_core::cheri::permissions::names;
use retype_core::cheri::{
    representable_alignment_mask, representable_length, Capability, Error, Format, Parts,
    Permission, SetBounds,
};

/// A number of at most `width` bits, its magnitude spread over all widths
/// (so that every exponent is tried).
fn spread(width: u32) -> impl Strategy<Value = u64> {
    (any::<u64>(), 0..=width).prop_map(|(x, bits)| x.checked_shr(64 - bits).unwrap_or(0))
}

/// The width of the bases tried: Morello's bounds read the address's low 56
/// bits with bit 55 as a sign, so its bases stay below 2^55 (the top byte
/// has tests of its own).
fn base_width(format: Format) -> u32 {
    let p = format.params();
    p.addr_width.min(p.bounds_address_width - 1)
}

/// A requested range `base..base + length` within the address space.
fn request(format: Format) -> impl Strategy<Value = (u64, u128)> {
    let aw = format.params().addr_width;
    (spread(base_width(format)), spread(aw), any::<bool>()).prop_map(
        move |(base, length, to_end)| {
            let room = format.max_top() - u128::from(base);
            (
                base,
                if to_end {
                    room
                } else {
                    room.min(length.into())
                },
            )
        },
    )
}

/// The root capability at `base`, bounded to `length` bytes (checked).
fn bounded(format: Format, base: u64, length: u128) -> SetBounds {
    Capability::root(format)
        .set_address(base)
        .set_bounds(length)
        .expect("a request within the root is granted")
}

fn set_bounds_contains_the_request(
    format: Format,
    base: u64,
    length: u128,
) -> Result<(), TestCaseError> {
    let set = bounded(format, base, length);
    let cap = set.capability;
    prop_assert!(cap.tag());
    prop_assert_eq!(cap.address(), base);
    prop_assert!(cap.base() <= base);
    prop_assert!(cap.top() >= u128::from(base) + length);
    prop_assert!(cap.top() <= format.max_top());
    prop_assert_eq!(set.exact, (cap.base(), cap.length()) == (base, length));
    // The instruction gives the same bounds, tagged.
    prop_assert_eq!(
        Capability::root(format)
            .set_address(base)
            .csetbounds(length),
        set
    );
    // Exact iff the request is representable: aligned with CRAM, of a length
    // CRRL leaves alone, and encodable with the same fields.
    let aligned = base & representable_alignment_mask(format, length) == base;
    let fixed = representable_length(format, length) == length;
    prop_assert_eq!(set.exact, aligned && fixed);
    let parts = Parts {
        base,
        top: u128::from(base) + length,
        ..cap.parts()
    };
    prop_assert_eq!(set.exact, Capability::encode(format, &parts).is_ok());
    if set.exact {
        prop_assert_eq!(
            Capability::root(format)
                .set_address(base)
                .set_bounds_exact(length),
            Ok(cap)
        );
    } else {
        prop_assert_eq!(
            Capability::root(format)
                .set_address(base)
                .set_bounds_exact(length),
            Err(Error::Inexact {
                base: cap.base(),
                top: cap.top()
            })
        );
    }
    Ok(())
}

fn crrl_and_cram_give_exact_bounds(
    format: Format,
    base: u64,
    length: u128,
) -> Result<(), TestCaseError> {
    let crrl = representable_length(format, length);
    let cram = representable_alignment_mask(format, length);
    prop_assert!(crrl >= length);
    prop_assert_eq!(representable_length(format, crrl), crrl);
    let aligned = base & cram;
    if u128::from(aligned) + crrl <= format.max_top() {
        let set = bounded(format, aligned, crrl);
        prop_assert!(set.exact, "{:#x} + {:#x} -> {:?}", aligned, crrl, set);
        // And the rounded bounds of the original request are these.
        if aligned == base {
            let rounded = bounded(format, base, length).capability;
            prop_assert_eq!(
                (rounded.base(), rounded.top()),
                (aligned, u128::from(aligned) + crrl)
            );
        }
    }
    Ok(())
}

/// One step of a derivation chain.
#[derive(Clone, Debug)]
enum Step {
    /// Bounds from an offset into the current bounds (scaled to them).
    Bounds {
        at: u64,
        length: u64,
    },
    /// The hardware's set bounds, which may ask for anything.
    CSetBounds {
        length: u64,
    },
    /// An address anywhere, near the current bounds or not.
    Address {
        delta: u64,
        down: bool,
    },
    Permissions(u32),
}

fn step(format: Format) -> impl Strategy<Value = Step> {
    let aw = format.params().addr_width;
    prop_oneof![
        (any::<u64>(), spread(aw)).prop_map(|(at, length)| Step::Bounds { at, length }),
        spread(aw).prop_map(|length| Step::CSetBounds { length }),
        (spread(aw), any::<bool>()).prop_map(|(delta, down)| Step::Address { delta, down }),
        any::<u32>().prop_map(Step::Permissions),
    ]
}

fn derivations_never_widen(format: Format, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut cap = Capability::root(format);
    for s in steps {
        let next = match *s {
            Step::Bounds { at, length } => {
                let span = cap.length().max(1);
                let address =
                    (u128::from(cap.base()) + u128::from(at) % span) as u64 & format.max_address();
                let from = cap.set_address(address);
                let length = u128::from(length);
                let checked = from.set_bounds(length);
                let set = from.csetbounds(length);
                // Refused exactly where the instruction clears the tag, and
                // never where the request lies within the bounds.
                prop_assert_eq!(checked.is_ok(), set.capability.tag());
                if let Ok(granted) = checked {
                    prop_assert_eq!(granted, set);
                }
                let plain = bounds_address(format, address) == address;
                let inside = from.tag()
                    && plain
                    && from.base() <= address
                    && u128::from(address) + length <= from.top();
                prop_assert!(!inside || checked.is_ok(), "{:?}", checked);
                set.capability
            }
            Step::CSetBounds { length } => cap.csetbounds(length.into()).capability,
            Step::Address { delta, down } => {
                let address = if down {
                    cap.address().wrapping_sub(delta)
                } else {
                    cap.address().wrapping_add(delta)
                };
                cap.set_address(address & format.max_address())
            }
            Step::Permissions(mask) => {
                let wanted = mask & format.all_permissions();
                match cap.restrict_permissions(wanted) {
                    Ok(c) => c,
                    Err(Error::Widens { extra }) => {
                        prop_assert_eq!(extra, wanted & !cap.permissions());
                        prop_assert!(extra != 0);
                        cap.restrict_permissions(wanted & cap.permissions())
                            .unwrap()
                    }
                    Err(Error::Untagged) => {
                        prop_assert!(!cap.tag());
                        cap
                    }
                    Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
                }
            }
        };
        if next.tag() {
            prop_assert!(cap.tag(), "a tag from nothing");
            prop_assert!(
                next.base() >= cap.base() && next.top() <= cap.top(),
                "{:?} -> {:?}",
                cap,
                next
            );
            prop_assert_eq!(next.permissions() & !cap.permissions(), 0);
            // A tagged capability's bits decode to itself.
            prop_assert_eq!(
                Capability::decode(format, next.pesbt(), next.address(), true),
                Ok(next)
            );
        }
        cap = next;
    }
    Ok(())
}

fn decode_encode_round_trips(
    format: Format,
    base: u64,
    length: u128,
    offset: u64,
    permissions: u32,
    flags: u8,
) -> Result<(), TestCaseError> {
    let cap = bounded(format, base, length).capability;
    // An address within the bounds, or at their top, as the bounds see it:
    // Morello's small bounds read bit 55 as a sign, so they end below 2^55
    // (see morello_flags_vectors).
    let p = format.params();
    let last = if p.bounds_address_width < p.addr_width && uses_address(format, cap.exponent()) {
        (1 << (p.bounds_address_width - 1)) - 1
    } else {
        format.max_address()
    };
    let end = cap.top().min(last.into());
    let address =
        (u128::from(cap.base()) + u128::from(offset) % (end - u128::from(cap.base()) + 1)) as u64;
    let cap = cap
        .set_address(address)
        .restrict_permissions(permissions & format.all_permissions())
        .unwrap();
    prop_assert!(cap.tag());
    // Morello's flags are the address's top byte; ISAv9's one bit is free.
    let parts = Parts {
        flags: if format == Format::Morello {
            cap.flags()
        } else {
            flags & 1
        },
        ..cap.parts()
    };
    let encoded = Capability::encode(format, &parts).unwrap();
    let decoded =
        Capability::decode(format, encoded.pesbt(), encoded.address(), encoded.tag()).unwrap();
    prop_assert_eq!(decoded.parts(), parts);
    prop_assert_eq!(decoded, encoded);
    if parts.flags == cap.flags() {
        // The canonical encoding is the one set bounds chose.
        prop_assert_eq!(encoded, cap);
    }
    // Untagged, the same bits decode to the same fields.
    let untagged = Capability::decode(format, encoded.pesbt(), encoded.address(), false).unwrap();
    prop_assert_eq!(
        untagged.parts(),
        Parts {
            tag: false,
            ..parts
        }
    );
    Ok(())
}

/// The representable region of a capability whose bounds use the address:
/// `2^(E+MW)` bytes from an eighth of that below the base's eighth. The
/// hardware's check stays `2^E` inside it at either end.
fn address_changes(
    format: Format,
    base: u64,
    length: u128,
    delta: u64,
    down: bool,
) -> Result<(), TestCaseError> {
    let p = format.params();
    let cap = bounded(format, base, length).capability;
    let address = if down {
        base.wrapping_sub(delta)
    } else {
        base.wrapping_add(delta)
    } & format.max_address();
    let moved = cap.set_address(address);
    prop_assert_eq!(moved.address(), address);
    let e = cap.exponent();
    // Bounds see Morello's address without its top byte, bit 55 a sign;
    // small bounds cannot survive that sign changing.
    let seen = bounds_address(format, address);
    let sign = p.bounds_address_width - 1;
    let sign_change = p.bounds_address_width < p.addr_width
        && uses_address(format, e)
        && (address ^ base) >> sign & 1 == 1;
    let in_bounds = cap.base() <= seen && u128::from(seen) < cap.top();
    let region = e + p.mantissa_width;
    let (inside, outside) = if region >= p.addr_width {
        (true, false)
    } else {
        let eighth = region - 3;
        let start = ((cap.base() >> eighth).wrapping_sub(1) << eighth) & format.max_address();
        let offset = seen.wrapping_sub(start) & format.max_address();
        (
            offset >= 1 << e && offset < (1 << region) - (1 << e),
            offset >= 1 << region,
        )
    };
    if sign_change || outside {
        prop_assert!(!moved.tag(), "{:?} -> {:#x}", cap, address);
    } else if in_bounds || inside {
        prop_assert!(moved.tag(), "{:?} -> {:#x}", cap, address);
    }
    prop_assert_eq!(moved.tag(), cap.is_representable_with_address(address));
    if moved.tag() {
        // Kept bounds are the ones the bits decode to at the new address.
        prop_assert_eq!((moved.base(), moved.top()), (cap.base(), cap.top()));
        prop_assert_eq!(
            Capability::decode(format, moved.pesbt(), address, true),
            Ok(moved)
        );
    } else {
        prop_assert_eq!(
            moved,
            Capability::decode(format, cap.pesbt(), address, false).unwrap()
        );
    }
    Ok(())
}

fn sealing(
    format: Format,
    otype: u32,
    sealer_permissions: u32,
    global: bool,
) -> Result<(), TestCaseError> {
    let p = format.params();
    let data = bounded(format, 0x1000, 0x100).capability;
    let all = format.all_permissions();
    let seal = format.permission_mask(Permission::Seal).unwrap();
    let unseal = format.permission_mask(Permission::Unseal).unwrap();
    let global_bit = format.permission_mask(Permission::Global).unwrap();
    let authority = |perms: u32| {
        Capability::root(format)
            .set_address(u64::from(otype) & format.max_address())
            .restrict_permissions(perms & all)
            .unwrap()
    };
    let sealer = authority(sealer_permissions);
    let sealed = data.seal(&sealer);
    if sealer_permissions & seal == 0 {
        prop_assert_eq!(
            sealed,
            Err(Error::MissingPermission {
                permission: Permission::Seal
            })
        );
        return Ok(());
    }
    if !p.sealing_otypes.contains(&otype) {
        prop_assert_eq!(
            sealed,
            Err(Error::NotASealingOtype {
                address: u64::from(otype) & format.max_address()
            })
        );
        return Ok(());
    }
    let sealed = sealed.unwrap();
    prop_assert!(sealed.is_sealed() && sealed.tag());
    prop_assert_eq!(sealed.otype(), otype);
    prop_assert_eq!(
        (sealed.base(), sealed.top(), sealed.permissions()),
        (data.base(), data.top(), data.permissions())
    );
    // A sealed capability cannot be changed, only unsealed.
    prop_assert_eq!(sealed.set_bounds(0x10), Err(Error::Sealed));
    prop_assert_eq!(sealed.restrict_permissions(0), Err(Error::Sealed));
    prop_assert_eq!(sealed.seal(&sealer), Err(Error::Sealed));
    prop_assert!(!sealed.csetbounds(0x10).capability.tag());
    prop_assert!(!sealed.set_address(0x1001).tag());
    prop_assert_eq!(data.unseal(&sealer), Err(Error::NotSealed));
    // Unsealing needs Unseal, and the object type as address.
    let unsealer = authority(all & !global_bit | if global { global_bit } else { 0 });
    prop_assert_eq!(
        sealed.unseal(&authority(all & !unseal)),
        Err(Error::MissingPermission {
            permission: Permission::Unseal
        })
    );
    let other = unsealer.set_address(u64::from(otype ^ 1));
    prop_assert_eq!(
        sealed.unseal(&other),
        Err(Error::WrongOtype {
            otype,
            address: u64::from(otype ^ 1)
        })
    );
    let unsealed = sealed.unseal(&unsealer).unwrap();
    let expected = if global {
        data
    } else {
        data.restrict_permissions(data.permissions() & !global_bit)
            .unwrap()
    };
    prop_assert_eq!(unsealed, expected);
    // The authority's address must lie within its own bounds.
    let beside = (u64::from(otype) + 1) & format.max_address();
    let stray = authority(all)
        .set_address(beside)
        .set_bounds(1)
        .unwrap()
        .capability
        .set_address(u64::from(otype));
    prop_assert_eq!(
        sealed.unseal(&stray),
        Err(Error::AddressOutOfBounds {
            address: u64::from(otype)
        })
    );
    prop_assert_eq!(
        data.seal(&stray),
        Err(Error::AddressOutOfBounds {
            address: u64::from(otype)
        })
    );
    // A sentry is sealed for good: jumped to, never unsealed. ISAv9 seals
    // only code as an entry; Morello anything.
    let execute = format.permission_mask(Permission::Execute).unwrap();
    let no_execute = data
        .restrict_permissions(all & !execute)
        .unwrap()
        .seal_entry();
    if p.sentry_needs_execute {
        prop_assert_eq!(
            no_execute,
            Err(Error::MissingPermission {
                permission: Permission::Execute
            })
        );
    } else {
        prop_assert!(no_execute.is_ok());
    }
    let sentry = data.seal_entry().unwrap();
    prop_assert_eq!(sentry.otype(), p.otype_sentry);
    prop_assert_eq!(
        sentry.unseal(&authority(all)),
        Err(Error::ReservedOtype {
            otype: p.otype_sentry
        })
    );
    Ok(())
}

/// The properties for one format.
macro_rules! properties {
    ($module:ident, $format:expr) => {
        mod $module {
            use super::*;
            const FORMAT: Format = $format;

            proptest! {
                #[test]
                fn set_bounds_contains_the_request((base, length) in request(FORMAT)) {
                    super::set_bounds_contains_the_request(FORMAT, base, length)?;
                }

                #[test]
                fn crrl_and_cram_give_exact_bounds((base, length) in request(FORMAT)) {
                    super::crrl_and_cram_give_exact_bounds(FORMAT, base, length)?;
                }

                #[test]
                fn derivations_never_widen(steps in prop::collection::vec(step(FORMAT), 1..24)) {
                    super::derivations_never_widen(FORMAT, &steps)?;
                }

                #[test]
                fn decode_encode_round_trips(
                    (base, length) in request(FORMAT),
                    offset in any::<u64>(),
                    permissions in any::<u32>(),
                    flags in any::<u8>(),
                ) {
                    super::decode_encode_round_trips(FORMAT, base, length, offset, permissions, flags)?;
                }

                #[test]
                fn address_changes(
                    (base, length) in request(FORMAT),
                    delta in spread(FORMAT.params().addr_width),
                    down in any::<bool>(),
                ) {
                    super::address_changes(FORMAT, base, length, delta, down)?;
                }

                #[test]
                fn sealing(
                    otype in prop_oneof![
                        FORMAT.params().sealing_otypes.clone(),
                        0..=FORMAT.params().otype.max() as u32,
                    ],
                    permissions in any::<u32>(),
                    global in any::<bool>(),
                ) {
                    super::sealing(FORMAT, otype, permissions, global)?;
                }
            }
        }
    };
}

properties!(morello, Format::Morello);
properties!(rv64, Format::Rv64);
properties!(rv32, Format::Rv32);

/// The null capability: no permissions, unsealed, the whole address space
/// encoded with the largest exponent, and all zeros in memory.
#[test]
fn null_capabilities() {
    // RV64: unsealed is the 18-bit object type's largest value, 0x3ffff at
    // bit 27 (0x1ffff8000000); the internal-exponent bit 26 (0x4000000);
    // E = 52 = 0b110_100, its high half in T's low bits 14..16 (6 << 14 =
    // 0x18000), its low half in B's bits 0..2 (4); B and T otherwise 0.
    assert_eq!(null_pesbt(Format::Rv64), 0x1fff_fc01_8004);
    // RV32: unsealed 0xf at bit 15 (0x78000), internal exponent at bit 14
    // (0x4000), E = 26 = 0b011_010: 3 << 8 and 2.
    assert_eq!(null_pesbt(Format::Rv32), 0x7_c302);
    // Morello: unsealed is 0, "exponent zero" is clear (the exponent is
    // internal), and E = 63 is stored inverted: all zeros.
    assert_eq!(null_pesbt(Format::Morello), 0);
    for &format in Format::ALL {
        let null = Capability::null(format);
        assert_eq!(to_memory(format, null.pesbt()), 0);
        assert!(!null.tag() && !null.is_sealed() && null.permissions() == 0);
        assert_eq!((null.base(), null.top()), (0, format.max_top()));
    }
}

/// The root: every permission, unsealed, `0..2^AW`.
#[test]
fn root_capabilities() {
    // RV64: the 12 hardware permissions at bit 48 and the 4 user ones at 60
    // fill the top 16 bits. The top 2^64 needs E = 52, and T = 2^64 >> 55 =
    // 2^9 has no stored bit below its top two: the rest is null's.
    assert_eq!(
        Capability::root(Format::Rv64).pesbt(),
        0xffff_1fff_fc01_8004
    );
    // RV32: 12 permissions at bit 20; 2^32 needs E = 26, T = 2^32 >> 29 = 8,
    // again nothing stored: null's bits.
    assert_eq!(Capability::root(Format::Rv32).pesbt(), 0xfff7_c302);
    // Morello: 18 permission bits at 46 (0x3ffff << 46); 2^64 needs E = 50
    // = 0b110_010, stored inverted 0b001_101: 1 << 16 and 5; T = 2^64 >> 53
    // = 2^11, nothing stored.
    assert_eq!(
        Capability::root(Format::Morello).pesbt(),
        0xffff_c000_0001_0005
    );
    for &format in Format::ALL {
        let root = Capability::root(format);
        assert!(root.tag() && !root.is_sealed());
        assert_eq!((root.base(), root.top()), (0, format.max_top()));
        assert_eq!(root.permissions(), format.all_permissions());
        let count = names(format, root.permissions()).count();
        assert_eq!(
            count,
            [18, 16, 12][Format::ALL.iter().position(|&f| f == format).unwrap()]
        );
    }
}

/// Set bounds from the root, worked by hand: (base, top, exact), then CRRL
/// and CRAM of the length.
#[test]
fn set_bounds_vectors() {
    let check = |format, base, length, want: (u64, u128, bool), crrl, cram| {
        let set = bounded(format, base, length);
        let got = (set.capability.base(), set.capability.top(), set.exact);
        assert_eq!(got, want, "{format} {base:#x} + {length:#x}");
        assert_eq!(
            representable_length(format, length),
            crrl,
            "{format} crrl {length:#x}"
        );
        assert_eq!(
            representable_alignment_mask(format, length),
            cram,
            "{format} cram {length:#x}"
        );
    };
    // 40 bytes are below 2^(MW-2) in every format (RV32's is 64): no
    // exponent, exact anywhere.
    for &format in Format::ALL {
        check(
            format,
            0x1001,
            40,
            (0x1001, 0x1029, true),
            40,
            format.max_address(),
        );
    }
    // 2^16 + 1 bytes: the exponent puts the length's top bit (16) at MW-2.
    // RV64 (MW 14): E = 4; B and T lose three more bits to the exponent, so
    // they count 2^7 = 128-byte units: the top rounds up to 0x1_0080.
    check(
        Format::Rv64,
        0,
        0x1_0001,
        (0, 0x1_0080, false),
        0x1_0080,
        !0x7f,
    );
    // Morello (MW 16): E = 2, 32-byte units: 0x1_0020.
    check(
        Format::Morello,
        0,
        0x1_0001,
        (0, 0x1_0020, false),
        0x1_0020,
        !0x1f,
    );
    // RV32 (MW 8): E = 10, 8 KiB units: 0x1_2000.
    check(
        Format::Rv32,
        0,
        0x1_0001,
        (0, 0x1_2000, false),
        0x1_2000,
        0xffff_e000,
    );
    // The base rounds down in the same units: 0x1234_5678 to 0x1234_5600,
    // the top 0x1235_5679 up to 0x1235_5680.
    check(
        Format::Rv64,
        0x1234_5678,
        0x1_0001,
        (0x1234_5600, 0x1235_5680, false),
        0x1_0080,
        !0x7f,
    );
    // Bounds that are multiples of the unit are exact: 2^28 at 2^28 (E = 16).
    check(
        Format::Rv64,
        1 << 28,
        1 << 28,
        (1 << 28, 1 << 29, true),
        1 << 28,
        !((1 << 19) - 1),
    );
    // 2^13 - 1 bytes (RV64): bit 12 is set, so the exponent is internal
    // though 0; in 8-byte units the top rounds up to 1024 units, a length
    // one bit longer than the mantissa holds normalised: E goes up to 1 and
    // the top to 0x2000 in 16-byte units.
    check(Format::Rv64, 0, 0x1fff, (0, 0x2000, false), 0x2000, !0xf);
    // A top of 2^64, one past the last address: 0x1000 bytes below it.
    check(
        Format::Rv64,
        0u64.wrapping_sub(0x1000),
        0x1000,
        (0u64.wrapping_sub(0x1000), 1 << 64, true),
        0x1000,
        !7,
    );
}

/// RV64, base 0 and 2^20 bytes: E = 8 (the length's top bit, 20, at MW-2);
/// B's top three bits are 0, so the representable region starts an eighth
/// of it (2^(E+MW-3) = 2^19) below 0 and spans 2^22:
/// 0xffff_ffff_fff8_0000..0x38_0000. Everywhere in it the bits decode to the
/// same bounds, but the hardware compares whole 2^E units of the change:
/// from address 0 it keeps the tag from the region's start and stops one
/// unit (256 bytes) short of its end.
#[test]
fn representable_region_vector() {
    let cap = bounded(Format::Rv64, 0, 1 << 20).capability;
    assert_eq!(cap.exponent(), 8);
    // (address, keeps the tag, decodes to the same bounds)
    for (address, keeps, same) in [
        (0xf_ffff, true, true),
        (0x37_feff, true, true),
        (0x37_ff00, false, true),
        (0x38_0000, false, false),
        (0xffff_ffff_fff8_0000, true, true),
        (0xffff_ffff_fff7_ffff, false, false),
    ] {
        let moved = cap.set_address(address);
        assert_eq!(moved.tag(), keeps, "{address:#x}");
        let decoded = Capability::decode(Format::Rv64, cap.pesbt(), address, false).unwrap();
        assert_eq!(
            (decoded.base(), decoded.top()) == (0, 1 << 20),
            same,
            "{address:#x}"
        );
    }
}

/// Morello's flags are the address's top byte, which bounds ignore.
#[test]
fn morello_flags_vectors() {
    let flagged = 0xff00_0000_0000_0944;
    // From the root (E = 50: bounds not read from the address), 16 bytes
    // need E = 0, bounds read from the address's low 56 bits, 0x944. The
    // instruction computes them but clears the tag, as the chip does; the
    // checked call refuses.
    let at = Capability::root(Format::Morello).set_address(flagged);
    let set = at.csetbounds(16);
    assert_eq!(
        (set.capability.base(), set.capability.top(), set.exact),
        (0x944, 0x954, true)
    );
    assert!(!set.capability.tag());
    assert_eq!(
        at.set_bounds(16),
        Err(Error::FlagsInAddress { address: flagged })
    );
    // Bounds set first, the flags are free to change: tag and bounds stay.
    let cap = bounded(Format::Morello, 0x944, 16).capability;
    let tagged = cap.set_address(flagged);
    assert!(tagged.tag());
    assert_eq!(
        (tagged.base(), tagged.top(), tagged.flags()),
        (0x944, 0x954, 0xff)
    );
    // But bit 55 is the bounds address's sign: changing it moves small bounds.
    assert!(!cap.set_address(0x0080_0000_0000_0944).tag());
}

/// What cannot be encoded or decoded tagged.
#[test]
fn encoding_refusals() {
    let root = Capability::root(Format::Rv64).parts();
    let encode = |parts| Capability::encode(Format::Rv64, &parts);
    assert_eq!(
        encode(Parts {
            otype: 1 << 18,
            ..root
        }),
        Err(Error::FieldTooWide {
            field: "otype",
            value: 1 << 18
        })
    );
    assert_eq!(
        encode(Parts {
            permissions: 1 << 12,
            ..root
        }),
        Err(Error::UnknownPermissions { bits: 1 << 12 })
    );
    // 2^16 + 1 bytes round (see set_bounds_vectors).
    let inexact = Parts {
        base: 0,
        top: 0x1_0001,
        ..root
    };
    assert_eq!(
        encode(inexact),
        Err(Error::Unrepresentable {
            base: 0,
            top: 0x1_0001,
            address: 0
        })
    );
    let morello = Capability::root(Format::Morello).parts();
    assert_eq!(
        Capability::encode(
            Format::Morello,
            &Parts {
                flags: 1,
                ..morello
            }
        ),
        Err(Error::FlagsMismatch {
            flags: 1,
            address: 0
        })
    );
    // RV64's reserved bits 46 and 47 set: fine untagged, not tagged.
    let reserved = null_pesbt(Format::Rv64) | 1 << 46;
    assert_eq!(
        Capability::decode(Format::Rv64, reserved, 0, false)
            .unwrap()
            .reserved(),
        1 << 46
    );
    assert_eq!(
        Capability::decode(Format::Rv64, reserved, 0, true),
        Err(Error::NotDerivable)
    );
}

/// The numbers in a C array of braced groups, `{0x…, 0x…}` as the reference
/// library ships its test inputs: one group per braces holding hex numbers.
fn braced_hex_groups(text: &str) -> Vec<Vec<u128>> {
    text.split('{')
        .filter_map(|chunk| chunk.split('}').next())
        .filter(|group| group.contains("0x"))
        .map(|group| {
            group
                .split(',')
                .map(|n| {
                    u128::from_str_radix(n.trim().trim_start_matches("0x"), 16)
                        .unwrap_or_else(|_| panic!("not hex: {n}"))
                })
                .collect()
        })
        .collect()
}

/// The reference library's published inputs (cheri-compressed-cap's
/// `test/decode_inputs_128.cpp` for Morello and RV64,
/// `test/decode_inputs_64.cpp` for RV32, and
/// `test/contrib/setbounds_inputs_128.cpp`, Sail's results for RV64), read
/// from `$RETYPE_CHERI_VECTORS` (that `test` directory). The set-bounds
/// inputs carry Sail's bounds, compared one by one; the decode inputs carry
/// none, so each is checked for what the reference's own test checks
/// besides Sail: valid bounds encode back to themselves, CRRL is
/// idempotent and with CRAM gives exact bounds.
#[test]
fn reference_test_inputs() {
    let Some(dir) = std::env::var_os("RETYPE_CHERI_VECTORS") else {
        eprintln!(
            "skipped: RETYPE_CHERI_VECTORS is not set (the reference library's test directory)"
        );
        return;
    };
    let dir = std::path::Path::new(&dir);
    let read = |name: &str| {
        let path = dir.join(name);
        braced_hex_groups(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
    };
    for &format in Format::ALL {
        let file = if format == Format::Rv32 {
            "decode_inputs_64.cpp"
        } else {
            "decode_inputs_128.cpp"
        };
        let inputs = read(file);
        assert!(inputs.len() >= 1000, "{file}: {} inputs", inputs.len());
        for input in &inputs {
            let &[pesbt, address] = input.as_slice() else {
                panic!("{file}: {input:x?}")
            };
            let cap = Capability::decode(format, pesbt as u64, address as u64, false).unwrap();
            if let Ok(tagged) = Capability::decode(format, cap.pesbt(), cap.address(), true) {
                if tagged.in_bounds() {
                    let encoded = Capability::encode(format, &tagged.parts()).unwrap();
                    assert_eq!(encoded.parts(), tagged.parts(), "{format} {input:x?}");
                }
            }
            let length = cap.length().min(u128::from(format.max_address()));
            let crrl = representable_length(format, length);
            assert!(crrl >= length);
            assert_eq!(
                representable_length(format, crrl),
                crrl,
                "{format} {input:x?}"
            );
            let base = cap.base() & representable_alignment_mask(format, length);
            if u128::from(base) + crrl <= format.max_top() && bounds_address(format, base) == base {
                assert!(bounded(format, base, crrl).exact, "{format} {input:x?}");
            }
        }
    }
    let rows = read("contrib/setbounds_inputs_128.cpp");
    assert!(rows.len() >= 1000, "{} set-bounds inputs", rows.len());
    for row in &rows {
        let &[base1, top1, base2, top2, sail_base1, sail_top1, sail_base2, sail_top2] =
            row.as_slice()
        else {
            panic!("{row:x?}")
        };
        let root = Capability::root(Format::Rv64);
        let first = root
            .set_address(base1 as u64)
            .csetbounds(top1 - base1)
            .capability;
        assert_eq!(
            (u128::from(first.base()), first.top()),
            (sail_base1, sail_top1),
            "{row:x?}"
        );
        let second = first
            .set_address(base2 as u64)
            .csetbounds(top2 - base2)
            .capability;
        assert_eq!(
            (u128::from(second.base()), second.top()),
            (sail_base2, sail_top2),
            "{row:x?}"
        );
    }
}
