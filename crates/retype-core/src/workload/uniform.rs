//! Seed 000's uniform random workload (§4.1.2, Figure 4.1).
//!
//! At each of `ops` steps: allocate when nothing is live; free when
//! [`MAX_LIVE`] objects are live; otherwise draw r uniformly from 1..=100 and
//! free a uniformly chosen live allocation when `r < free_percent`, else
//! allocate one descriptor of a uniformly chosen type among the nine physical
//! seL4 object types. After the last step every remaining allocation is
//! freed, oldest first. Sizes (our choice; the thesis does not publish them,
//! these reproduce the spread of sizes in its logs, 16 B to 16 KiB):
//! untyped 2^4..=2^14 bytes, CNodes of 2^1..=2^10 slots, scheduling contexts
//! 2^7..=2^14 bytes, and 1..=10 consecutive 4 KiB pages.
//!
//! The generator is [`SplitMix64`] seeded with `seed`; the draws are, in order:
//! the free/alloc roll (only when both are possible), then either the index of
//! the live allocation to free or the type followed by its size or count.

use alloc::vec::Vec;

use super::{Op, Workload};
use crate::mm::ObjDesc;
use crate::objects::ObjectType;
use crate::rng::SplitMix64;

/// The most allocations live at once.
pub const MAX_LIVE: usize = 1000;

/// The nine object types the generator draws from.
pub const TYPES: [ObjectType; 9] = [
    ObjectType::Untyped,
    ObjectType::CapTable,
    ObjectType::SchedContext,
    ObjectType::SmallPage,
    ObjectType::Tcb,
    ObjectType::Endpoint,
    ObjectType::Notification,
    ObjectType::PageTable,
    ObjectType::Reply,
];

/// Parameters of one uniform run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniformParams {
    pub seed: u64,
    pub ops: u32,
    /// Percentage chance that a step frees (0..=100).
    pub free_percent: u32,
}

/// The generator.
#[derive(Clone, Debug)]
pub struct Uniform {
    params: UniformParams,
    rng: SplitMix64,
    step: u32,
    next_id: u32,
    live: Vec<u32>,
    draining: bool,
}

impl Uniform {
    pub fn new(params: UniformParams) -> Uniform {
        Uniform {
            params,
            rng: SplitMix64::new(params.seed),
            step: 0,
            next_id: 0,
            live: Vec::new(),
            draining: false,
        }
    }

    fn random_desc(&mut self) -> ObjDesc {
        let ty = TYPES[self.rng.below(TYPES.len() as u64) as usize];
        let (size_bits, count) = match ty {
            ObjectType::Untyped => (self.rng.range(4, 14) as u32, 1),
            ObjectType::CapTable => (self.rng.range(1, 10) as u32, 1),
            ObjectType::SchedContext => (self.rng.range(7, 14) as u32, 1),
            ObjectType::SmallPage => (0, self.rng.range(1, 10) as u32),
            _ => (0, 1),
        };
        ObjDesc::new(ty, size_bits, count)
    }
}

impl Workload for Uniform {
    fn next_op(&mut self) -> Option<Op> {
        if self.step >= self.params.ops {
            self.draining = true;
        }
        if self.draining {
            if self.live.is_empty() {
                return None;
            }
            return Some(Op::Free {
                ids: alloc::vec![self.live.remove(0)],
            });
        }
        self.step += 1;
        let free = match self.live.len() {
            0 => false,
            n if n >= MAX_LIVE => true,
            _ => self.rng.range(1, 100) < u64::from(self.params.free_percent),
        };
        if free {
            let i = self.rng.below(self.live.len() as u64) as usize;
            Some(Op::Free {
                ids: alloc::vec![self.live.remove(i)],
            })
        } else {
            let id = self.next_id;
            self.next_id += 1;
            self.live.push(id);
            Some(Op::Alloc {
                id,
                request: alloc::vec![self.random_desc()],
            })
        }
    }

    fn refused(&mut self, id: u32) {
        self.live.retain(|&l| l != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(mut w: Uniform) -> Vec<Op> {
        core::iter::from_fn(|| w.next_op()).collect()
    }

    #[test]
    fn a_seed_always_gives_the_same_sequence() {
        let p = UniformParams {
            seed: 42,
            ops: 500,
            free_percent: 48,
        };
        assert_eq!(drain(Uniform::new(p)), drain(Uniform::new(p)));
        let q = UniformParams { seed: 43, ..p };
        assert_ne!(drain(Uniform::new(p)), drain(Uniform::new(q)));
    }

    #[test]
    fn every_allocation_is_freed_once_and_live_stays_bounded() {
        let p = UniformParams {
            seed: 7,
            ops: 5000,
            free_percent: 10,
        };
        let ops = drain(Uniform::new(p));
        let mut live = alloc::collections::BTreeSet::new();
        let mut peak = 0;
        for op in &ops {
            match op {
                Op::Alloc { id, request } => {
                    assert!(live.insert(*id));
                    assert_eq!(request.len(), 1);
                }
                Op::Free { ids } => {
                    for id in ids {
                        assert!(live.remove(id), "free of a dead id");
                    }
                }
            }
            peak = peak.max(live.len());
        }
        assert!(live.is_empty());
        assert_eq!(peak, MAX_LIVE, "at 10 % frees the cap is reached");
        let allocs = ops.iter().filter(|o| matches!(o, Op::Alloc { .. })).count();
        assert_eq!(ops.len(), 5000 + allocs - (5000 - allocs));
    }

    #[test]
    fn refused_allocations_are_never_freed() {
        let p = UniformParams {
            seed: 1,
            ops: 200,
            free_percent: 50,
        };
        let mut w = Uniform::new(p);
        let mut refused = Vec::new();
        while let Some(op) = w.next_op() {
            match op {
                Op::Alloc { id, .. } if id % 3 == 0 => {
                    w.refused(id);
                    refused.push(id);
                }
                Op::Free { ids } => assert!(ids.iter().all(|i| !refused.contains(i))),
                _ => {}
            }
        }
    }
}
