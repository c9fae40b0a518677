//! Test vector V11 (docs/design.md#v11) and policy choices on
//! hand-built slab states.

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::mm::slab::{Slab, WatermarkRule};
use crate::mm::slabs::Slabs;
use crate::mm::{Layout, MemoryManager, ObjDesc};
use crate::objects::{Arch, Config, ObjectType::*};

const X64: Config = Config::new(Arch::X86_64);

fn slabs(bits: &[u32]) -> Slabs {
    Slabs::new(
        bits.iter()
            .enumerate()
            .map(|(i, &b)| Slab::new((i as u64 + 1) << 20, b, WatermarkRule::Kept))
            .collect(),
    )
}

/// Places `n` objects of `2^bits` bytes in slab `i`.
fn fill(s: &mut Slabs, i: usize, bits: u32, n: u64) {
    let fit = s[i].fit(bits, n).unwrap();
    s.update(i, |slab| slab.place(fit.first, fit.waste, bits, n));
}

/// Places `n` objects of `2^bits` bytes in slab `i`, noting their sizes in
/// `sizes[i]`, and tells `policy`.
fn fill_noted(
    s: &mut Slabs,
    sizes: &mut [Vec<u64>],
    policy: &mut impl Policy,
    i: usize,
    bits: u32,
    n: u64,
) {
    fill(s, i, bits, n);
    sizes[i].extend(core::iter::repeat_n(1u64 << bits, n as usize));
    policy.slab_changed(i, &s[i]);
}

/// Frees every object of slab `i` noted in `sizes[i]`, and tells `policy`.
fn empty_noted(s: &mut Slabs, sizes: &mut [Vec<u64>], policy: &mut impl Policy, i: usize) {
    for size in sizes[i].drain(..) {
        s.update(i, |slab| slab.release(0, 1, size));
    }
    policy.slab_changed(i, &s[i]);
}

#[test]
fn v11_cantrip_next_fit_with_exact_accounting() {
    let layout = Layout::from_bits(vec![13, 12]).unwrap();
    let mut mm = MemoryManager::new(X64, &layout, WatermarkRule::Kept, PolicyKind::BlindNextFit);
    let tcbs = mm.alloc(&[ObjDesc::new(Tcb, 0, 2)]).unwrap();
    let frame = mm.alloc(&[ObjDesc::new(SmallPage, 0, 1)]).unwrap();
    assert_eq!(mm.slabs()[0].watermark(), 0x2000);
    mm.alloc(&[ObjDesc::new(Endpoint, 0, 1)]).unwrap();
    assert_eq!(
        (mm.slabs()[1].watermark(), mm.stats().failed_retypes),
        (0x10, 1)
    );
    assert!(mm.alloc(&[ObjDesc::new(SmallPage, 0, 1)]).is_err());
    assert_eq!((mm.stats().failed_retypes, mm.stats().ooms), (3, 1));
    mm.free(tcbs).unwrap();
    mm.free(frame).unwrap();
    assert_eq!(mm.stats().slab_resets, 1);
    mm.alloc(&[ObjDesc::new(SmallPage, 0, 1)]).unwrap();
    assert_eq!(mm.stats().failed_retypes, 4);
    assert_eq!(
        mm.slabs()[0].watermark(),
        0x1000,
        "A reset and took the frame at 0"
    );
    assert_eq!(mm.kernel_untyped(0).unwrap().watermark(), 0x1000);
}

#[test]
fn v11_quirk_the_stop_point_is_per_request() {
    let mut s = slabs(&[12, 12, 12]);
    fill(&mut s, 0, 4, 255);
    fill(&mut s, 1, 11, 1);
    fill(&mut s, 2, 12, 1);
    let mut p = BlindNextFit::default();
    p.begin_request();
    let tcb = p.choose(&s, 11, 1);
    assert_eq!((tcb.slab, tcb.failed_retypes), (Some(1), 1));
    fill(&mut s, 1, 11, 1);
    let ep = p.choose(&s, 4, 1);
    assert_eq!(
        (ep.slab, ep.failed_retypes),
        (None, 2),
        "S0 is never retried"
    );
    p.end_request(false);
    // With exact bookkeeping the endpoint goes to S0's last 16 bytes.
    let best = BestFit::new(&s).choose(&s, 4, 1).slab.unwrap();
    assert_eq!((best, s.fit(best, 4, 1).unwrap().first), (0, 0xFF0));
}

#[test]
fn best_fit_minimises_leftover_not_waste() {
    // Seed 000 §4.2.2: `hello`'s scheduling context goes to the 512-byte slab
    // holding a 64-byte CNode (192 bytes of alignment, 0 left), not to the
    // 1024-byte slab holding a TCB (512 left).
    let mut s = slabs(&[10, 9]);
    fill(&mut s, 1, 6, 1);
    fill(&mut s, 0, 9, 1);
    let c = BestFit::new(&s).choose(&s, 8, 1).slab.unwrap();
    let f = s.fit(c, 8, 1).unwrap();
    assert_eq!((c, f.first, f.waste, f.leftover), (1, 256, 192, 0));
    // Class fit skips nothing for alignment while a slab exists where it
    // need not: the 1024-byte slab's next 256 bytes, or the empty slab.
    let mut s2 = slabs(&[10, 9, 9]);
    fill(&mut s2, 1, 6, 1);
    fill(&mut s2, 0, 9, 1);
    let mut cf = ClassFit::new(&s2);
    let c = cf.choose(&s2, 8, 1).slab.unwrap();
    assert_ne!(c, 1);
    assert_eq!(s2.fit(c, 8, 1).unwrap().waste, 0);
}

