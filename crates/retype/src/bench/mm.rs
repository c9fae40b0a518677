//! The cost of one memory-manager request per policy, at seed 000's 22
//! slabs and at many more (`retype bench mm`).
//!
//! The requests are made beforehand (seed 000's uniform generator at 52 %
//! frees: a steady state well inside the 22 slabs), so only `alloc` and
//! `free` are timed. For instruction counts `bench/mm-callgrind.sh` runs it
//! under callgrind counting only inside `MemoryManager::alloc` and `::free`,
//! twice with different `--ops`, and divides the difference.

use std::time::Instant;

use retype_core::mm::{Accounting, AllocError, AllocId, Layout, ObjDesc};
use retype_core::objects::Config;
use retype_core::workload::uniform::{Uniform, UniformParams};
use retype_core::workload::{Op, Workload};

use crate::study::data;
use crate::study::spec::PolicySpec;

/// A request made in advance: allocate one descriptor as `id`, or free `id`.
pub enum Request {
    Alloc(u32, ObjDesc),
    Free(u32),
}

/// The requests of seed 000's uniform generator at 52 % frees.
pub fn requests(seed: u64, ops: u32) -> Vec<Request> {
    let mut w = Uniform::new(UniformParams {
        seed,
        ops,
        free_percent: 52,
    });
    std::iter::from_fn(|| w.next_op())
        .flat_map(|op| match op {
            Op::Alloc { id, request } => vec![Request::Alloc(id, request[0])],
            Op::Free { ids } => ids.into_iter().map(Request::Free).collect(),
        })
        .collect()
}

/// Runs the requests on a fresh manager: elapsed ns, requests served, OOMs.
pub fn time(policy: PolicySpec, layout: &Layout, reqs: &[Request]) -> (u128, usize, u64) {
    let mut mm = data::manager(Config::CANTRIP, layout, policy, Accounting::THESIS);
    let mut ids: Vec<Option<AllocId>> = Vec::new();
    let mut served = 0;
    let start = Instant::now();
    for r in reqs {
        match *r {
            Request::Alloc(id, desc) => {
                let got = match mm.alloc(&[desc]) {
                    Ok(a) => Some(a),
                    Err(AllocError::OutOfMemory { .. }) => None,
                    Err(e) => panic!("generated request refused: {e}"),
                };
                served += got.is_some() as usize;
                let i = id as usize;
                if ids.len() <= i {
                    ids.resize(i + 1, None);
                }
                ids[i] = got;
            }
            Request::Free(id) => {
                if let Some(a) = ids[id as usize].take() {
                    mm.free(a).expect("live allocation");
                    served += 1;
                }
            }
        }
    }
    (start.elapsed().as_nanos(), served, mm.stats().ooms)
}
