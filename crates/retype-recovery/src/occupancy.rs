//! The rule the deferred search checks when it puts a pending free down: a
//! slab keeps an object between its resets.
//!
//! A CantripOS slab resets the moment its last object goes, so a slab may
//! empty only at a request its log counts a reset at. Pending frees are
//! made at requests that reset nothing: put down to a slab, none may leave
//! it empty, at its own request or until the slab's next allocation. The
//! frees still pending only take more away, so a slab the frees put down so
//! far leave empty is empty with every choice of the rest.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Per manager and slab, what it held since its last reset.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Occupancy {
    slabs: Vec<BTreeMap<u32, Held>>,
}

/// What one slab held: allocations in it before the requests still open to
/// frees, then the requests that put one in (`true`) or took one out
/// (`false`), in request order.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct Held {
    before: i64,
    events: Vec<(usize, bool)>,
}

impl Held {
    /// Whether this holds at least as much as `other` after every request.
    fn no_less(&self, other: &Held) -> bool {
        let (mut diff, mut a, mut b) = (self.before - other.before, 0, 0);
        let step = |e: (usize, bool)| if e.1 { 1 } else { -1 };
        while a < self.events.len() || b < other.events.len() {
            let next = |ev: &[(usize, bool)], k: usize| ev.get(k).map_or(usize::MAX, |e| e.0);
            let t = next(&self.events, a).min(next(&other.events, b));
            if diff < 0 {
                return false;
            }
            while next(&self.events, a) == t {
                diff += step(self.events[a]);
                a += 1;
            }
            while next(&other.events, b) == t {
                diff -= step(other.events[b]);
                b += 1;
            }
        }
        diff >= 0
    }
}

impl Occupancy {
    pub fn new(managers: usize) -> Occupancy {
        Occupancy {
            slabs: alloc::vec![BTreeMap::new(); managers],
        }
    }

    /// Request `op` put an allocation in slab `slab` of manager `m`.
    pub fn arrive(&mut self, m: usize, slab: u32, op: usize) {
        self.insert(m, slab, op, true);
    }

    /// Request `op` took an allocation out of slab `slab` of manager `m`:
    /// false if the slab is then empty after some request (the rule broken;
    /// the occupancy is spoilt then).
    pub fn leave(&mut self, m: usize, slab: u32, op: usize) -> bool {
        self.insert(m, slab, op, false);
        let h = &self.slabs[m][&slab];
        let mut held = h.before;
        h.events.iter().all(|&(_, arrived)| {
            held += if arrived { 1 } else { -1 };
            held > 0
        })
    }

    /// Whether every slab holds at least as much as in `other` after every
    /// request: then any free to come that `other` can take, this can.
    pub fn holds_no_less(&self, other: &Occupancy) -> bool {
        let empty = Held::default();
        self.slabs.iter().zip(&other.slabs).all(|(mine, theirs)| {
            mine.keys().chain(theirs.keys()).all(|slab| {
                let a = mine.get(slab).unwrap_or(&empty);
                let b = theirs.get(slab).unwrap_or(&empty);
                a.no_less(b)
            })
        })
    }

    /// Forgets the requests before `op`, counting what they left: no free
    /// to come is older, so only their sum still matters (and equal states
    /// get equal keys).
    pub fn forget_before(&mut self, op: usize) {
        for slabs in &mut self.slabs {
            for h in slabs.values_mut() {
                let old = h.events.partition_point(|e| e.0 < op);
                h.before += h
                    .events
                    .drain(..old)
                    .map(|e| if e.1 { 1 } else { -1 })
                    .sum::<i64>();
            }
        }
    }

    /// Request `op` took an allocation out of slab `kind[m]` of every
    /// manager `m`: false, and nothing recorded, if that breaks the rule.
    pub fn leave_all(&mut self, kind: &[u32], op: usize) -> bool {
        for (m, &slab) in kind.iter().enumerate() {
            if !self.leave(m, slab, op) {
                self.take_back_all(&kind[..=m], op);
                return false;
            }
        }
        true
    }

