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
//! 2. else, for a class that holds no slab, a slab in use where the objects
//!    lose nothing to alignment, fewest bytes left: a size the program asks
//!    for rarely lodges with another class instead of taking a slab;
//! 3. else an empty slab, the smallest that fits;
//! 4. else the slab that fits losing the fewest bytes to alignment; ties to
//!    the fewest bytes left.
//!
//! Bytes lost to alignment are those skipped below the objects and those the
//! slab's own class will skip above them at its next placement (a slab of
//! 4 KiB objects that takes one of 512 bytes skips 3.5 KiB before its next
//! page). Counting the second kind, and step 2, took class fit's average
//! total fragmentation on seed 000's logs from 25.2 % to 37.7 % below best
//! fit's (`docs/reproduction-000.md`).
//!
//! Each step looks only where it must: the slabs of each class are listed,
//! so are the empty slabs of each size, and from [`INDEX_FROM`] slabs on the
//! slabs in use by where their watermarks stand ([`Lodgings`]), so that step
//! 2 is logarithmic; fewer slabs are cheaper to scan. Step 4, which runs
//! only when memory is short, scans every slab, and so does step 2 with the
//! watermark lifted, where a slab's fit depends on its holes.

use alloc::collections::BinaryHeap;
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::best_fit::INDEX_FROM;
use super::lodgings::Lodgings;
use super::{Choice, Policy};
use crate::mm::slab::{bytes_of, Slab};
use crate::mm::slabs::Slabs;
use crate::untyped::align_up;

#[derive(Clone, Debug)]
pub struct ClassFit {
    /// The object size (log2) each non-empty slab is reserved for.
    class: Vec<Option<u32>>,
    /// The slabs of each class.
    members: Vec<Vec<u32>>,
    /// The empty slabs of each size (log2), lowest index on top. A slab
    /// leaves its heap when step 2 takes it; one that filled otherwise stays
    /// until it comes to the top and is found not empty.
    empty: Vec<BinaryHeap<Reverse<u32>>>,
    /// Bit `k` set: the heap of size `k` is not empty.
    empty_sizes: u64,
    /// Whether each slab is empty, as last told.
    is_empty: Vec<bool>,
    /// The slabs in use, for step 2, when indexed.
    lodgings: Option<Lodgings>,
}

impl ClassFit {
    pub fn new(slabs: &[Slab]) -> ClassFit {
        let mut cf = ClassFit {
            class: vec![None; slabs.len()],
            members: vec![Vec::new(); 64],
            empty: vec![BinaryHeap::new(); 64],
            empty_sizes: 0,
            is_empty: vec![false; slabs.len()],
            lodgings: (slabs.len() >= INDEX_FROM && !slabs.iter().any(Slab::is_lifted))
                .then(|| Lodgings::new(slabs.len())),
        };
        for (i, s) in slabs.iter().enumerate() {
            cf.slab_changed(i, s);
        }
        cf
    }

    /// The lowest-numbered empty slab of the smallest size at least
    /// `2^need_bits` bytes, taken off its heap.
    fn take_empty(&mut self, need_bits: u32) -> Option<usize> {
        loop {
            let sizes = self.empty_sizes.checked_shr(need_bits).unwrap_or(0) << need_bits;
            if sizes == 0 {
                return None;
            }
            let k = sizes.trailing_zeros();
            let heap = &mut self.empty[k as usize];
            while let Some(Reverse(i)) = heap.pop() {
                if self.is_empty[i as usize] {
                    if heap.is_empty() {
                        self.empty_sizes &= !(1 << k);
                    }
                    return Some(i as usize);
                }
            }
            self.empty_sizes &= !(1 << k);
        }
    }

    /// What `n` objects of `2^bits` bytes, `need` bytes, would cost in slab
    /// `i`: the bytes lost to alignment (skipped below them, and above them
    /// before the slab's next object of its own class) and the bytes left.
    fn cost(&self, slabs: &Slabs, i: usize, bits: u32, n: u64, need: u64) -> Option<(u64, u64)> {
        let f = slabs.fit(i, bits, n)?;
        let end = f.first + need;
        let later = self.class[i].map_or(0, |c| align_up(end, c) - end);
        Some((f.waste + later, f.leftover))
    }

    /// The slab, among `candidates`, where the objects lose fewest bytes
    /// and leave fewest, ties to the lowest index; only those that lose
    /// nothing when `lossless`.
    fn least_cost(
        &self,
        slabs: &Slabs,
        candidates: impl Iterator<Item = usize>,
        (bits, n, need): (u32, u64, u64),
        lossless: bool,
    ) -> Option<usize> {
        candidates
            .filter_map(|i| {
                let c = self.cost(slabs, i, bits, n, need)?;
                (!lossless || c.0 == 0).then_some((c, i))
            })
            .min()
            .map(|(_, i)| i)
    }
}

/// By content: a heap hashes as its sorted slabs, whatever its layout; the
/// lodgings follow from the slabs and their classes.
impl core::hash::Hash for ClassFit {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.class.hash(h);
        self.members.hash(h);
        for heap in &self.empty {
            heap.clone().into_sorted_vec().hash(h);
        }
        self.empty_sizes.hash(h);
        self.is_empty.hash(h);
    }
}

impl Policy for ClassFit {
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        let Some(need) = bytes_of(bits, n).filter(|&b| b > 0) else {
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
        if self.members.get(bits as usize).is_none_or(Vec::is_empty) {
            let lodging = match &mut self.lodgings {
                Some(lodgings) => lodgings.lossless(bits, need),
                None => {
                    let in_use = (0..slabs.len()).filter(|&i| !self.is_empty[i]);
                    self.least_cost(slabs, in_use, (bits, n, need), true)
                }
            };
            if lodging.is_some() {
                return Choice::at(lodging);
            }
        }
        // An empty slab holds the objects when it is at least `need` bytes
        // (its size is a multiple of theirs): the smallest such size, and the
        // lowest-numbered slab of it.
        if let Some(i) = self.take_empty(u64::BITS - (need - 1).leading_zeros()) {
            self.class[i] = Some(bits);
            self.members[bits as usize].push(i as u32);
            return Choice::at(Some(i));
        }
        Choice::at(self.least_cost(slabs, 0..slabs.len(), (bits, n, need), false))
    }

    fn slab_changed(&mut self, index: usize, slab: &Slab) {
        let empty = slab.live_objects() == 0;
        if let Some(lodgings) = &mut self.lodgings {
            let class = self.class[index].unwrap_or(0);
            lodgings.update(
                index,
                (!empty).then(|| (class, slab.watermark(), slab.available())),
            );
        }
        if empty == self.is_empty[index] {
            return;
        }
        self.is_empty[index] = empty;
        if !empty {
            return;
        }
        self.empty[slab.bits() as usize].push(Reverse(index as u32));
        self.empty_sizes |= 1 << slab.bits();
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
