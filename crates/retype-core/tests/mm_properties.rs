//! Property tests of the memory manager against a reference model.
//!
//! Random request sequences run under every policy and both watermark rules.
//! After every request we check that the incremental bookkeeping equals a
//! recomputation from the live objects, that no two live objects overlap,
//! that every object lies inside its slab aligned to its size, that the
//! kernel's untyped agrees with the slab, and that a refused request changes
//! nothing. Under seL4's rule the placements are also checked against an
//! independent model of the watermark rule.

use proptest::prelude::*;
use retype_core::mm::slab::WatermarkRule;
use retype_core::mm::PolicyKind;
use retype_core::mm::{AllocError, AllocId, Layout, MemoryManager, ObjDesc, Stats};
use retype_core::objects::{Config, ObjectType};

#[derive(Clone, Debug)]
enum Req {
    Alloc(Vec<ObjDesc>),
    Free(usize),
    Bad(ObjDesc),
}

fn desc() -> impl Strategy<Value = ObjDesc> {
    prop_oneof![
        (4u32..=13).prop_map(|b| ObjDesc::new(ObjectType::Untyped, b, 1)),
        (1u32..=8).prop_map(|b| ObjDesc::new(ObjectType::CapTable, b, 1)),
        (1u32..=6).prop_map(|n| ObjDesc::new(ObjectType::SmallPage, 0, n)),
        (1u32..=4).prop_map(|n| ObjDesc::new(ObjectType::Endpoint, 0, n)),
        Just(ObjDesc::new(ObjectType::Tcb, 0, 1)),
        Just(ObjDesc::new(ObjectType::Notification, 0, 1)),
    ]
}

fn bad_desc() -> impl Strategy<Value = ObjDesc> {
    prop_oneof![
        Just(ObjDesc::new(ObjectType::SmallPage, 0, 0)),
        Just(ObjDesc::new(ObjectType::Untyped, 3, 1)),
        Just(ObjDesc::new(ObjectType::Untyped, 25, 1)),
        Just(ObjDesc::new(ObjectType::CapTable, 0, 1)),
        Just(ObjDesc::new(ObjectType::Endpoint, 0, 300)),
    ]
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        5 => prop::collection::vec(desc(), 1..=3).prop_map(Req::Alloc),
        4 => any::<usize>().prop_map(Req::Free),
        1 => bad_desc().prop_map(Req::Bad),
    ]
}

/// A small layout so that slabs fill, reset and run out.
fn layout() -> Layout {
    Layout::from_bits(vec![16, 15, 14, 14, 13, 12, 12, 11, 10, 9]).unwrap()
}

/// The watermark rule restated independently: per slab, the live object
/// count, watermark and alignment waste since the last reset.
#[derive(Clone, Default)]
struct Model {
    live: u64,
    watermark: u64,
    waste: u64,
}

fn check(mm: &MemoryManager, resets: u64) -> Result<(), TestCaseError> {
    let objects = mm.live_objects();
    let slabs = mm.slabs();
    let mut total = Stats {
        slab_resets: resets,
        ..*mm.stats()
    };
    total.bytes_in_use = 0;
    total.objects_in_use = 0;
    total.frag_watermark = 0;
    total.frag_alignment = 0;
    let mut spans = Vec::new();
    for (s, (slab, objs)) in slabs.iter().zip(&objects).enumerate() {
        prop_assert_eq!(slab.check_against(objs), Ok(()), "slab {}", s);
        for &(off, size) in objs {
            prop_assert!(off + size <= slab.size(), "object outside slab {}", s);
            prop_assert_eq!(off % size, 0, "object misaligned in slab {}", s);
            spans.push((slab.base() + off, size));
        }
        total.bytes_in_use += objs.iter().map(|o| o.1).sum::<u64>();
        total.objects_in_use += objs.len() as u64;
        total.frag_watermark += slab.frag_watermark();
        total.frag_alignment += slab.frag_alignment();
        if let Some(ut) = mm.kernel_untyped(s) {
            prop_assert_eq!(
                ut.children(),
                objs.len() as u64,
                "kernel children of slab {}",
                s
            );
            if !objs.is_empty() {
                prop_assert_eq!(
                    ut.watermark(),
                    slab.watermark(),
                    "kernel watermark of slab {}",
                    s
                );
            }
        }
    }
    prop_assert_eq!(&total, mm.stats(), "totals differ from the recomputation");
    spans.sort_unstable();
    for w in spans.windows(2) {
        prop_assert!(w[0].0 + w[0].1 <= w[1].0, "objects overlap: {:?}", w);
    }
    Ok(())
}

