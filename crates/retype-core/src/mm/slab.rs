//! Exact per-slab bookkeeping.
//!
//! A slab is one untyped region that the memory manager allocates from. Its
//! bookkeeping mirrors the kernel's retype rule exactly, so a policy can ask
//! "where would n objects of 2^bits bytes go?" without a failed retype, and
//! the manager can report the two kinds of fragmentation of seed 000:
//!
//! - *watermarking*: bytes below the watermark that held objects since freed,
//!   while the slab still has live objects;
//! - *alignment*: bytes skipped to align objects placed since the slab last
//!   reset.
//!
//! Both drop to 0 when the slab's last object goes (a *slab reset*).
//! With the watermark lifted (seed 000 §5.2) freed space is reusable: the slab
//! keeps its live extents and places objects in the lowest aligned hole.

use alloc::collections::BTreeMap;

use crate::untyped::align_up;

/// Where `n` objects of `2^bits` bytes would go in a slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// Offset of the first object from the slab's base.
    pub first: u64,
    /// Bytes skipped for alignment.
    pub waste: u64,
    /// Bytes of the slab left above its highest object after the placement:
    /// what best fit minimises.
    pub leftover: u64,
}

/// The bytes of `n` objects of `2^bits` bytes, or `None` past `u64`.
#[inline]
pub fn bytes_of(bits: u32, n: u64) -> Option<u64> {
    n.checked_shl(bits).filter(|&b| b >> bits == n)
}

/// How freed space below a slab's watermark is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatermarkRule {
    /// seL4: lost until the slab resets.
    Kept,
    /// The hypothetical kernel of seed 000 §5.2: reusable at once.
    Lifted,
}

/// One slab's state.
#[derive(Clone, Debug, Hash)]
pub struct Slab {
    base: u64,
    bits: u32,
    live_objects: u64,
    live_bytes: u64,
    /// End of the highest object placed since the last reset.
    watermark: u64,
    /// Alignment bytes skipped since the last reset (kept rule only).
    align_waste: u64,
    /// Freed bytes still counted as allocated until the next reset, under
    /// [`Quirk::SplitFreeKeepsBytes`](super::accounting::Quirk) (kept rule only).
    retained: u64,
    /// Live extents, offset → length (lifted rule only).
    extents: Option<BTreeMap<u64, u64>>,
}

