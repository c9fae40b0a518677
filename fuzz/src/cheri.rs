//! `retype cheri decode`: any PESBT word and address of each format, as a
//! load from memory reads them, tagged or not; and bounds set on what
//! decodes.

use retype_core::cheri::permissions::names;
use retype_core::cheri::{encoding, Capability, Format};

/// Bytes: the format and the tag, PESBT, the address, a length (each
/// little-endian, zeros where the input ends).
pub fn cheri_decode(data: &[u8]) {
    let mut bytes = [0u8; 1 + 8 + 8 + 16];
    let n = data.len().min(bytes.len());
    bytes[..n].copy_from_slice(&data[..n]);
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let format = Format::ALL[usize::from(bytes[0] & 0x7f) % Format::ALL.len()];
    let tag = bytes[0] & 0x80 != 0;
    // Wider values are refused by the command before decoding.
    let (pesbt, address) = (
        word(1) & format.max_address(),
        word(9) & format.max_address(),
    );
    // At most `2^AW`, as CSetBounds requires.
    let length =
        u128::from_le_bytes(bytes[17..33].try_into().expect("16 bytes")) % (format.max_top() + 1);
    let Ok(cap) = Capability::decode(format, pesbt, address, tag) else {
        assert!(tag, "untagged bits always decode");
        return;
    };
    let parts = cap.parts();
    assert_eq!((parts.address, parts.tag), (address, tag));
    let _ = (
        cap.exponent(),
        cap.bounds_bits(),
        cap.otype(),
        cap.is_sealed(),
    );
    let _ = (cap.flags(), cap.reserved(), cap.in_bounds());
    let _ = names(format, cap.permissions()).count();
    assert_eq!(
        encoding::to_memory(format, encoding::to_memory(format, pesbt)),
        pesbt
    );
    let set = cap.csetbounds(length);
    assert_eq!(cap.set_bounds(length).is_ok(), set.capability.tag());
}
