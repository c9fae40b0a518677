//! Class fit: our policy for the watermark rule.
//!
//! Under seL4's rules fragmentation has two sources, and best fit fights
//! neither directly: objects of different sizes sharing a slab waste bytes
//! to alignment, and objects sharing a slab keep each other's freed space
//! locked until all are gone. Class fit gives each slab, from its first
//! object until it resets, one *size class* (the object size), so that
//! nothing is ever skipped for alignment and a slab holds only objects of
//! one kind. Within that constraint it packs like best fit:
//!
//! 1. a slab of the request's class where the objects fit, fewest bytes left;
//! 2. else an empty slab, the smallest that fits;
//! 3. else best fit over every slab that fits, counting the alignment waste
//!    as lost bytes.

use alloc::vec;
use alloc::vec::Vec;

use super::{min_by_key, Choice, Policy};
use crate::mm::slab::Slab;
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug)]
pub struct ClassFit {
    /// The object size (log2) each non-empty slab is reserved for.
    class: Vec<Option<u32>>,
}

impl ClassFit {
    pub fn new(slabs: usize) -> ClassFit {
        ClassFit {
            class: vec![None; slabs],
        }
    }
}

/// Best fit counting the bytes skipped for alignment as lost.
fn min_waste_and_leftover(slabs: &[Slab], bits: u32, n: u64) -> Choice {
    Choice::at(
        slabs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.fit(bits, n).map(|f| (f.leftover + f.waste, i)))
            .min()
            .map(|(_, i)| i),
    )
}

impl Policy for ClassFit {
    fn name(&self) -> &'static str {
        "class-fit"
    }

    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        let class = &self.class;
        let same = min_by_key(slabs, bits, n, |i, left| {
            (
                class[i] != Some(bits),
                slabs[i].live_objects() > 0 && class[i] != Some(bits),
                left,
            )
        });
        let choice = match same.slab {
            Some(i) if class[i] == Some(bits) || slabs[i].live_objects() == 0 => same,
            _ => min_waste_and_leftover(slabs, bits, n),
        };
        if let Some(i) = choice.slab {
            if slabs[i].live_objects() == 0 {
                self.class[i] = Some(bits);
            }
        }
        choice
    }

    fn slab_changed(&mut self, index: usize, slab: &Slab) {
        if slab.live_objects() == 0 {
            self.class[index] = None;
        }
    }
}
