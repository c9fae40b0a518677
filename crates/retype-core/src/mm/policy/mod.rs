//! Placement policies: which slab serves each object descriptor.
//!
//! A policy sees the slabs' exact bookkeeping ([`Slab::fit`] answers what the
//! kernel's retype would) and names a slab, or none when the request cannot be
//! served. Blind policies instead try slabs one by one as CantripOS does and
//! report each refusal as a failed retype.

mod best_fit;
mod blind_next_fit;
mod class_fit;
mod first_fit;
mod next_fit;
mod worst_fit;

use alloc::boxed::Box;
use core::ops::ControlFlow;

pub use best_fit::BestFit;
pub use blind_next_fit::BlindNextFit;
pub use class_fit::ClassFit;
pub use first_fit::FirstFit;
pub use next_fit::NextFit;
pub use worst_fit::WorstFit;

use super::slab::{Fit, Slab};
use super::slabs::Slabs;

/// A policy's answer for one object descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The slab to retype from, with the placement it will get.
    pub slab: Option<(usize, Fit)>,
    /// Retypes tried and refused before the answer (blind policies only).
    pub failed_retypes: u64,
}

impl Choice {
    pub fn none() -> Choice {
        Choice {
            slab: None,
            failed_retypes: 0,
        }
    }

    /// Slab `found`, if any, with its placement computed in full; the
    /// answer of a policy that tried no retype.
    fn at(slabs: &[Slab], found: Option<usize>, bits: u32, n: u64) -> Choice {
        Choice {
            slab: found.map(|i| (i, slabs[i].fit(bits, n).expect("the scan found it fits"))),
            failed_retypes: 0,
        }
    }
}

/// Lets a manager holding a `Box<dyn Policy>` be cloned (what-if runs).
pub trait PolicyClone {
    fn boxed_clone(&self) -> Box<dyn Policy>;
}

impl<T: Policy + Clone + 'static> PolicyClone for T {
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Policy> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

/// One placement policy.
pub trait Policy: PolicyClone {
    /// The name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// Called before the descriptors of one request are placed.
    fn begin_request(&mut self) {}

    /// Chooses the slab for `n` objects of `2^bits` bytes each.
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice;

    /// Called after the request: `served` is false when a descriptor failed.
    fn end_request(&mut self, _served: bool) {}

    /// Called whenever slab `index` changed (an allocation or a free), so that
    /// indexed policies can keep their index current.
    fn slab_changed(&mut self, _index: usize, _slab: &Slab) {}
}

/// Every policy's name, in the order reports list them.
pub const NAMES: [&str; 6] = [
    "blind-next-fit",
    "next-fit",
    "first-fit",
    "best-fit",
    "worst-fit",
    "class-fit",
];

/// Makes the policy called `name` for `slabs`, or `None` for an unknown name.
pub fn by_name(name: &str, slabs: &[Slab]) -> Option<Box<dyn Policy>> {
    Some(match name {
        "blind-next-fit" => Box::new(BlindNextFit::default()),
        "next-fit" => Box::new(NextFit::default()),
        "first-fit" => Box::new(FirstFit),
        "best-fit" => Box::new(BestFit::new(slabs)),
        "worst-fit" => Box::new(WorstFit),
        "class-fit" => Box::new(ClassFit::new(slabs.len())),
        _ => return None,
    })
}

/// The fitting slab that minimises `key(index, leftover)`, ties to the
/// lowest index. Only the winner's placement is computed in full.
fn min_by_key<K: Ord>(slabs: &Slabs, bits: u32, n: u64, key: impl Fn(usize, u64) -> K) -> Choice {
    let mut best: Option<(K, usize)> = None;
    let _: ControlFlow<()> = slabs.scan(0, slabs.len(), bits, n, |i, left| {
        let k = key(i, left);
        if best.as_ref().is_none_or(|(bk, _)| k < *bk) {
            best = Some((k, i));
        }
        ControlFlow::Continue(())
    });
    Choice::at(slabs, best.map(|(_, i)| i), bits, n)
}

/// The first slab from `start` on, wrapping, of the next `count`, where the
/// objects fit.
fn first_fitting(slabs: &Slabs, start: usize, count: usize, bits: u32, n: u64) -> Option<usize> {
    slabs
        .scan(start, count, bits, n, |i, _| ControlFlow::Break(i))
        .break_value()
}

#[cfg(test)]
mod tests;