fn run(policy: PolicyKind, rule: WatermarkRule, reqs: &[Req]) -> Result<(), TestCaseError> {
    let config = Config::CANTRIP;
    let mut mm = MemoryManager::new(config, &layout(), rule, policy);
    let mut live: Vec<AllocId> = Vec::new();
    let mut models = vec![Model::default(); mm.slabs().len()];
    let mut resets = 0;
    for r in reqs {
        let before = (*mm.stats(), mm.live_objects());
        match r {
            Req::Alloc(request) => match mm.alloc(request) {
                Ok(id) => {
                    let placed: Vec<(u32, u32, u32)> = mm.placement(id).unwrap().collect();
                    for &(s, bits, count) in &placed {
                        let m = &mut models[s as usize];
                        if m.live == 0 {
                            m.watermark = 0;
                            m.waste = 0;
                        }
                        let first = (m.watermark + (1 << bits) - 1) & !((1u64 << bits) - 1);
                        m.waste += first - m.watermark;
                        m.watermark = first + (u64::from(count) << bits);
                        m.live += u64::from(count);
                    }
                    if rule == WatermarkRule::Kept {
                        for &(s, _, _) in &placed {
                            let (slab, m) = (&mm.slabs()[s as usize], &models[s as usize]);
                            prop_assert_eq!(
                                slab.watermark(),
                                m.watermark,
                                "placement differs from the model"
                            );
                            prop_assert_eq!(
                                slab.frag_alignment(),
                                m.waste,
                                "alignment differs from the model"
                            );
                        }
                    }
                    live.push(id);
                }
                Err(AllocError::OutOfMemory { .. }) => {
                    let after = mm.live_objects();
                    prop_assert_eq!(&before.1, &after, "a refused request left objects behind");
                    prop_assert_eq!(mm.stats().ooms, before.0.ooms + 1);
                    // Undoing the placed part of a request may empty a slab (a
                    // reset) and leaves its watermark raised: take both over.
                    resets = mm.stats().slab_resets;
                    for (m, slab) in models.iter_mut().zip(mm.slabs()) {
                        m.watermark = slab.watermark();
                        m.waste = slab.frag_alignment();
                    }
                }
                Err(e) => return Err(TestCaseError::fail(format!("valid request refused: {e}"))),
            },
            Req::Free(k) if !live.is_empty() => {
                let id = live.swap_remove(k % live.len());
                let placed: Vec<(u32, u32, u32)> = mm.placement(id).unwrap().collect();
                let preview = mm.preview_free(&[id]).unwrap();
                mm.free(id).unwrap();
                prop_assert_eq!(&preview, mm.stats(), "preview differs from the free");
                for (s, _, count) in placed {
                    let m = &mut models[s as usize];
                    m.live -= u64::from(count);
                    if m.live == 0 {
                        resets += 1;
                    }
                }
                prop_assert!(mm.free(id).is_err(), "double free accepted");
            }
            Req::Free(_) => {}
            Req::Bad(d) => {
                prop_assert!(mm.alloc(&[*d]).is_err());
                prop_assert_eq!(&before.0, mm.stats(), "a bad request changed the counters");
                prop_assert_eq!(
                    &before.1,
                    &mm.live_objects(),
                    "a bad request changed the objects"
                );
            }
        }
        check(&mm, resets)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn bookkeeping_is_exact_under_every_policy(reqs in prop::collection::vec(req(), 1..400)) {
        for &policy in PolicyKind::ALL {
            run(policy, WatermarkRule::Kept, &reqs)?;
            run(policy, WatermarkRule::Lifted, &reqs)?;
        }
    }
}

#[test]
fn resets_are_counted_when_the_last_object_goes() {
    let mut mm = MemoryManager::new(
        Config::CANTRIP,
        &layout(),
        WatermarkRule::Kept,
        PolicyKind::BestFit,
    );
    let a = mm
        .alloc(&[ObjDesc::new(ObjectType::Endpoint, 0, 2)])
        .unwrap();
    let b = mm
        .alloc(&[ObjDesc::new(ObjectType::Endpoint, 0, 1)])
        .unwrap();
    mm.free(a).unwrap();
    assert_eq!((mm.stats().slab_resets, mm.stats().frag_watermark), (0, 32));
    mm.free(b).unwrap();
    assert_eq!((mm.stats().slab_resets, mm.stats().frag_watermark), (1, 0));
}

#[test]
fn lifting_the_watermark_reuses_freed_space() {
    let one = Layout::from_bits(vec![12]).unwrap();
    for (rule, expect_ok) in [(WatermarkRule::Kept, false), (WatermarkRule::Lifted, true)] {
        let mut mm = MemoryManager::new(Config::CANTRIP, &one, rule, PolicyKind::FirstFit);
        let a = mm
            .alloc(&[ObjDesc::new(ObjectType::Untyped, 11, 1)])
            .unwrap();
        let _b = mm
            .alloc(&[ObjDesc::new(ObjectType::Untyped, 11, 1)])
            .unwrap();
        mm.free(a).unwrap();
        assert_eq!(
            mm.alloc(&[ObjDesc::new(ObjectType::Untyped, 11, 1)])
                .is_ok(),
            expect_ok,
            "{rule:?}"
        );
    }
}

#[test]
fn impossible_requests_are_refused_and_change_nothing() {
    let mut mm = MemoryManager::new(
        Config::CANTRIP,
        &layout(),
        WatermarkRule::Kept,
        PolicyKind::BestFit,
    );
    let before = *mm.stats();
    let too_large = mm
        .alloc(&[ObjDesc::new(ObjectType::Untyped, 17, 1)])
        .unwrap_err();
    assert!(
        matches!(too_large, AllocError::TooLarge { .. }),
        "{too_large}"
    );
    assert!(matches!(
        mm.alloc(&[ObjDesc::new(ObjectType::SmallPage, 0, 0)]),
        Err(AllocError::BadCount { .. })
    ));
    assert!(matches!(
        mm.alloc(&[ObjDesc::new(ObjectType::Untyped, 3, 1)]),
        Err(AllocError::BadSize { .. })
    ));
    assert!(matches!(mm.alloc(&[]), Err(AllocError::Empty)));
    assert_eq!(*mm.stats(), before);
}

#[test]
fn a_failed_request_leaves_nothing_behind() {
    // Two descriptors: the first fits, the second cannot; the first is undone.
    let mut mm = MemoryManager::new(
        Config::CANTRIP,
        &Layout::from_bits(vec![12, 11]).unwrap(),
        WatermarkRule::Kept,
        PolicyKind::BestFit,
    );
    let r = mm.alloc(&[
        ObjDesc::new(ObjectType::SmallPage, 0, 1),
        ObjDesc::new(ObjectType::SmallPage, 0, 1),
    ]);
    assert!(
        matches!(r, Err(AllocError::OutOfMemory { desc: 1 })),
        "{r:?}"
    );
    assert_eq!(
        (
            mm.stats().bytes_in_use,
            mm.stats().objects_in_use,
            mm.stats().ooms
        ),
        (0, 0, 1)
    );
    assert!(mm
        .alloc(&[
            ObjDesc::new(ObjectType::SmallPage, 0, 1),
            ObjDesc::new(ObjectType::Tcb, 0, 1)
        ])
        .is_ok());
}
