//! The logs' accounting against the thesis's: random requests, with frees of
//! several allocations at once, run under both. Placement and every counter
//! but watermarking fragmentation must agree; watermarking fragmentation must
//! be the thesis's less the bytes a reference model of
//! `Quirk::SplitFreeKeepsBytes` keeps counted (descriptors: runs of page
//! allocations that do not shrink; one over several slabs keeps its bytes in
//! those that keep objects, until they reset); a preview must equal the free.

use std::collections::BTreeMap;

use proptest::prelude::*;
use retype_core::mm::slab::WatermarkRule;
use retype_core::mm::{Accounting, AllocId, Layout, MemoryManager, ObjDesc, PolicyKind};
use retype_core::objects::{Config, ObjectType};

#[derive(Clone, Debug)]
enum Req {
    /// One or two descriptors.
    Alloc(Vec<ObjDesc>),
    /// Free up to this many live allocations (picked by the seeds) as one request.
    Free(Vec<usize>),
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        5 => prop::collection::vec(
            prop_oneof![
                (4u32..=12).prop_map(|b| ObjDesc::new(ObjectType::Untyped, b, 1)),
                (1u32..=6).prop_map(|n| ObjDesc::new(ObjectType::SmallPage, 0, n)),
            ],
            1..=2,
        )
        .prop_map(Req::Alloc),
        3 => prop::collection::vec(any::<usize>(), 1..=4).prop_map(Req::Free),
    ]
}

fn manager(policy: PolicyKind, accounting: Accounting) -> MemoryManager {
    let layout = Layout::from_bits(vec![15, 14, 13, 13, 12, 11]).unwrap();
    MemoryManager::new(Config::CANTRIP, &layout, WatermarkRule::Kept, policy)
        .with_accounting(accounting)
}

fn run(policy: PolicyKind, reqs: &[Req]) -> Result<(), TestCaseError> {
    let mut thesis = manager(policy, Accounting::THESIS);
    let mut logs = manager(policy, Accounting::LOGS);
    // Each live allocation's handles in both managers (ids are handed out alike).
    let mut live: Vec<AllocId> = Vec::new();
    // The model: bytes kept counted per slab, and live objects per slab.
    let mut kept: BTreeMap<u32, u64> = BTreeMap::new();
    for r in reqs {
        match r {
            Req::Alloc(d) => {
                let (a, b) = (thesis.alloc(d), logs.alloc(d));
                prop_assert_eq!(a, b, "the accounting changed a placement's outcome");
                if let Ok(id) = a {
                    let pa: Vec<_> = thesis.placement(id).unwrap().collect();
                    let pb: Vec<_> = logs.placement(id).unwrap().collect();
                    prop_assert_eq!(pa, pb, "the accounting changed a placement");
                    live.push(id);
                }
            }
            Req::Free(seeds) => {
                let mut ids = Vec::new();
                for s in seeds {
                    if !live.is_empty() {
                        ids.push(live.swap_remove(s % live.len()));
                    }
                }
                if ids.is_empty() {
                    continue;
                }
                // The descriptors as freed: runs of adjacent page descriptors
                // that do not shrink; per descriptor, its bytes in each slab.
                let mut descriptors: Vec<BTreeMap<u32, u64>> = Vec::new();
                let mut last: Option<(u32, u32)> = None;
                for &id in &ids {
                    for (s, bits, n) in logs.placement(id).unwrap() {
                        let joins = last.is_some_and(|(b, m)| b == 12 && bits == 12 && n >= m);
                        if !joins {
                            descriptors.push(BTreeMap::new());
                        }
                        *descriptors.last_mut().unwrap().entry(s).or_default() +=
                            u64::from(n) << bits;
                        last = Some((bits, n));
                    }
                }
                let preview = logs.preview_free(&ids).unwrap();
                thesis.free_request(&ids).unwrap();
                logs.free_request(&ids).unwrap();
                prop_assert_eq!(&preview, logs.stats(), "preview differs from the free");
                for d in descriptors.iter().filter(|d| d.len() > 1) {
                    for (&s, &bytes) in d {
                        *kept.entry(s).or_default() += bytes;
                    }
                }
            }
        }
        // A reset by an OOM's undo, or by a free in another request, clears too.
        kept.retain(|&s, _| logs.slabs()[s as usize].live_objects() > 0);
        let (t, l) = (*thesis.stats(), *logs.stats());
        prop_assert_eq!(
            (
                t.bytes_in_use,
                t.objects_in_use,
                t.slab_resets,
                t.frag_alignment
            ),
            (
                l.bytes_in_use,
                l.objects_in_use,
                l.slab_resets,
                l.frag_alignment
            )
        );
        prop_assert_eq!((t.failed_retypes, t.ooms), (l.failed_retypes, l.ooms));
        let model: u64 = kept.values().sum();
        prop_assert_eq!(
            l.frag_watermark + model,
            t.frag_watermark,
            "watermarking is not the thesis's less the bytes kept"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_logs_accounting_only_keeps_bytes_of_split_frees(reqs in prop::collection::vec(req(), 1..300)) {
        for policy in [PolicyKind::BestFit, PolicyKind::BlindNextFit, PolicyKind::ClassFit] {
            run(policy, &reqs)?;
        }
    }
}

/// The mltest case in small: pages in two slabs, freed as one request while
/// the first slab keeps an object. The thesis counts the freed page below
/// the watermark; the logs do not, until the slab resets.
#[test]
fn a_split_free_keeps_its_bytes_until_the_slab_resets() {
    let page = [ObjDesc::new(ObjectType::SmallPage, 0, 1)];
    let layout = Layout::from_bits(vec![13, 12]).unwrap();
    for (accounting, locked) in [(Accounting::THESIS, 4096), (Accounting::LOGS, 0)] {
        let mut mm = MemoryManager::new(
            Config::CANTRIP,
            &layout,
            WatermarkRule::Kept,
            PolicyKind::FirstFit,
        )
        .with_accounting(accounting);
        let a = mm.alloc(&page).unwrap();
        let keep = mm.alloc(&page).unwrap();
        let b = mm.alloc(&page).unwrap();
        let slabs = |id| mm.placement(id).unwrap().map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(
            (slabs(a), slabs(keep), slabs(b)),
            (vec![0], vec![0], vec![1])
        );
        mm.free_request(&[a, b]).unwrap();
        assert_eq!(
            (mm.stats().slab_resets, mm.stats().frag_watermark),
            (1, locked),
            "{accounting:?}"
        );
        mm.free(keep).unwrap();
        assert_eq!((mm.stats().slab_resets, mm.stats().frag_watermark), (2, 0));
    }
}
