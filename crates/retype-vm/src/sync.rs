//! What the window must do to show a range of the page tables: the
//! difference between the leaves it shows and the leaves the tables hold,
//! as few system calls as possible (runs of neighbouring pages coalesced).

use retype_core::caps::Rights;

use crate::walk::Leaf;

/// One change to the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Back to an inaccessible reservation.
    Clear { va: u64, len: u64 },
    /// Map physical memory from `phys`.
    Map {
        va: u64,
        len: u64,
        phys: u64,
        flags: Rights,
    },
    /// Same memory (from `phys`), new protection (was `from`).
    Protect {
        va: u64,
        len: u64,
        phys: u64,
        from: Rights,
        flags: Rights,
    },
}

impl Action {
    fn kind(&self) -> Kind {
        match self {
            Action::Clear { .. } => Kind::Clear,
            Action::Map { .. } => Kind::Map,
            Action::Protect { .. } => Kind::Protect,
        }
    }

    fn va(&self) -> u64 {
        match *self {
            Action::Clear { va, .. } | Action::Map { va, .. } | Action::Protect { va, .. } => va,
        }
    }

    /// `next` merged into `self` when it continues it.
    fn merge(&mut self, next: &Action) -> bool {
        match (self, *next) {
            (Action::Clear { va, len }, Action::Clear { va: v2, len: l2 }) if *va + *len == v2 => {
                *len += l2;
                true
            }
            (
                Action::Map {
                    va,
                    len,
                    phys,
                    flags,
                },
                Action::Map {
                    va: v2,
                    len: l2,
                    phys: p2,
                    flags: f2,
                },
            ) if *va + *len == v2 && *phys + *len == p2 && *flags == f2 => {
                *len += l2;
                true
            }
            (
                Action::Protect {
                    va,
                    len,
                    phys,
                    from,
                    flags,
                },
                Action::Protect {
                    va: v2,
                    len: l2,
                    phys: p2,
                    from: r2,
                    flags: f2,
                },
            ) if *va + *len == v2 && *phys + *len == p2 && *from == r2 && *flags == f2 => {
                *len += l2;
                true
            }
            _ => false,
        }
    }
}

/// The actions that turn `shown` into `wanted` (both sorted by address,
/// leaves of one range): clears first, then maps, then protections, each
/// kind coalesced, so no action undoes a later one.
pub fn diff(shown: &[Leaf], wanted: &[Leaf]) -> Vec<Action> {
    let mut out = Vec::new();
    diff_into(shown, wanted, &mut out);
    out
}

