//! The augmented AA tree with packed links declared as bitfields (seed 001
//! §4.5.4, "C bitfields"): the layout of [`packed`](super::packed), but the
//! code that reaches a link's slot id and byte is generated from a
//! declaration of the fields, where the tree of
//! [`PackedTree`](super::PackedTree) writes its own shifts and masks.
//!
//! The thesis's fifth variant let the C compiler generate that code from a
//! bitfield struct, and measured it 5 to 65 % slower than its hand-written
//! shifts and masks. Rust has no bitfields; what it has is a derive that
//! generates the accessors from a declaration, as a C compiler does
//! ([`bitfield_struct`]), so this is the Rust counterpart of that variant.
//! The generated code is not the same as ours: a write checks its value
//! against the field's width and panics past it (C truncates silently, our
//! [`Word`](super::packed::Word) trusts its caller), a compare and a branch
//! per relinking; reads are the same AND or shift.

use bitfield_struct::bitfield;

use super::packed::{Link, Packed};
use super::tree::Tree;

/// A link word as a bitfield: the slot id in the low 24 bits, the byte in
/// the high 8.
#[bitfield(u32, debug = true, default = false)]
#[derive(PartialEq)]
pub struct Bitfield {
    #[bits(24)]
    slot: u32,
    #[bits(8)]
    data: u8,
}

impl Link for Bitfield {
    const NAME: &'static str = "tree-bitfield";
    const NONE: Bitfield = Bitfield::new().with_slot(super::packed::NIL);

    fn id(self) -> u32 {
        self.slot()
    }

    fn byte(self) -> u8 {
        self.data()
    }

    fn with_id(self, id: u32) -> Bitfield {
        self.with_slot(id)
    }

    fn with_byte(self, byte: u8) -> Bitfield {
        self.with_data(byte)
    }
}

/// The augmented AA tree with parent pointers, small data packed into the
/// links through bitfield accessors.
pub type BitfieldTree = Tree<Packed<Bitfield>>;

#[cfg(test)]
mod tests {
    use super::super::packed::{tests::id_and_byte_are_independent, NIL};
    use super::Bitfield;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bitfields_keep_id_and_byte_apart(word: u32, id in 0..=NIL, byte: u8) {
            id_and_byte_are_independent(Bitfield::from_bits(word), id, byte)?;
        }

        /// The declaration puts the fields where the hand-written word
        /// puts them: the id low, the byte high.
        #[test]
        fn bitfields_lay_out_as_the_word(id in 0..=NIL, byte: u8) {
            let w = Bitfield::new().with_slot(id).with_data(byte);
            prop_assert_eq!(w.into_bits(), id | (byte as u32) << 24);
        }
    }
}
