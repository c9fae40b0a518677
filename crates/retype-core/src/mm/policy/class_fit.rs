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

//!
//! Each step looks only where it must: the slabs of each class are listed,
//! so are the empty slabs of each size, and only step 3 scans every slab.

use alloc::vec;
use alloc::vec::Vec;

use super::{Choice, Policy};
use crate::mm::slab::Slab;
use crate::mm::slabs::Slabs;

#[derive(Clone, Debug)]
pub struct ClassFit {
    /// The object size (log2) each non-empty slab is reserved for.
    class: Vec<Option<u32>>,
    /// The slabs of each class.
    members: Vec<Vec<u32>>,
    /// The empty slabs of each size (log2), in increasing order.
    empty: Vec<Vec<u32>>,
    /// Bit `k` set: some slab of `2^k` bytes is empty.
    empty_sizes: u64,
    /// Whether each slab is in `empty`.
    is_empty: Vec<bool>,
}

impl ClassFit {
    pub fn new(slabs: &[Slab]) -> ClassFit {
        let mut cf = ClassFit {
            class: vec![None; slabs.len()],
            members: vec![Vec::new(); 64],
            empty: vec![Vec::new(); 64],
            empty_sizes: 0,
            is_empty: vec![false; slabs.len()],
        };
        for (i, s) in slabs.iter().enumerate() {
            cf.slab_changed(i, s);
        }
        cf
    }

    /// Marks slab `index` of `2^bits` bytes empty or not.
    fn set_empty(&mut self, index: u32, bits: u32, empty: bool) {
        let list = &mut self.empty[bits as usize];
        let at = list.binary_search(&index);
        match (empty, at) {
            (true, Err(k)) => list.insert(k, index),
            (false, Ok(k)) => {
                list.remove(k);
            }
            _ => unreachable!("slab {index} is already (not) empty"),
        }
        if list.is_empty() {
            self.empty_sizes &= !(1 << bits);
        } else {
            self.empty_sizes |= 1 << bits;
        }
    }
}

impl Policy for ClassFit {
    fn name(&self) -> &'static str {
        "class-fit"
    }

    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        let Some(need) = n.checked_shl(bits).filter(|&b| b >> bits == n && b > 0) else {
            return Choice::none();
        };
        let mut same: Option<(u64, u32)> = None;
        for &i in self.members.get(bits as usize).into_iter().flatten() {
            if let Some(f) = slabs.fit(i as usize, bits, n) {
                if same.is_none_or(|b| (f.leftover, i) < b) {
                    same = Some((f.leftover, i));
                }
            }
        }
        if let Some((_, i)) = same {
            return Choice::at(Some(i as usize));
        }
        // An empty slab holds the objects when it is at least `need` bytes
        // (its size is a multiple of theirs): the smallest such size, and the
        // lowest-numbered slab of it.
        let need_bits = u64::BITS - (need - 1).leading_zeros();
        let sizes = self.empty_sizes.checked_shr(need_bits).unwrap_or(0) << need_bits;
        if sizes != 0 {
            let i = self.empty[sizes.trailing_zeros() as usize][0] as usize;
            self.class[i] = Some(bits);
            self.members[bits as usize].push(i as u32);
            return Choice::at(Some(i));
        }
        Choice::at(slabs.least_unused(bits, n))
    }

    fn slab_changed(&mut self, index: usize, slab: &Slab) {
        let empty = slab.live_objects() == 0;
        if empty == self.is_empty[index] {
            return;
        }
        self.is_empty[index] = empty;
        self.set_empty(index as u32, slab.bits(), empty);
        if !empty {
            return;
        }
        if let Some(c) = self.class[index].take() {
            let m = &mut self.members[c as usize];
            let k = m
                .iter()
                .position(|&i| i as usize == index)
                .expect("a member of its class");
            m.swap_remove(k);
        }
    }
}