/// [`diff`] into `out` (cleared first), which a caller can reuse so that
/// an invocation allocates nothing: one pass over the leaves per kind.
pub fn diff_into(shown: &[Leaf], wanted: &[Leaf], out: &mut Vec<Action>) {
    out.clear();
    for kind in [Kind::Clear, Kind::Map, Kind::Protect] {
        let start = out.len();
        changes(shown, wanted, |a| {
            if a.kind() != kind {
                return;
            }
            let merged = out.len() > start && out.last_mut().expect("not empty").merge(&a);
            if !merged {
                out.push(a);
            }
        });
        debug_assert!(out[start..].windows(2).all(|p| p[0].va() < p[1].va()));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Clear,
    Map,
    Protect,
}

/// Gives `f` each change from `shown` to `wanted`, in address order.
fn changes(shown: &[Leaf], wanted: &[Leaf], mut f: impl FnMut(Action)) {
    let (mut i, mut j) = (0, 0);
    while i < shown.len() || j < wanted.len() {
        match (shown.get(i), wanted.get(j)) {
            (Some(s), Some(w)) if s.va == w.va => {
                if s.phys != w.phys || s.size != w.size {
                    if s.size > w.size {
                        f(clear(s));
                    }
                    f(map(w));
                } else if s.flags != w.flags {
                    f(Action::Protect {
                        va: w.va,
                        len: w.size,
                        phys: w.phys,
                        from: s.flags,
                        flags: w.flags,
                    });
                }
                i += 1;
                j += 1;
            }
            (Some(s), w) if w.is_none_or(|w| s.va < w.va) => {
                f(clear(s));
                i += 1;
            }
            (_, Some(w)) => {
                f(map(w));
                j += 1;
            }
            (s, w) => unreachable!("{s:?} {w:?}"),
        }
    }
}

fn clear(l: &Leaf) -> Action {
    Action::Clear {
        va: l.va,
        len: l.size,
    }
}

fn map(l: &Leaf) -> Action {
    Action::Map {
        va: l.va,
        len: l.size,
        phys: l.phys,
        flags: l.flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 4096;

    fn leaf(page: u64, phys_page: u64, flags: Rights) -> Leaf {
        Leaf {
            va: page * K,
            phys: phys_page * K,
            size: K,
            flags,
        }
    }

    /// Applies actions to a page-granular picture of the window.
    fn apply(actions: &[Action], pages: &mut [Option<(u64, Rights)>]) {
        for a in actions {
            match *a {
                Action::Clear { va, len } => {
                    (va / K..(va + len) / K).for_each(|p| pages[p as usize] = None)
                }
                Action::Map {
                    va,
                    len,
                    phys,
                    flags,
                } => (0..len / K).for_each(|i| {
                    pages[(va / K + i) as usize] = Some((phys / K + i, flags));
                }),
                Action::Protect {
                    va,
                    len,
                    phys,
                    from,
                    flags,
                } => (0..len / K).for_each(|i| {
                    let e = pages[(va / K + i) as usize]
                        .as_mut()
                        .expect("protect a mapped page");
                    assert_eq!(*e, (phys / K + i, from), "protect what is shown");
                    e.1 = flags;
                }),
            }
        }
    }

    fn picture(leaves: &[Leaf]) -> Vec<Option<(u64, Rights)>> {
        let mut pages = vec![None; 16];
        for l in leaves {
            pages[(l.va / K) as usize] = Some((l.phys / K, l.flags));
        }
        pages
    }

    proptest::proptest! {
        #[test]
        fn diff_turns_shown_into_wanted(
            a in proptest::collection::vec(proptest::option::of((0u64..8, 0u8..4)), 16),
            b in proptest::collection::vec(proptest::option::of((0u64..8, 0u8..4)), 16),
        ) {
            let to_leaves = |v: &[Option<(u64, u8)>]| -> Vec<Leaf> {
                v.iter().enumerate().filter_map(|(i, e)| {
                    e.map(|(p, f)| leaf(i as u64, p, Rights::from_bits(f)))
                }).collect()
            };
            let (shown, wanted) = (to_leaves(&a), to_leaves(&b));
            let actions = diff(&shown, &wanted);
            let mut pages = picture(&shown);
            apply(&actions, &mut pages);
            proptest::prop_assert_eq!(pages, picture(&wanted));
            let same = shown.iter().filter(|s| wanted.contains(s)).count();
            let touched: u64 = actions.iter().map(|a| match *a {
                Action::Clear { len, .. } | Action::Map { len, .. } | Action::Protect { len, .. } => len / K,
            }).sum();
            proptest::prop_assert!(touched as usize <= shown.len() + wanted.len() - 2 * same,
                "unchanged pages are left alone");
        }
    }

    #[test]
    fn neighbours_coalesce() {
        let wanted: Vec<Leaf> = (0..4).map(|p| leaf(p, 10 + p, Rights::RW)).collect();
        assert_eq!(
            diff(&[], &wanted),
            [Action::Map {
                va: 0,
                len: 4 * K,
                phys: 10 * K,
                flags: Rights::RW
            }]
        );
        assert_eq!(diff(&wanted, &[]), [Action::Clear { va: 0, len: 4 * K }]);
    }
}
