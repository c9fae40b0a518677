//! Seed 004's design in capability terms: memory comes in huge pages, each
//! held by a region capability, and every allocation is derived from the
//! current region by set-bounds, as the seed's huge-page bump allocator
//! does (`allocator/bump_alloc/HugePage/bump_alloc.c` of
//! Akilan1999/CHERI-Allocator: align the bump pointer with CRAM, round the
//! length to CRRL, `cheri_bounds_set_exact`). Like it, nothing is freed.
//!
//! A request that does not fit what is left of the current page opens the
//! next page; one larger than a page gets a region of its own, whole pages
//! long (and as aligned as its bounds need). Every byte of the pages taken
//! is accounted for: requested, padding (lengths rounded to CRRL),
//! alignment (what the bump skipped to align a base) and tails (the ends of
//! pages left when a request did not fit).

use anyhow::{bail, Context};
use retype_core::cheri::{Capability, Format};
use retype_core::heap::cheri::exact_bounds;
use retype_core::heap::cheri::region::data_permissions;

use super::workload::Run;

/// What the pages of one format and page size held after a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageFigures {
    /// Regions derived from the root: pages, or runs of pages for a request
    /// larger than a page.
    pub regions: u64,
    /// Bytes of the pages taken.
    pub footprint: u64,
    pub requested: u64,
    pub padding: u64,
    pub alignment: u64,
    pub tails: u64,
    /// Requests larger than a page, each in a region of its own.
    pub own_regions: u64,
    /// Capabilities derived and checked (the first and last of each run of
    /// equal requests within a page, and each request with a region of its own).
    pub derived: u64,
    /// Requests the format's address space had no room for.
    pub unplaced: u64,
}

/// The bump allocator over huge-page regions.
pub struct HugePages {
    format: Format,
    page: u64,
    root: Capability,
    /// The current page's region capability, and the bump pointer in it.
    region: Option<Capability>,
    cursor: u64,
    /// Where the next region starts.
    next: u64,
    pub figures: PageFigures,
}

impl HugePages {
    /// Pages of `page` bytes (a power of two) in `format`'s address space,
    /// from address `page` up.
    pub fn new(format: Format, page: u64) -> anyhow::Result<HugePages> {
        let root = Capability::root(format)
            .restrict_permissions(data_permissions(format))
            .context("a data capability from the root")?;
        Ok(HugePages {
            format,
            page,
            root,
            region: None,
            cursor: 0,
            next: page,
            figures: PageFigures::default(),
        })
    }

    /// A region of at least `length` bytes, whole pages, aligned to
    /// `align` and exactly representable; `None` past the address space.
    fn take_region(&mut self, length: u64, align: u64) -> anyhow::Result<Option<Capability>> {
        let mut len = length.next_multiple_of(self.page);
        let mut align = align.max(self.page);
        // Rounding the length may ask for more alignment, which may round it again.
        loop {
            let b = exact_bounds(self.format, len).context("a region within the address space")?;
            let (l, a) = (b.length.next_multiple_of(self.page), b.alignment.max(align));
            if (l, a) == (len, align) {
                break;
            }
            (len, align) = (l, a);
        }
        let base = self.next.next_multiple_of(align);
        if u128::from(base) + u128::from(len) > self.format.max_top() {
            return Ok(None);
        }
        let region = self
            .root
            .set_address(base)
            .set_bounds_exact(len.into())
            .with_context(|| format!("{}: a region of {len} bytes at {base:#x}", self.format))?;
        self.next = base + len;
        self.figures.regions += 1;
        self.figures.footprint += len;
        Ok(Some(region))
    }

    /// The capability for `length` bytes at `address`, derived from
    /// `region`, checked exact and within it.
    fn derive(&mut self, region: &Capability, address: u64, length: u64) -> anyhow::Result<()> {
        let cap = region
            .set_address(address)
            .set_bounds_exact(length.into())
            .with_context(|| format!("{}: {length} bytes at {address:#x}", self.format))?;
        if cap.base() < region.base() || cap.top() > region.top() || !cap.tag() {
            bail!(
                "{}: {length} bytes at {address:#x} escaped their region",
                self.format
            );
        }
        self.figures.derived += 1;
        Ok(())
    }

