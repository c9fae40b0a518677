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
mod lodgings;
mod next_fit;
mod worst_fit;

pub use best_fit::BestFit;
pub use blind_next_fit::BlindNextFit;
pub use class_fit::ClassFit;
pub use first_fit::FirstFit;
pub use next_fit::NextFit;
pub use worst_fit::WorstFit;

use super::slab::Slab;
use super::slabs::Slabs;
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// A policy's answer for one object descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The slab to retype from.
    pub slab: Option<usize>,
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

    /// Slab `found`, if any: the answer of a policy that tried no retype.
    fn at(found: Option<usize>) -> Choice {
        Choice {
            slab: found,
            failed_retypes: 0,
        }
    }
}

/// One placement policy.
pub trait Policy {
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

/// The placement policies, in the order reports list them; each is spelled
/// on the command line and in reports as its name in kebab case
/// (`blind-next-fit`, …), which `FromStr` and `Display` share.
#[derive(Display, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "kebab-case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyKind {
    /// CantripOS's original: tries the kernel slab by slab (seed 000 §3.4).
    BlindNextFit,
    NextFit,
    FirstFit,
    /// Seed 000 §3.4's best fit.
    BestFit,
    WorstFit,
    /// Ours: each slab holds one object size until it resets.
    ClassFit,
}

impl PolicyKind {
    /// Every policy, in the order reports list them.
    pub const ALL: &'static [PolicyKind] = <PolicyKind as strum::VariantArray>::VARIANTS;

    /// The policy's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One of the policies, called without a virtual call: the manager asks its
/// policy several times a request, and a match lets the policy's code (and
/// its empty hooks) inline into the manager's.
#[derive(Clone, Debug, Hash)]
pub enum AnyPolicy {
    BlindNextFit(BlindNextFit),
    NextFit(NextFit),
    FirstFit(FirstFit),
    BestFit(BestFit),
    WorstFit(WorstFit),
    ClassFit(ClassFit),
}

impl AnyPolicy {
    /// Policy `kind`, set up for `slabs`.
    pub fn new(kind: PolicyKind, slabs: &[Slab]) -> AnyPolicy {
        match kind {
            PolicyKind::BlindNextFit => AnyPolicy::BlindNextFit(BlindNextFit::default()),
            PolicyKind::NextFit => AnyPolicy::NextFit(NextFit::default()),
            PolicyKind::FirstFit => AnyPolicy::FirstFit(FirstFit),
            PolicyKind::BestFit => AnyPolicy::BestFit(BestFit::new(slabs)),
            PolicyKind::WorstFit => AnyPolicy::WorstFit(WorstFit),
            PolicyKind::ClassFit => AnyPolicy::ClassFit(ClassFit::new(slabs)),
        }
    }

    /// Which policy this is.
    pub fn kind(&self) -> PolicyKind {
        match self {
            AnyPolicy::BlindNextFit(_) => PolicyKind::BlindNextFit,
            AnyPolicy::NextFit(_) => PolicyKind::NextFit,
            AnyPolicy::FirstFit(_) => PolicyKind::FirstFit,
            AnyPolicy::BestFit(_) => PolicyKind::BestFit,
            AnyPolicy::WorstFit(_) => PolicyKind::WorstFit,
            AnyPolicy::ClassFit(_) => PolicyKind::ClassFit,
        }
    }
}

/// `$body` with `$p` bound to the policy inside `$any`.
macro_rules! each {
    ($any:expr, $p:ident => $body:expr) => {
        match $any {
            AnyPolicy::BlindNextFit($p) => $body,
            AnyPolicy::NextFit($p) => $body,
            AnyPolicy::FirstFit($p) => $body,
            AnyPolicy::BestFit($p) => $body,
            AnyPolicy::WorstFit($p) => $body,
            AnyPolicy::ClassFit($p) => $body,
        }
    };
}

impl Policy for AnyPolicy {
    #[inline]
    fn begin_request(&mut self) {
        each!(self, p => p.begin_request())
    }

    #[inline]
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        each!(self, p => p.choose(slabs, bits, n))
    }

    #[inline]
    fn end_request(&mut self, served: bool) {
        each!(self, p => p.end_request(served))
    }

    #[inline]
    fn slab_changed(&mut self, index: usize, slab: &Slab) {
        each!(self, p => p.slab_changed(index, slab))
    }
}

#[cfg(test)]
mod tests;