    /// Takes back what [`Occupancy::leave_all`] recorded.
    pub fn take_back_all(&mut self, kind: &[u32], op: usize) {
        for (m, &slab) in kind.iter().enumerate() {
            self.take_back(m, slab, op);
        }
    }

    /// Takes back what [`Occupancy::leave`] recorded for request `op`.
    fn take_back(&mut self, m: usize, slab: u32, op: usize) {
        let events = &mut self.slabs[m].get_mut(&slab).expect("a slab left").events;
        let at = events
            .iter()
            .position(|&e| e == (op, false))
            .expect("a request that left");
        events.remove(at);
    }

    /// Slab `slab` of manager `m` reset: its history starts again.
    pub fn reset(&mut self, m: usize, slab: u32) {
        self.slabs[m].remove(&slab);
    }

    fn insert(&mut self, m: usize, slab: u32, op: usize, arrived: bool) {
        let events = &mut self.slabs[m].entry(slab).or_default().events;
        let at = events.partition_point(|e| e.0 < op);
        events.insert(at, (op, arrived));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slab_may_not_empty_between_two_allocations() {
        let mut o = Occupancy::new(1);
        o.arrive(0, 3, 10);
        o.arrive(0, 3, 20);
        // Freeing the first before the second arrived empties the slab.
        assert!(!o.clone().leave(0, 3, 15));
        // After it, the second still holds it.
        assert!(o.leave(0, 3, 25));
        // The last object out, at any request, empties it.
        assert!(!o.clone().leave(0, 3, 30));
        o.reset(0, 3);
        o.arrive(0, 3, 40);
        assert!(!o.leave(0, 3, 41));
    }

    #[test]
    fn slabs_and_managers_are_apart() {
        let mut o = Occupancy::new(2);
        o.arrive(0, 1, 5);
        o.arrive(1, 1, 5);
        o.arrive(0, 2, 6);
        assert!(!o.clone().leave(1, 1, 7));
        assert!(!o.clone().leave(0, 1, 7));
        o.arrive(0, 1, 8);
        assert!(o.leave(0, 1, 9));
        // Taken back, the slab holds both again: one more may go.
        o.take_back_all(&[1], 9);
        assert!(o.leave(0, 1, 10));
        // One manager's slab emptied: nothing is recorded in either.
        let before = o.clone();
        o.arrive(1, 4, 11);
        let with_four = o.clone();
        assert!(!o.leave_all(&[2, 4], 12));
        assert_eq!(o, with_four);
        assert_ne!(o, before);
    }

    #[test]
    fn a_later_free_holds_no_less() {
        let mut early = Occupancy::new(1);
        early.arrive(0, 1, 1);
        early.arrive(0, 1, 2);
        let mut late = early.clone();
        assert!(early.leave(0, 1, 3));
        assert!(late.leave(0, 1, 5));
        assert!(late.holds_no_less(&early));
        assert!(!early.holds_no_less(&late));
        assert!(early.holds_no_less(&early));
        let mut apart = early.clone();
        apart.arrive(0, 2, 4);
        assert!(apart.holds_no_less(&early) && !early.holds_no_less(&apart));
    }

    #[test]
    fn forgotten_requests_still_count() {
        let mut o = Occupancy::new(1);
        o.arrive(0, 1, 5);
        o.arrive(0, 1, 6);
        assert!(o.leave(0, 1, 7));
        let mut same = Occupancy::new(1);
        same.arrive(0, 1, 2);
        o.forget_before(8);
        same.forget_before(8);
        assert_eq!(o, same, "one allocation held either way");
        assert!(!o.clone().leave(0, 1, 9));
        o.arrive(0, 1, 10);
        assert!(o.leave(0, 1, 11));
    }
}