    /// Allocates a run of equal requests.
    pub fn allocate(&mut self, run: &Run) -> anyhow::Result<()> {
        let Some(b) = exact_bounds(self.format, run.size) else {
            self.figures.unplaced += run.count;
            return Ok(());
        };
        let align = b.alignment.max(run.align).max(1);
        if b.length > self.page {
            for _ in 0..run.count {
                let Some(region) = self.take_region(b.length, align)? else {
                    self.figures.unplaced += 1;
                    continue;
                };
                self.derive(&region, region.base(), b.length)?;
                let tail = region.length() as u64 - b.length;
                self.figures.own_regions += 1;
                self.figures.requested += run.size;
                self.figures.padding += b.padding(run.size);
                self.figures.tails += tail;
            }
            return Ok(());
        }
        let stride = b.length.next_multiple_of(align);
        let mut left = run.count;
        while left > 0 {
            let region = match self.region {
                Some(r) if self.cursor.next_multiple_of(align) + b.length <= r.top() as u64 => r,
                current => {
                    if let Some(r) = current {
                        self.figures.tails += r.top() as u64 - self.cursor;
                    }
                    let Some(r) = self.take_region(self.page, 1)? else {
                        self.region = None;
                        self.figures.unplaced += left;
                        return Ok(());
                    };
                    self.region = Some(r);
                    self.cursor = r.base();
                    r
                }
            };
            let first = self.cursor.next_multiple_of(align);
            let room = region.top() as u64 - first - b.length;
            // Zero-length requests take no room: all of them fit.
            let fit = room.checked_div(stride).map_or(left, |n| (n + 1).min(left));
            let last = first + (fit - 1) * stride;
            self.derive(&region, first, b.length)?;
            if fit > 1 {
                self.derive(&region, last, b.length)?;
            }
            self.figures.alignment += (first - self.cursor) + (fit - 1) * (stride - b.length);
            self.figures.requested += fit * run.size;
            self.figures.padding += fit * b.padding(run.size);
            self.cursor = last + b.length;
            left -= fit;
        }
        Ok(())
    }

    /// The figures, the current page's unused end counted as a tail.
    pub fn finish(mut self) -> PageFigures {
        if let Some(r) = self.region {
            self.figures.tails += r.top() as u64 - self.cursor;
        }
        self.figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(size: u64, count: u64) -> Run {
        Run {
            size,
            align: 16,
            count,
        }
    }

    /// Every byte of the pages is requested, padding, alignment or a tail.
    #[test]
    fn the_pages_are_accounted_for() {
        let runs = [
            run(24, 3),
            run(5000, 1000),
            run(16, 200_000),
            run(3 << 20, 2),
            run(100_000, 300),
            run(0, 5),
        ];
        for &format in Format::ALL {
            for page in [2u64 << 20, 1 << 30] {
                let mut h = HugePages::new(format, page).unwrap();
                for r in &runs {
                    h.allocate(r).unwrap();
                }
                let f = h.finish();
                assert_eq!(f.unplaced, 0, "{format}");
                assert_eq!(
                    f.footprint,
                    f.requested + f.padding + f.alignment + f.tails,
                    "{format} {page}: {f:?}"
                );
                assert_eq!(f.own_regions, if page == 2 << 20 { 2 } else { 0 });
            }
        }
    }

    /// Runs of equal requests give what one request at a time gives.
    #[test]
    fn a_run_is_its_requests_one_by_one() {
        for &format in Format::ALL {
            let mut whole = HugePages::new(format, 2 << 20).unwrap();
            let mut single = HugePages::new(format, 2 << 20).unwrap();
            for r in [run(7, 1), run(100_000, 50), run(4097, 700)] {
                whole.allocate(&r).unwrap();
                for _ in 0..r.count {
                    single.allocate(&Run { count: 1, ..r }).unwrap();
                }
            }
            let (w, s) = (whole.finish(), single.finish());
            assert_eq!(
                PageFigures { derived: 0, ..w },
                PageFigures { derived: 0, ..s },
                "{format}"
            );
        }
    }

    /// RV32 has 4 GiB: 1 GiB pages run out, and what does not fit is counted.
    #[test]
    fn a_full_address_space_leaves_requests_unplaced() {
        let mut h = HugePages::new(Format::Rv32, 1 << 30).unwrap();
        h.allocate(&run(600 << 20, 10)).unwrap();
        let f = h.finish();
        // Three pages, at 1, 2 and 3 GiB, one block each.
        assert_eq!((f.regions, f.unplaced), (3, 7));
    }
}
