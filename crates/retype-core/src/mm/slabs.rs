//! The manager's slabs, and the searches the policies run over them.
//!
//! Besides the slabs themselves the table keeps each one's room (the bytes a
//! retype could still use) in a dense array, so that asking "where do `n`
//! objects of `2^bits` bytes fit, and what would each slab have left?" costs a
//! handful of instructions a slab: the slab's end is aligned to every object
//! size that fits in it, so aligning the start up is aligning the room down.

use alloc::vec::Vec;
use core::ops::Deref;

use super::slab::{bytes_of, Fit, Slab};
use crate::untyped::align_down;

/// The slabs in index order, with their rooms.
#[derive(Clone, Debug)]
pub struct Slabs {
    slabs: Vec<Slab>,
    /// `slabs[i].available()`; read under the kept rule only.
    room: Vec<u64>,
    /// The slabs keep live extents (the watermark lifted): the room does not
    /// say where objects fit, so the scan asks each slab.
    lifted: bool,
}

impl Slabs {
    /// A table of `slabs`, which must all follow one watermark rule.
    pub fn new(slabs: Vec<Slab>) -> Slabs {
        let lifted = slabs.first().is_some_and(Slab::is_lifted);
        assert!(
            slabs.iter().all(|s| s.is_lifted() == lifted),
            "slabs of one table follow one watermark rule"
        );
        let room = slabs.iter().map(Slab::available).collect();
        Slabs {
            slabs,
            room,
            lifted,
        }
    }

    /// Applies `change` to slab `i`, keeping its room current.
    #[inline]
    pub fn update<R>(&mut self, i: usize, change: impl FnOnce(&mut Slab) -> R) -> R {
        let r = change(&mut self.slabs[i]);
        self.room[i] = self.slabs[i].available();
        r
    }

    /// Where `n` objects of `2^bits` bytes would go in slab `i`: what
    /// [`Slab::fit`] answers, from the room alone under the kept rule.
    #[inline]
    pub fn fit(&self, i: usize, bits: u32, n: u64) -> Option<Fit> {
        if self.lifted {
            return self.slabs[i].fit(bits, n);
        }
        let need = bytes_of(bits, n)?;
        let room = self.room[i];
        let usable = align_down(room, bits);
        let leftover = usable.checked_sub(need)?;
        Some(Fit {
            first: self.slabs[i].size() - usable,
            waste: room - usable,
            leftover,
        })
    }

    /// The first of the `count` slabs from index `start` on, wrapping past
    /// the last, where `n` objects of `2^bits` bytes fit: what first fit,
    /// next fit and CantripOS's blind next fit look for.
    #[inline]
    pub fn first_fitting(&self, start: usize, count: usize, bits: u32, n: u64) -> Option<usize> {
        let need = bytes_of(bits, n)?;
        let len = self.slabs.len();
        debug_assert!(start < len.max(1) && count <= len);
        let (head, tail) = if start + count <= len {
            (start..start + count, 0..0)
        } else {
            (start..len, 0..start + count - len)
        };
        if self.lifted {
            return self.first_fitting_lifted(head.chain(tail), bits, n);
        }
        [head, tail].into_iter().find_map(|part| {
            let first = part.start;
            self.room[part]
                .iter()
                .position(|&room| align_down(room, bits) >= need)
                .map(|k| first + k)
        })
    }

    /// [`Slabs::first_fitting`] with the watermark lifted, asking each slab.
    #[inline(never)]
    fn first_fitting_lifted(
        &self,
        mut order: impl Iterator<Item = usize>,
        bits: u32,
        n: u64,
    ) -> Option<usize> {
        order.find(|&i| self.slabs[i].fit(bits, n).is_some())
    }

    /// The first slab where `n` objects of `2^bits` bytes fit leaving the
    /// fewest bytes (seed 000's best fit).
    #[inline]
    pub fn least_leftover(&self, bits: u32, n: u64) -> Option<usize> {
        // Where the objects do not fit the subtraction wraps round, past any
        // leftover (rooms are far below 2^63): no fit test in the loop.
        self.least_fitting(
            bits,
            n,
            |f| f.leftover,
            |_, usable, need| usable.wrapping_sub(need),
        )
    }

    /// The first slab where `n` objects of `2^bits` bytes fit leaving the
    /// most bytes (worst fit).
    #[inline]
    pub fn most_leftover(&self, bits: u32, n: u64) -> Option<usize> {
        // The wrapped leftover, read as signed, is negative where the objects
        // do not fit; flipping all but the top bit makes the most the least.
        self.least_fitting(
            bits,
            n,
            |f| !f.leftover,
            |_, usable, need| usable.wrapping_sub(need) ^ i64::MAX as u64,
        )
    }

