//! Best fit (seed 000 §3.4): the slab left with the fewest bytes above its
//! watermark after the placement, ties to the lowest index, as CantripOS's
//! best fit does. Alignment waste is not minimised, only leftover.
//!
//! Up to [`INDEX_FROM`] slabs a scan is cheapest. Beyond, slabs are indexed
//! by the bytes they have available, so a request looks only at slabs with
//! enough room, in increasing order, and stops once no later slab can beat
//! the best found: alignment can waste less than `2^bits` bytes, so a slab
//! with `a` bytes available leaves at least `a - need - (2^bits - 1)`.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use super::{Choice, Policy};
use crate::mm::slab::{bytes_of, Slab};
use crate::mm::slabs::Slabs;

/// The number of slabs from which best fit keeps an index.
pub const INDEX_FROM: usize = 64;

#[derive(Clone, Debug, Hash)]
pub struct BestFit {
    /// `(available, index)` of every slab, when indexed.
    by_room: Option<BTreeSet<(u64, u32)>>,
    /// The `available` each slab has in `by_room`.
    room: Vec<u64>,
}

impl BestFit {
    pub fn new(slabs: &[Slab]) -> BestFit {
        let indexed = slabs.len() >= INDEX_FROM && !slabs.iter().any(Slab::is_lifted);
        let room: Vec<u64> = slabs.iter().map(Slab::available).collect();
        let by_room = indexed.then(|| {
            room.iter()
                .enumerate()
                .map(|(i, &a)| (a, i as u32))
                .collect()
        });
        BestFit { by_room, room }
    }

    /// Moves slab `index` to its place for `room` in the index; out of line,
    /// so that the unindexed case costs a test.
    #[inline(never)]
    fn reindex(&mut self, index: usize, room: u64) {
        let by_room = self.by_room.as_mut().expect("indexed");
        if self.room[index] != room {
            by_room.remove(&(self.room[index], index as u32));
            by_room.insert((room, index as u32));
            self.room[index] = room;
        }
    }

    /// The scan of CantripOS's best fit: the first slab with the least
    /// leftover, stopping at a perfect fit.
    fn choose_scan(slabs: &Slabs, bits: u32, n: u64) -> Choice {
        Choice::at(slabs.least_leftover(bits, n))
    }

    fn choose_indexed(by_room: &BTreeSet<(u64, u32)>, slabs: &[Slab], bits: u32, n: u64) -> Choice {
        let Some(need) = bytes_of(bits, n) else {
            return Choice::none();
        };
        let slack = (1u64 << bits) - 1;
        let mut best: Option<(u64, u32)> = None;
        let mut from = (need, 0);
        while let Some(&(avail, i)) = by_room.range(from..).next() {
            if best.is_some_and(|(b, _)| avail.saturating_sub(need + slack) > b) {
                break;
            }
            let fit = slabs[i as usize]
                .fit(bits, n)
                .expect("an indexed slab with room fits");
            if best.is_none_or(|b| (fit.leftover, i) < b) {
                best = Some((fit.leftover, i));
            }
            // A slab that wasted nothing left the least any slab with the same
            // room can; the rest of that room have higher indices: skip them.
            from = if fit.waste == 0 {
                (avail + 1, 0)
            } else {
                (avail, i + 1)
            };
        }
        Choice::at(best.map(|(_, i)| i as usize))
    }
}

impl Policy for BestFit {
    #[inline]
    fn choose(&mut self, slabs: &Slabs, bits: u32, n: u64) -> Choice {
        match &self.by_room {
            Some(by_room) => Self::choose_indexed(by_room, slabs, bits, n),
            None => Self::choose_scan(slabs, bits, n),
        }
    }

    #[inline]
    fn slab_changed(&mut self, index: usize, slab: &Slab) {
        if self.by_room.is_some() {
            self.reindex(index, slab.available());
        }
    }
}
