//! Lodgings: the slabs in use, indexed by where their watermarks stand, so
//! that class fit finds in logarithmic time the slab where objects of a
//! class without a slab of its own lose nothing to alignment.
//!
//! `need` bytes of objects of `2^bits` bytes each lose nothing in a slab of
//! class `c` with watermark `w` when `w` is a multiple of `2^bits` (nothing
//! skipped below them) and their end `w + need` a multiple of `2^c` (nothing
//! skipped before the slab's next object of its class). Each class keeps its
//! slabs on shelves, each shelf ordered by `(bytes free, index)`:
//!
//! - *aligned* (the usual case: `w` a multiple of `2^c`), one shelf per
//!   alignment of `w`. For `c <= bits` the shelves aligned to `2^bits` or
//!   more hold exactly the lossless slabs; for `c > bits` every aligned
//!   shelf does when `need` is a multiple of `2^c`, none otherwise;
//! - *skewed* (a placement that lost bytes left `w` off its class's
//!   alignment), one shelf per remainder `w mod 2^c`. Only for `c > bits`
//!   can one hold lossless slabs: the shelf of remainder `-need mod 2^c`,
//!   all of whose slabs are then lossless.
//!
//! So a request looks at one slab per shelf, the first with room, and takes
//! the one with the fewest bytes free. Slabs change at every placement and
//! lodgers come rarely, so a change only notes the slab; the shelves catch
//! up when a lodger asks, moving each slab once however often it changed.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;

/// `(bytes free above the watermark, slab index)`: a shelf's order, the
/// fewest bytes left after a lossless placement first, ties to the lowest
/// index.
type Shelf = BTreeSet<(u64, u32)>;

/// Where a slab in use stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    class: u32,
    watermark: u64,
    free: u64,
}

impl Place {
    /// The shelf's key: `Ok(alignment of the watermark, log2)` when the
    /// watermark is a multiple of `2^class`, else `Err(watermark mod
    /// 2^class)`.
    fn shelf(&self) -> Result<u32, u64> {
        let rem = self.watermark & low_mask(self.class);
        if rem == 0 {
            Ok(self.watermark.trailing_zeros())
        } else {
            Err(rem)
        }
    }
}

/// The low `bits` bits set.
fn low_mask(bits: u32) -> u64 {
    1u64.checked_shl(bits).map_or(u64::MAX, |b| b - 1)
}

#[derive(Clone, Debug)]
pub struct Lodgings {
    /// Per class: the aligned shelves, by the watermark's alignment (log2,
    /// at least the class).
    aligned: Vec<BTreeMap<u32, Shelf>>,
    /// Per class: the skewed shelves, by the watermark modulo `2^class`
    /// (never 0).
    skewed: Vec<BTreeMap<u64, Shelf>>,
    /// Bit `c` set: class `c` has shelves. A shelf, once made, stays when
    /// it empties: a look at an empty shelf costs less than making it again.
    classes: u64,
    /// Each slab's place on the shelves, `None` while it is off them.
    place: Vec<Option<Place>>,
    /// Each slab's place as last told, `None` while it is empty.
    told: Vec<Option<Place>>,
    /// The slabs told of since the shelves last caught up, each once.
    stale: Vec<u32>,
    /// Whether each slab is in `stale`.
    is_stale: Vec<bool>,
}

impl Lodgings {
    /// No slab in use among `slabs`.
    pub fn new(slabs: usize) -> Lodgings {
        Lodgings {
            aligned: vec![BTreeMap::new(); 64],
            skewed: vec![BTreeMap::new(); 64],
            classes: 0,
            place: vec![None; slabs],
            told: vec![None; slabs],
            stale: Vec::new(),
            is_stale: vec![false; slabs],
        }
    }

    /// Slab `index`, of class `class`, now has its watermark at `watermark`
    /// with `free` bytes above it; `None` when it is empty.
    pub fn update(&mut self, index: usize, now: Option<(u32, u64, u64)>) {
        self.told[index] = now.map(|(class, watermark, free)| Place {
            class,
            watermark,
            free,
        });
        if !self.is_stale[index] {
            self.is_stale[index] = true;
            self.stale.push(index as u32);
        }
    }