#[test]
fn sequential_policies_pick_as_their_names_say() {
    let mut s = slabs(&[14, 12, 13]);
    fill(&mut s, 0, 12, 1);
    assert_eq!(FirstFit.choose(&s, 10, 1).slab, Some(0));
    assert_eq!(BestFit::new(&s).choose(&s, 10, 1).slab, Some(1));
    assert_eq!(WorstFit.choose(&s, 10, 1).slab, Some(0));
    let mut nf = NextFit::default();
    assert_eq!(nf.choose(&s, 13, 1).slab, Some(0));
    fill(&mut s, 0, 13, 1);
    assert_eq!(nf.choose(&s, 13, 1).slab, Some(2), "slab 0 is now too full");
    assert_eq!(nf.choose(&s, 10, 1).slab, Some(2), "the cursor stays");
    assert_eq!(FirstFit.choose(&s, 15, 1), Choice::none());
}

#[test]
fn indexed_best_fit_agrees_with_the_scan() {
    use crate::rng::SplitMix64;
    let bits: Vec<u32> = (0..200).map(|i| 9 + (i * 7 % 8) as u32).collect();
    let mut s = slabs(&bits);
    let mut sizes: Vec<Vec<u64>> = vec![Vec::new(); s.len()];
    let mut indexed = BestFit::new(&s);
    let mut rng = SplitMix64::new(7);
    for _ in 0..3000 {
        let b = 4 + rng.below(10) as u32;
        let n = 1 + rng.below(3);
        let scan = Choice::at(s.least_leftover(b, n));
        let fast = indexed.choose(&s, b, n);
        assert_eq!(scan, fast);
        if let Some(i) = fast.slab {
            fill_noted(&mut s, &mut sizes, &mut indexed, i, b, n);
        }
        if rng.below(3) == 0 {
            let i = rng.below(s.len() as u64) as usize;
            empty_noted(&mut s, &mut sizes, &mut indexed, i);
        }
    }
}

/// Class fit's four steps restated over every slab, as a reference: a slab
/// of the class, fewest bytes left; else, for a class without a slab, a
/// non-empty slab that loses nothing to alignment, fewest bytes left; else
/// the smallest empty slab; else the fewest bytes skipped, now and before the
/// slab's next object of its class, then fewest left.
fn class_fit_reference(s: &Slabs, class: &[Option<u32>], bits: u32, n: u64) -> Option<usize> {
    let fits = |i: &usize| s.fit(*i, bits, n).is_some();
    let fit = |i: usize| s.fit(i, bits, n).unwrap();
    let all = || (0..s.len()).filter(fits);
    let lost = |i: usize| {
        let f = fit(i);
        let end = f.first + (n << bits);
        f.waste + class[i].map_or(0, |c| end.next_multiple_of(1 << c) - end)
    };
    let homeless = !class.contains(&Some(bits));
    all()
        .filter(|&i| class[i] == Some(bits))
        .min_by_key(|&i| (fit(i).leftover, i))
        .or_else(|| {
            all()
                .filter(|&i| homeless && s[i].live_objects() > 0 && lost(i) == 0)
                .min_by_key(|&i| (fit(i).leftover, i))
        })
        .or_else(|| {
            all()
                .filter(|&i| s[i].live_objects() == 0)
                .min_by_key(|&i| (fit(i).leftover, i))
        })
        .or_else(|| all().min_by_key(|&i| (lost(i), fit(i).leftover, i)))
}

/// Below [`best_fit::INDEX_FROM`] slabs class fit scans, from there on it
/// looks its lodgings up: both against the reference.
#[test]
fn class_fit_agrees_with_its_reference() {
    class_fit_agrees_with_its_reference_on(30, 7);
    class_fit_agrees_with_its_reference_on(200, 3);
}

/// `count` slabs of `2^9` to `2^(9 + slab_sizes - 1)` bytes.
fn class_fit_agrees_with_its_reference_on(count: u32, slab_sizes: u32) {
    use crate::rng::SplitMix64;
    let bits: Vec<u32> = (0..count).map(|i| 9 + (i * 5 % slab_sizes)).collect();
    let mut s = slabs(&bits);
    let mut sizes: Vec<Vec<u64>> = vec![Vec::new(); s.len()];
    let mut class = vec![None; s.len()];
    let mut cf = ClassFit::new(&s);
    let mut rng = SplitMix64::new(11);
    for _ in 0..10_000 {
        // Most objects of one size, some of others, which lodge with it
        // while they have no slab of their own.
        let b = match rng.below(4) {
            0 => 4 + rng.below(8) as u32,
            _ => 8,
        };
        let n = 1 << rng.below(5);
        let want = class_fit_reference(&s, &class, b, n);
        assert_eq!(cf.choose(&s, b, n), Choice::at(want));
        if let Some(i) = want {
            if s[i].live_objects() == 0 {
                class[i] = Some(b);
            }
            fill_noted(&mut s, &mut sizes, &mut cf, i, b, n);
        }
        if rng.below(4) == 0 {
            let i = rng.below(s.len() as u64) as usize;
            empty_noted(&mut s, &mut sizes, &mut cf, i);
            class[i] = None;
        }
    }
}