impl Slab {
    pub fn new(base: u64, bits: u32, rule: WatermarkRule) -> Slab {
        Slab {
            base,
            bits,
            live_objects: 0,
            live_bytes: 0,
            watermark: 0,
            align_waste: 0,
            retained: 0,
            extents: (rule == WatermarkRule::Lifted).then(BTreeMap::new),
        }
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    pub fn size(&self) -> u64 {
        1u64 << self.bits
    }

    /// Whether freed space is reusable at once (the watermark lifted).
    pub fn is_lifted(&self) -> bool {
        self.extents.is_some()
    }

    pub fn live_objects(&self) -> u64 {
        self.live_objects
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// The effective watermark: 0 once the slab has reset.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Where the next object may start under the kept rule: the watermark,
    /// which a reset sets to 0 (as the kernel's next retype would).
    fn start(&self) -> u64 {
        self.watermark
    }

    /// Bytes a retype could still use (the kernel's `memoryLeft`).
    #[inline]
    pub fn available(&self) -> u64 {
        self.size() - self.start()
    }

    /// Where `n` objects of `2^bits` bytes would go, or `None` when the kernel
    /// would answer NotEnoughMemory. Never changes the slab.
    #[inline]
    pub fn fit(&self, bits: u32, n: u64) -> Option<Fit> {
        let need = bytes_of(bits, n)?;
        match &self.extents {
            None => {
                // The kernel's test `((size - start) >> bits) >= n` is the same
                // as the aligned objects ending inside the slab, whose size is a
                // multiple of every object size that can fit.
                let start = self.start();
                let first = align_up(start, bits);
                let end = first.checked_add(need)?;
                (end <= self.size()).then(|| Fit {
                    first,
                    waste: first - start,
                    leftover: self.size() - end,
                })
            }
            Some(extents) => self.fit_in_holes(extents, bits, need),
        }
    }

    /// [`Slab::fit`] with the watermark lifted: the lowest aligned hole.
    /// Kept out of line, so that the kept rule's fit inlines small.
    #[inline(never)]
    fn fit_in_holes(&self, extents: &BTreeMap<u64, u64>, bits: u32, need: u64) -> Option<Fit> {
        let mut hole_start = 0;
        for (&off, &len) in extents.iter() {
            let first = align_up(hole_start, bits);
            if first + need <= off {
                return Some(Fit {
                    first,
                    waste: first - hole_start,
                    leftover: self.size() - self.watermark,
                });
            }
            hole_start = off + len;
        }
        let first = align_up(hole_start, bits);
        (first + need <= self.size()).then(|| Fit {
            first,
            waste: first - hole_start,
            leftover: self.size() - (first + need),
        })
    }

    /// Records `n` objects of `2^bits` bytes placed from offset `first`,
    /// after `waste` bytes skipped to align them ([`Fit::first`], [`Fit::waste`]).
    #[inline]
    pub fn place(&mut self, first: u64, waste: u64, bits: u32, n: u64) {
        let bytes = n << bits;
        let end = first + bytes;
        match &mut self.extents {
            None => {
                // A reset zeroed the waste of the objects before.
                self.align_waste += waste;
                self.watermark = end;
            }
            Some(extents) => {
                extents.insert(first, bytes);
                self.watermark = self.watermark.max(end);
            }
        }
        self.live_objects += n;
        self.live_bytes += bytes;
    }

    /// Records that `count` consecutive objects of `size` bytes from `offset`
    /// went. Returns true when they were the slab's last: a slab reset.
    #[inline]
    pub fn release(&mut self, offset: u64, count: u64, size: u64) -> bool {
        let bytes = count * size;
        assert!(
            self.live_objects >= count && self.live_bytes >= bytes,
            "release of more objects than the slab holds"
        );
        self.live_objects -= count;
        self.live_bytes -= bytes;
        if let Some(extents) = &mut self.extents {
            release_extent(extents, offset, bytes);
            self.watermark = extents.last_key_value().map_or(0, |(o, l)| o + l);
        }
        if self.live_objects == 0 {
            self.watermark = 0;
            self.align_waste = 0;
            self.retained = 0;
            return true;
        }
        false
    }

    /// [`Slab::release`]; with `keep`, the bytes released stay counted as
    /// allocated until the slab resets (a quirk of CantripOS's counters, no
    /// effect on placement). Under the lifted rule nothing is locked, so
    /// nothing is kept.
    #[inline]
    pub fn release_counted(&mut self, offset: u64, count: u64, size: u64, keep: bool) -> bool {
        let reset = self.release(offset, count, size);
        if keep && !reset && self.extents.is_none() {
            self.retained += count * size;
        }
        reset
    }

    /// Bytes below the watermark neither live, skipped for alignment nor
    /// retained: freed space. An empty slab has all of them 0.
    fn freed(&self) -> u64 {
        self.watermark - self.align_waste - self.live_bytes - self.retained
    }

    /// Watermarking fragmentation: freed bytes still locked below the watermark.
    #[inline]
    pub fn frag_watermark(&self) -> u64 {
        match self.extents {
            None => self.freed(),
            Some(_) => 0,
        }
    }

    /// Alignment fragmentation. With the watermark lifted nothing is locked
    /// (nor skipped: objects go in holes), and what remains is the holes below
    /// the highest object, counted here.
    #[inline]
    pub fn frag_alignment(&self) -> u64 {
        match self.extents {
            None => self.align_waste,
            Some(_) => self.freed(),
        }
    }

    /// Recomputes the bookkeeping from the live objects, for tests: the number of
    /// objects, their bytes, and the highest end.
    pub fn check_against(&self, objects: &[(u64, u64)]) -> Result<(), &'static str> {
        let live = objects.len() as u64;
        let bytes: u64 = objects.iter().map(|o| o.1).sum();
        let top = objects.iter().map(|o| o.0 + o.1).max().unwrap_or(0);
        if live != self.live_objects || bytes != self.live_bytes {
            return Err("live objects or bytes differ from the objects");
        }
        if self.extents.is_some() && top != self.watermark {
            return Err("watermark differs from the highest live object");
        }
        if self.extents.is_none() && live > 0 && top > self.watermark {
            return Err("an object lies above the watermark");
        }
        if self.frag_watermark() + self.frag_alignment() + self.live_bytes > self.size() {
            return Err("fragmentation plus live bytes exceed the slab");
        }
        Ok(())
    }
}

/// Removes `[offset, offset+size)` from the extent that holds it; objects of
/// one placement share an extent, so the extent may split in two.
fn release_extent(extents: &mut BTreeMap<u64, u64>, offset: u64, size: u64) {
    let (&start, &len) = extents
        .range(..=offset)
        .next_back()
        .filter(|(s, l)| offset + size <= *s + *l)
        .expect("released object lies in no live extent");
    extents.remove(&start);
    if offset > start {
        extents.insert(start, offset - start);
    }
    let end = offset + size;
    if end < start + len {
        extents.insert(end, start + len - end);
    }
}
