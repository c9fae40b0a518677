//! The heaps in CHERI mode beyond the conformance suite: free and realloc
//! refuse every capability that is not exactly a live block's, a block's
//! capability cannot reach its neighbours (and the check sees it when bounds
//! are widened), and the padding counts agree with a model.

use std::collections::BTreeMap;

use proptest::prelude::*;
use retype_core::cheri::{Capability, Format, Permission};
use retype_core::heap::cheri::{exact_bounds, CheriHeap, Error, Region, SizeRange, SIZE_RANGES};
use retype_core::heap::{Arena, HeapKind};

fn cheri_heap(kind: HeapKind, format: Format, arena: &mut Arena) -> CheriHeap<'_> {
    let region = Region::new(format, arena.base().as_ptr() as usize, arena.capacity())
        .expect("the arena fits every format");
    CheriHeap::new(kind.build(arena).expect("a heap"), region)
}

/// Runs `f` on every heap in every format, each on a fresh arena.
fn every(mut f: impl FnMut(HeapKind, Format, &mut CheriHeap<'_>)) {
    let mut arena = Arena::new(64 << 20).unwrap();
    for &format in Format::ALL {
        for &kind in HeapKind::ALL {
            arena.reset();
            f(kind, format, &mut cheri_heap(kind, format, &mut arena));
        }
    }
}

#[test]
fn free_and_realloc_refuse_what_was_not_handed_out() {
    every(|kind, format, h| {
        let at = format!("{kind} in {format}");
        let a = h.allocate(5000, 8).unwrap();
        let b = h.allocate(16, 8).unwrap();
        let (base, top) = (a.base(), a.top());
        let region = h.region().capability();
        let sealer =
            Capability::root(format).set_address(*format.params().sealing_otypes.start() as u64);
        let load_only = format.permission_mask(Permission::Load).unwrap();
        let other = if format == Format::Rv32 {
            Format::Rv64
        } else {
            Format::Rv32
        };
        let refusals = [
            (
                a.set_bounds(16).unwrap().capability,
                Error::OtherBounds {
                    base,
                    top: u128::from(base) + 16,
                    block_top: top,
                },
            ),
            (
                region
                    .set_address(b.base())
                    .set_bounds_exact(b.length() + 16)
                    .unwrap(),
                Error::OtherBounds {
                    base: b.base(),
                    top: b.top() + 16,
                    block_top: b.top(),
                },
            ),
            (
                Capability::decode(format, a.pesbt(), a.address(), false).unwrap(),
                Error::Untagged,
            ),
            (
                a.set_address(base + 8),
                Error::NotAtBase {
                    address: base + 8,
                    base,
                },
            ),
            (a.seal(&sealer).unwrap(), Error::Sealed),
            (
                a.restrict_permissions(load_only).unwrap(),
                Error::OtherPermissions {
                    permissions: load_only,
                    block: a.permissions(),
                },
            ),
            (
                region
                    .set_address(base + 64)
                    .set_bounds(16)
                    .unwrap()
                    .capability,
                Error::NotLive { base: base + 64 },
            ),
            (
                Capability::root(other),
                Error::WrongFormat { format: other },
            ),
        ];
        for (cap, want) in refusals {
            assert_eq!(h.free(&cap), Err(want), "{at}: free of {cap:?}");
            assert_eq!(
                h.reallocate(&cap, 10, 8),
                Err(want),
                "{at}: realloc of {cap:?}"
            );
            assert_eq!(
                h.heap().check().unwrap().live_blocks,
                2,
                "{at}: a refusal changed the heap"
            );
        }
        let a2 = h.reallocate(&a, 9000, 8).unwrap();
        let stale = if a2.base() == base {
            Error::OtherBounds {
                base,
                top,
                block_top: a2.top(),
            }
        } else {
            Error::NotLive { base }
        };
        assert_eq!(
            h.free(&a),
            Err(stale),
            "{at}: the old capability after realloc"
        );
        h.free(&a2).unwrap();
        h.free(&b).unwrap();
        assert_eq!(
            h.free(&b),
            Err(Error::NotLive { base: b.base() }),
            "{at}: double free"
        );
        assert_eq!(h.heap().check().unwrap().live_blocks, 0);
    });
}

/// One request of a random sequence; `pick` chooses a live block.
#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align_log: u32 },
    Free { pick: usize },
    Realloc { pick: usize, size: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![4 => 0usize..512, 3 => 512usize..20_000, 1 => 20_000usize..300_000];
    prop_oneof![
        5 => (size.clone(), prop_oneof![4 => Just(0u32), 1 => 0u32..13]).prop_map(|(size, align_log)| Op::Alloc { size, align_log }),
        3 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        2 => (any::<usize>(), size).prop_map(|(pick, size)| Op::Realloc { pick, size }),
    ]
}

/// What a heap would hand out that padded the length to CRRL but set the
/// bounds from an unaligned base, or rounded the wrong way: bounds wider
/// than the block. The mutation the neighbour check must see.
fn widened(h: &CheriHeap<'_>, cap: &Capability) -> Capability {
    h.region()
        .capability()
        .set_address(cap.base())
        .set_bounds(cap.length() * 2 + 64)
        .expect("within the region")
        .capability
}

/// Runs `ops`; after each, whether a live block's capability (widened when
/// `widen`) reaches a byte of the next block up, or that block's reaches
/// the last byte of the one below. Returns the first reach found.
fn first_reach(kind: HeapKind, format: Format, ops: &[Op], widen: bool) -> Option<String> {
    let mut arena = Arena::new(64 << 20).unwrap();
    let mut h = cheri_heap(kind, format, &mut arena);
    let mut live: Vec<Capability> = Vec::new();
    for op in ops {
        match *op {
            Op::Alloc { size, align_log } => live.push(h.allocate(size, 1 << align_log).unwrap()),
            Op::Free { pick } if !live.is_empty() => {
                h.free(&live.swap_remove(pick % live.len())).unwrap()
            }
            Op::Realloc { pick, size } if !live.is_empty() => {
                let i = pick % live.len();
                live[i] = h.reallocate(&live[i], size, 1).unwrap();
            }
            _ => {}
        }
        // The blocks by base, and the capability the program holds for each.
        let blocks: BTreeMap<u64, (Capability, Capability)> = live
            .iter()
            .map(|c| (c.base(), (*c, if widen { widened(&h, c) } else { *c })))
            .collect();
        let ordered: Vec<_> = blocks.values().collect();
        for pair in ordered.windows(2) {
            let (&(low, low_held), &(high, high_held)) = (pair[0], pair[1]);
            let reaches = |held: &Capability, to: u64| h.access(&held.set_address(to), 1).is_ok();
            if high.length() > 0 && reaches(&low_held, high.base()) {
                return Some(format!("{low_held:?} reaches {:#x}", high.base()));
            }
            if low.length() > 0 && reaches(&high_held, (low.top() - 1) as u64) {
                return Some(format!("{high_held:?} reaches {:#x}", low.top() - 1));
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn a_block_cannot_reach_its_neighbour(ops in prop::collection::vec(op(), 200)) {
        for &format in Format::ALL {
            for &kind in HeapKind::ALL {
                let reach = first_reach(kind, format, &ops, false);
                prop_assert!(reach.is_none(), "{} in {}: {}", kind, format, reach.unwrap());
            }
        }
    }

    /// The counts against a model: every request's padding and rounding as
    /// set-bounds from the root finds them, the live padding as the live
    /// blocks' bounds show it.
    #[test]
    fn padding_is_counted_by_size_range(ops in prop::collection::vec(op(), 200)) {
        let mut arena = Arena::new(64 << 20).unwrap();
        for &format in Format::ALL {
            arena.reset();
            let mut h = cheri_heap(HeapKind::Tlsf, format, &mut arena);
            let mut live: Vec<(Capability, usize)> = Vec::new();
            let mut model = [(0u64, 0u64, 0u64); SIZE_RANGES];
            let mut count = |size: usize| {
                let set = Capability::root(format).set_address(0).set_bounds(size as u128).unwrap();
                let m = &mut model[SizeRange::of(size as u64).index()];
                m.0 += 1;
                m.1 += u64::from(!set.exact);
                m.2 += set.capability.length() as u64 - size as u64;
            };
            for op in &ops {
                match *op {
                    Op::Alloc { size, .. } => { live.push((h.allocate(size, 8).unwrap(), size)); count(size); }
                    Op::Free { pick } if !live.is_empty() => h.free(&live.swap_remove(pick % live.len()).0).unwrap(),
                    Op::Realloc { pick, size } if !live.is_empty() => {
                        let i = pick % live.len();
                        live[i] = (h.reallocate(&live[i].0, size, 8).unwrap(), size);
                        count(size);
                    }
                    _ => {}
                }
            }
            for (r, m) in h.padding().by_range.iter().zip(model) {
                prop_assert_eq!((r.requests, r.rounded, r.padding), m, "{}", format);
            }
            let live_padding: u64 = live.iter().map(|(c, size)| c.length() as u64 - *size as u64).sum();
            prop_assert_eq!(h.padding().live, live_padding);
            prop_assert!(h.padding().at_high_water <= h.heap().heap_size() as u64);
        }
    }
}

#[test]
fn the_neighbour_check_sees_widened_bounds() {
    // Blocks of rising sizes in a row: most are neighbours in every heap.
    let ops: Vec<Op> = (0..40)
        .map(|i| Op::Alloc {
            size: 24 + 40 * i,
            align_log: 0,
        })
        .collect();
    for &format in Format::ALL {
        for &kind in HeapKind::ALL {
            assert!(
                first_reach(kind, format, &ops, false).is_none(),
                "{kind} in {format}"
            );
            assert!(
                first_reach(kind, format, &ops, true).is_some(),
                "{kind} in {format}: widened bounds went unseen"
            );
        }
    }
}

#[test]
fn blocks_are_as_exact_as_the_format_allows() {
    every(|kind, format, h| {
        for size in [0usize, 1, 100, 4097, 16_385, 100_000, 1 << 20] {
            let cap = h.allocate(size, 8).unwrap();
            let exact = exact_bounds(format, size as u64).unwrap();
            assert_eq!(
                (cap.length(), cap.base() % exact.alignment),
                (u128::from(exact.length), 0),
                "{kind} in {format}: {size}"
            );
        }
    });
}

/// Why the memory manager needs no CHERI mode: every seL4 object is a power
/// of two aligned to its size, which every format holds exactly.
#[test]
fn sel4_objects_need_no_padding() {
    use retype_core::objects::{Arch, Config, ObjectType};
    for &arch in Arch::ALL {
        let config = Config::new(arch);
        for &ty in ObjectType::ALL {
            for size_bits in 0..64 {
                let Ok(bits) = config.object_bits(ty, size_bits) else {
                    continue;
                };
                for &format in Format::ALL {
                    let Some(exact) = exact_bounds(format, 1u64 << bits) else {
                        continue;
                    };
                    assert_eq!(exact.length, 1 << bits, "{arch:?} {ty:?} in {format}");
                    assert!(exact.alignment <= 1 << bits, "{arch:?} {ty:?} in {format}");
                }
            }
        }
    }
}

/// Where exact bounds cost nothing (Morello below 16 KiB), the CHERI heap
/// asks its heap for exactly what the plain run does: the same heap size,
/// no padding, no alignment fragmentation. RV32 pads the same requests.
#[test]
fn exactness_that_costs_nothing_changes_nothing() {
    let sizes: Vec<usize> = (0..500).map(|i| 8 + (i * 37) % 16_000).collect();
    for &kind in HeapKind::ALL {
        let mut arena = Arena::new(64 << 20).unwrap();
        let plain_size = {
            let mut h = kind.build(&mut arena).unwrap();
            let ps: Vec<_> = sizes.iter().map(|&s| h.allocate(s, 8).unwrap()).collect();
            for p in ps.iter().step_by(3) {
                // SAFETY: each block is freed once.
                unsafe { h.free(*p) };
            }
            h.heap_size()
        };
        for format in [Format::Morello, Format::Rv32] {
            arena.reset();
            let mut h = cheri_heap(kind, format, &mut arena);
            let caps: Vec<_> = sizes.iter().map(|&s| h.allocate(s, 8).unwrap()).collect();
            for c in caps.iter().step_by(3) {
                h.free(c).unwrap();
            }
            let padding = h.padding().total().padding;
            if format == Format::Morello {
                assert_eq!((padding, h.heap().heap_size()), (0, plain_size), "{kind}");
                assert_eq!(h.alignment_fragmentation(plain_size), 0, "{kind}");
            } else {
                assert!(padding > 0 && h.padding().at_high_water > 0, "{kind}");
                assert!(
                    h.heap().heap_size() > plain_size,
                    "{kind}: padding costs heap"
                );
            }
        }
    }
}