    /// The first slab where `n` objects of `2^bits` bytes fit with the least
    /// key: `lifted(fit)` with the watermark lifted, else `kept(room, room
    /// rounded down to the object size, bytes needed)`, which must leave no
    /// slab where they do not fit below every slab where they do.
    #[inline]
    fn least_fitting(
        &self,
        bits: u32,
        n: u64,
        lifted: impl Fn(Fit) -> u64,
        kept: impl Fn(u64, u64, u64) -> u64,
    ) -> Option<usize> {
        let need = bytes_of(bits, n)?;
        if self.lifted {
            return self.least_fitting_lifted(bits, n, lifted);
        }
        let (i, _) = self.first_least(|room| kept(room, align_down(room, bits), need));
        self.room
            .get(i)
            .is_some_and(|&room| align_down(room, bits) >= need)
            .then_some(i)
    }

    /// [`Slabs::least_fitting`] with the watermark lifted, asking each slab.
    #[inline(never)]
    fn least_fitting_lifted(&self, bits: u32, n: u64, key: impl Fn(Fit) -> u64) -> Option<usize> {
        (0..self.len())
            .filter_map(|i| self.slabs[i].fit(bits, n).map(|f| (key(f), i)))
            .min()
            .map(|(_, i)| i)
    }

    /// The first slab with the least `key(room)`, and that key; two slabs a
    /// step, the better of the pair (ties to the first) against the best so
    /// far, which takes fewer instructions a slab than one at a time.
    #[inline]
    fn first_least(&self, key: impl Fn(u64) -> u64) -> (usize, u64) {
        let (mut best, mut best_key) = (0, u64::MAX);
        let pairs = self.room.chunks_exact(2);
        let odd = pairs.remainder().first().map(|&room| key(room));
        for (k, pair) in pairs.enumerate() {
            let (a, b) = (key(pair[0]), key(pair[1]));
            if a.min(b) < best_key {
                (best, best_key) = if a <= b { (2 * k, a) } else { (2 * k + 1, b) };
                if best_key == 0 {
                    return (best, 0);
                }
            }
        }
        match odd {
            Some(k) if k < best_key => (self.room.len() - 1, k),
            _ => (best, best_key),
        }
    }
}

impl Deref for Slabs {
    type Target = [Slab];

    fn deref(&self) -> &[Slab] {
        &self.slabs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::slab::WatermarkRule;
    use crate::rng::SplitMix64;

    /// The first slab with the least `key(fit)` over the slabs where the
    /// objects fit, asking each slab: the reference for the fast searches.
    fn first_least<K: Ord>(
        slabs: &Slabs,
        bits: u32,
        n: u64,
        key: impl Fn(Fit) -> K,
    ) -> Option<usize> {
        (0..slabs.len())
            .filter_map(|i| slabs[i].fit(bits, n).map(|f| (key(f), i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Every search agrees with what each slab's own placement says, from
    /// any start, under both rules, as slabs fill and reset.
    #[test]
    fn searches_agree_with_each_slab() {
        let mut rng = SplitMix64::new(3);
        for rule in [WatermarkRule::Kept, WatermarkRule::Lifted] {
            let mut slabs = Slabs::new(
                (0..9)
                    .map(|i| Slab::new((i + 1) << 20, 8 + (i as u32 % 5), rule))
                    .collect(),
            );
            let mut placed: Vec<Vec<(u64, u64, u64)>> = alloc::vec![Vec::new(); 9];
            for _ in 0..3000 {
                let (bits, n) = (4 + rng.below(8) as u32, 1 + rng.below(4));
                let i = rng.below(9) as usize;
                if let Some(fit) = slabs[i].fit(bits, n) {
                    slabs.update(i, |s| s.place(fit.first, fit.waste, bits, n));
                    placed[i].push((fit.first, n, 1 << bits));
                }
                if rng.below(5) == 0 {
                    let i = rng.below(9) as usize;
                    for (first, count, size) in placed[i].drain(..) {
                        slabs.update(i, |s| s.release(first, count, size));
                    }
                    assert_eq!(slabs[i].live_objects(), 0);
                }
                let (start, count) = (rng.below(9) as usize, rng.below(10) as usize);
                let want = (0..count)
                    .map(|k| (start + k) % 9)
                    .find(|&i| slabs[i].fit(bits, n).is_some());
                assert_eq!(
                    slabs.first_fitting(start, count, bits, n),
                    want,
                    "{rule:?} from {start}, {count} slabs"
                );
                for i in 0..9 {
                    assert_eq!(
                        slabs.fit(i, bits, n),
                        slabs[i].fit(bits, n),
                        "{rule:?} slab {i}"
                    );
                }
                let least = first_least(&slabs, bits, n, |f| f.leftover);
                assert_eq!(slabs.least_leftover(bits, n), least, "{rule:?} least");
                let most = first_least(&slabs, bits, n, |f| core::cmp::Reverse(f.leftover));
                assert_eq!(slabs.most_leftover(bits, n), most, "{rule:?} most");
            }
        }
    }
}
