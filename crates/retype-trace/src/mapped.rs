//! The bytes a program mapped itself (its `mmap`, `munmap`, `mremap` and
//! `brk`/`sbrk` calls, [`Mapping`]) over time: the third series of `retype
//! trace timeline`, beside live heap bytes and RSS.
//!
//! The model is the set of address ranges the recorded calls mapped: a
//! mapping call adds or removes ranges (page-rounded as the kernel rounds
//! them), so unmapping memory the trace never saw mapped (mapped before
//! recording began, or by the loader) takes nothing away, and a `MAP_FIXED`
//! mapping over a recorded one does not count it twice. A new segment
//! (program image) starts with nothing mapped.

use std::collections::BTreeMap;

use crate::event::{MapOp, Mapping};

/// `mremap`'s flag that keeps the old mapping (Linux 5.7).
const MREMAP_DONTUNMAP: u32 = 4;

/// The page size ranges are rounded to when the trace does not say (meta
/// `page_size`).
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// The ranges mapped so far, and their total size.
#[derive(Clone, Debug, Default)]
pub struct Mapped {
    /// Start to end of each range, disjoint and not adjacent.
    ranges: BTreeMap<u64, u64>,
    bytes: u64,
    page: u64,
}

impl Mapped {
    /// Nothing mapped; lengths round up to `page` bytes (a power of two).
    pub fn new(page: u64) -> Mapped {
        Mapped {
            page: page.max(1),
            ..Mapped::default()
        }
    }

    /// The bytes mapped now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Applies one call.
    pub fn apply(&mut self, m: &Mapping) {
        let page = self.page;
        let pages = |len: u64| len.div_ceil(page).saturating_mul(page);
        match m.op {
            MapOp::Mmap => self.add(m.addr, m.addr.saturating_add(pages(m.len))),
            MapOp::Munmap => self.remove(m.addr, m.addr.saturating_add(pages(m.len))),
            MapOp::Mremap => {
                if m.flags & MREMAP_DONTUNMAP == 0 {
                    self.remove(m.old_addr, m.old_addr.saturating_add(pages(m.old_len)));
                }
                self.add(m.addr, m.addr.saturating_add(pages(m.len)));
            }
            MapOp::Brk if m.addr >= m.old_addr => self.add(m.old_addr, m.addr),
            MapOp::Brk => self.remove(m.addr, m.old_addr),
        }
    }

    /// Maps `[start, end)`.
    fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.remove(start, end);
        let (mut start, mut end) = (start, end);
        // Merge with a neighbour that ends where this starts, or starts where it ends.
        if let Some((&s, &e)) = self.ranges.range(..start).next_back() {
            if e == start {
                self.ranges.remove(&s);
                start = s;
                self.bytes -= e - s;
            }
        }
        if let Some(e) = self.ranges.remove(&end) {
            self.bytes -= e - end;
            end = e;
        }
        self.ranges.insert(start, end);
        self.bytes += end - start;
    }

    /// Unmaps `[start, end)`, whatever part of it is mapped.
    fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // The range that begins before `start` may reach into it.
        let first = self
            .ranges
            .range(..start)
            .next_back()
            .map(|(&s, &e)| (s, e))
            .filter(|&(_, e)| e > start);
        let inside: Vec<(u64, u64)> = first
            .into_iter()
            .chain(self.ranges.range(start..end).map(|(&s, &e)| (s, e)))
            .collect();
        for (s, e) in inside {
            self.ranges.remove(&s);
            self.bytes -= e - s;
            if s < start {
                self.ranges.insert(s, start);
                self.bytes += start - s;
            }
            if e > end {
                self.ranges.insert(end, e);
                self.bytes += e - end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    const PAGE: u64 = 4096;

    /// The reference: the set of mapped pages.
    fn apply_pages(pages: &mut HashSet<u64>, m: &Mapping) {
        let span = |a: u64, len: u64| (a / PAGE)..(a + len).div_ceil(PAGE);
        match m.op {
            MapOp::Mmap => pages.extend(span(m.addr, m.len)),
            MapOp::Munmap => span(m.addr, m.len).for_each(|p| {
                pages.remove(&p);
            }),
            MapOp::Mremap => {
                if m.flags & MREMAP_DONTUNMAP == 0 {
                    span(m.old_addr, m.old_len).for_each(|p| {
                        pages.remove(&p);
                    });
                }
                pages.extend(span(m.addr, m.len));
            }
            MapOp::Brk => unreachable!("page-aligned calls only"),
        }
    }

    fn call() -> impl Strategy<Value = Mapping> {
        let addr = (0u64..64).prop_map(|p| p * PAGE);
        let len = (1u64..16 * PAGE).prop_map(|l| l.div_ceil(PAGE) * PAGE);
        (
            0..3u8,
            addr.clone(),
            len.clone(),
            addr,
            len,
            prop::bool::ANY,
        )
            .prop_map(|(op, addr, len, old_addr, old_len, keep)| Mapping {
                op: [MapOp::Mmap, MapOp::Munmap, MapOp::Mremap][op as usize],
                addr,
                len,
                old_addr,
                old_len,
                flags: if keep { MREMAP_DONTUNMAP } else { 0 },
                ..Mapping::default()
            })
    }

    proptest! {
        #[test]
        fn bytes_are_the_mapped_pages_of_the_reference(calls in prop::collection::vec(call(), 0..60)) {
            let mut mapped = Mapped::new(PAGE);
            let mut pages = HashSet::new();
            for m in &calls {
                mapped.apply(m);
                apply_pages(&mut pages, m);
                prop_assert_eq!(mapped.bytes(), pages.len() as u64 * PAGE, "after {:?}", m);
            }
            // Ranges stay disjoint and never touch.
            let ranges: Vec<_> = mapped.ranges.iter().collect();
            for w in ranges.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
        }
    }

    #[test]
    fn lengths_round_up_to_pages_and_the_break_counts_exactly() {
        let mut m = Mapped::new(PAGE);
        m.apply(&Mapping {
            op: MapOp::Mmap,
            addr: 0x10000,
            len: 100,
            ..Mapping::default()
        });
        assert_eq!(m.bytes(), PAGE);
        let brk = |old_addr, addr| Mapping {
            op: MapOp::Brk,
            addr,
            old_addr,
            ..Mapping::default()
        };
        m.apply(&brk(0x100000, 0x100000 + 1000));
        assert_eq!(m.bytes(), PAGE + 1000);
        m.apply(&brk(0x100000 + 1000, 0x100000 + 200));
        assert_eq!(m.bytes(), PAGE + 200);
        // Unmapping what was never mapped takes nothing away.
        m.apply(&Mapping {
            op: MapOp::Munmap,
            addr: 0x900000,
            len: 8 * PAGE,
            ..Mapping::default()
        });
        assert_eq!(m.bytes(), PAGE + 200);
    }
}