    /// Moves every slab told of since the last time to its place.
    fn catch_up(&mut self) {
        while let Some(i) = self.stale.pop() {
            let i = i as usize;
            self.is_stale[i] = false;
            let now = self.told[i];
            if self.place[i] == now {
                continue;
            }
            if let Some(old) = self.place[i].take() {
                self.remove(i as u32, old);
            }
            if let Some(new) = now {
                self.insert(i as u32, new);
            }
            self.place[i] = now;
        }
    }

    fn insert(&mut self, index: u32, p: Place) {
        let c = p.class as usize;
        let shelf = match p.shelf() {
            Ok(t) => self.aligned[c].entry(t).or_default(),
            Err(r) => self.skewed[c].entry(r).or_default(),
        };
        shelf.insert((p.free, index));
        self.classes |= 1 << c;
    }

    fn remove(&mut self, index: u32, p: Place) {
        let c = p.class as usize;
        let shelf = match p.shelf() {
            Ok(t) => self.aligned[c].get_mut(&t),
            Err(r) => self.skewed[c].get_mut(&r),
        };
        let removed = shelf.is_some_and(|s| s.remove(&(p.free, index)));
        debug_assert!(removed, "a slab on its shelf");
    }

    /// The slab in use where `need` bytes of objects of `2^bits` bytes lose
    /// nothing to alignment, now or at the slab's next placement of its own
    /// class, and leave the fewest bytes; ties to the lowest index.
    pub fn lossless(&mut self, bits: u32, need: u64) -> Option<usize> {
        self.catch_up();
        let mut best: Option<(u64, u32)> = None;
        let mut consider = |shelf: &Shelf| {
            if let Some(&first) = shelf.range((need, 0)..).next() {
                if best.is_none_or(|b| first < b) {
                    best = Some(first);
                }
            }
        };
        let mut classes = self.classes;
        while classes != 0 {
            let c = classes.trailing_zeros();
            classes &= classes - 1;
            if c <= bits {
                self.aligned[c as usize]
                    .range(bits..)
                    .for_each(|(_, s)| consider(s));
            } else {
                match need.wrapping_neg() & low_mask(c) {
                    0 => self.aligned[c as usize].values().for_each(&mut consider),
                    rem => self.skewed[c as usize]
                        .get(&rem)
                        .into_iter()
                        .for_each(&mut consider),
                }
            }
        }
        best.map(|(_, i)| i as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition: every slab in use where the objects lose nothing,
    /// fewest bytes free, lowest index.
    fn reference(places: &[Option<(u32, u64, u64)>], bits: u32, need: u64) -> Option<usize> {
        places
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let (class, w, free) = (*p)?;
                let lossless = w.is_multiple_of(1 << bits) && (w + need).is_multiple_of(1 << class);
                (lossless && free >= need).then_some((free, i))
            })
            .min()
            .map(|(_, i)| i)
    }

    /// Slab `i`: class, watermark, free bytes, or empty (`None`). Watermarks
    /// are mostly multiples of their class's size, some not.
    fn place() -> impl Strategy<Value = Option<(u32, u64, u64)>> {
        proptest::option::weighted(
            0.8,
            (0u32..8, 1u64..64, 0u32..3, 0u64..4096).prop_map(|(class, k, skew, free)| {
                let w = (k << class) - if skew == 0 { k % (1 << class) } else { 0 };
                (class, w.max(1), free)
            }),
        )
    }

    proptest! {
        /// Changes come in bursts between requests, as placements do between
        /// lodgers: the shelves catch up on several at once.
        #[test]
        fn lossless_is_the_definition(
            bursts in proptest::collection::vec(
                proptest::collection::vec((0usize..40, place()), 1..6),
                1..60,
            ),
            asks in proptest::collection::vec((0u32..9, 1u64..16), 1..40),
        ) {
            let mut lodgings = Lodgings::new(40);
            let mut places = vec![None; 40];
            for burst in bursts {
                for (i, p) in burst {
                    lodgings.update(i, p);
                    places[i] = p;
                }
                for &(bits, n) in &asks {
                    let need = n << bits;
                    prop_assert_eq!(lodgings.lossless(bits, need), reference(&places, bits, need));
                }
            }
        }
    }
}
