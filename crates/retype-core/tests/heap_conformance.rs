//! The conformance suite every heap passes: alignment, no overlap, contents
//! kept across realloc and until free, usable size, and the heap walker's
//! invariants after every operation, checked against a reference model (the
//! set of live blocks) on random operation sequences; and the same in CHERI
//! mode, in every format, where blocks are capabilities whose bounds must be
//! exactly the request's exact bounds and must not overlap.

use std::collections::BTreeMap;
use std::ptr::NonNull;

use proptest::prelude::*;
use retype_core::cheri::{Capability, Format};
use retype_core::heap::cheri::{exact_bounds, CheriHeap, Region};
use retype_core::heap::{Arena, Heap, HeapKind};

fn heap(kind: HeapKind) -> Box<dyn Heap> {
    kind.build(Arena::new(256 << 20).expect("arena"))
        .expect("an arena gives every heap its first word")
}

/// One request of a random sequence; indexes pick a live block modulo their count.
#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align_log: u32 },
    Free { pick: usize },
    Realloc { pick: usize, size: usize },
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..64,
        6 => 64usize..1024,
        2 => 1024usize..16_384,
        1 => 16_384usize..200_000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (size(), prop_oneof![9 => Just(0u32), 1 => 0u32..13]).prop_map(|(size, align_log)| Op::Alloc { size, align_log }),
        4 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        2 => (any::<usize>(), size()).prop_map(|(pick, size)| Op::Realloc { pick, size }),
    ]
}

/// What the suite runs: a plain heap, or one in CHERI mode handing out
/// capabilities, each block named by its handle.
trait Subject {
    type Handle: Copy;
    fn heap(&self) -> &dyn Heap;
    fn allocate(&mut self, size: usize, align: usize) -> Option<Self::Handle>;
    /// # Safety
    /// `h` is live.
    unsafe fn free(&mut self, h: Self::Handle);
    /// # Safety
    /// `h` is live, allocated with `align`.
    unsafe fn reallocate(
        &mut self,
        h: Self::Handle,
        size: usize,
        align: usize,
    ) -> Option<Self::Handle>;
    /// Checks a new block of `size` bytes aligned to `align`; returns the
    /// address range no other live block may overlap and the pointer to
    /// its first `size` bytes.
    fn admit(
        &self,
        h: Self::Handle,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize, NonNull<u8>), TestCaseError>;
    /// The pointer to a live block's first `size` bytes.
    fn bytes(&self, h: Self::Handle, size: usize) -> NonNull<u8>;
}

impl Subject for Box<dyn Heap> {
    type Handle = NonNull<u8>;
    fn heap(&self) -> &dyn Heap {
        &**self
    }
    fn allocate(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
        (**self).allocate(size, align)
    }
    unsafe fn free(&mut self, h: NonNull<u8>) {
        // SAFETY: by the caller's contract.
        unsafe { (**self).free(h) }
    }
    unsafe fn reallocate(
        &mut self,
        h: NonNull<u8>,
        size: usize,
        align: usize,
    ) -> Option<NonNull<u8>> {
        // SAFETY: by the caller's contract.
        unsafe { (**self).reallocate(h, size, align) }
    }
    fn admit(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize, NonNull<u8>), TestCaseError> {
        let kind = self.kind();
        let a = ptr.as_ptr() as usize;
        prop_assert_eq!(
            a % align.max(8),
            0,
            "{}: {:#x} not aligned to {}",
            kind,
            a,
            align
        );
        // SAFETY: `ptr` is live in the heap.
        prop_assert!(
            unsafe { self.usable_size(ptr) } >= size,
            "{}: usable size below request",
            kind
        );
        Ok((a, a + size.max(1), ptr))
    }
    fn bytes(&self, ptr: NonNull<u8>, _size: usize) -> NonNull<u8> {
        ptr
    }
}

impl Subject for CheriHeap<'_> {
    type Handle = Capability;
    fn heap(&self) -> &dyn Heap {
        CheriHeap::heap(self)
    }
    fn allocate(&mut self, size: usize, align: usize) -> Option<Capability> {
        CheriHeap::allocate(self, size, align).ok()
    }
    unsafe fn free(&mut self, cap: Capability) {
        CheriHeap::free(self, &cap).expect("a live capability is accepted");
    }
    unsafe fn reallocate(
        &mut self,
        cap: Capability,
        size: usize,
        align: usize,
    ) -> Option<Capability> {
        CheriHeap::reallocate(self, &cap, size, align).ok()
    }
    /// Besides the plain checks: the capability is tagged, unsealed, at its
    /// base, and its bounds are exactly the request's exact bounds.
    fn admit(
        &self,
        cap: Capability,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize, NonNull<u8>), TestCaseError> {
        let format = self.format();
        let exact = exact_bounds(format, size as u64).unwrap();
        prop_assert!(cap.tag() && !cap.is_sealed() && cap.address() == cap.base());
        prop_assert_eq!(cap.length(), u128::from(exact.length), "{}: length", format);
        let base = cap.base();
        prop_assert_eq!(
            base % exact.alignment.max(align as u64),
            0,
            "{}: base {:#x} for {}",
            format,
            base,
            size
        );
        let ptr = self
            .access(&cap, exact.length as usize)
            .map_err(|e| TestCaseError::fail(format!("{format}: {e}")))?;
        prop_assert_eq!(ptr.as_ptr() as usize % align.max(8), 0);
        let start = ptr.as_ptr() as usize;
        Ok((start, start + (exact.length as usize).max(1), ptr))
    }
    fn bytes(&self, cap: Capability, size: usize) -> NonNull<u8> {
        self.access(&cap, size)
            .expect("a live block's capability reaches its bytes")
    }
}

/// A live block as the model sees it.
struct Live<H> {
    handle: H,
    start: usize,
    size: usize,
    align: usize,
    seed: u8,
}

fn byte(seed: u8, i: usize) -> u8 {
    seed.wrapping_add((i as u8).wrapping_mul(31)) ^ (i >> 8) as u8
}

/// The model: live blocks, kept in request order and by address.
struct Model<H> {
    live: Vec<Live<H>>,
    by_addr: BTreeMap<usize, usize>,
    next_seed: u8,
}

impl<H: Copy> Model<H> {
    fn new() -> Model<H> {
        Model {
            live: Vec::new(),
            by_addr: BTreeMap::new(),
            next_seed: 0,
        }
    }

    /// Records a new block after checking it and its overlap, and fills it.
    fn add<S: Subject<Handle = H>>(
        &mut self,
        s: &S,
        h: H,
        size: usize,
        align: usize,
    ) -> Result<(), TestCaseError> {
        let (start, end, ptr) = s.admit(h, size, align)?;
        let kind = s.heap().kind();
        if let Some((&a, &e)) = self.by_addr.range(..end).next_back() {
            prop_assert!(
                e <= start || a >= end,
                "{}: [{:#x},{:#x}) overlaps [{:#x},{:#x})",
                kind,
                start,
                end,
                a,
                e
            );
        }
        self.by_addr.insert(start, end);
        self.next_seed = self.next_seed.wrapping_add(1);
        let seed = self.next_seed;
        for i in 0..size {
            // SAFETY: the block has at least `size` usable bytes.
            unsafe { ptr.as_ptr().add(i).write(byte(seed, i)) };
        }
        self.live.push(Live {
            handle: h,
            start,
            size,
            align,
            seed,
        });
        Ok(())
    }

    /// Removes block `i` after checking its first `keep` bytes.
    fn take<S: Subject<Handle = H>>(
        &mut self,
        s: &S,
        i: usize,
        keep: usize,
    ) -> Result<Live<H>, TestCaseError> {
        let b = self.live.swap_remove(i);
        self.by_addr.remove(&b.start);
        let ptr = s.bytes(b.handle, b.size);
        for j in 0..keep.min(b.size) {
            // SAFETY: the block is live with at least `size` bytes.
            let got = unsafe { ptr.as_ptr().add(j).read() };
            prop_assert_eq!(
                got,
                byte(b.seed, j),
                "{}: byte {} of a live block changed",
                s.heap().kind(),
                j
            );
        }
        Ok(b)
    }
}

fn run<S: Subject>(mut h: S, ops: &[Op]) -> Result<(), TestCaseError> {
    let name = h.heap().kind();
    let mut m = Model::new();
    for op in ops {
        match *op {
            Op::Alloc { size, align_log } => {
                let align = 1 << align_log;
                let p = h.allocate(size, align);
                prop_assert!(p.is_some(), "{name}: allocate({size}, {align}) failed");
                m.add(&h, p.unwrap(), size, align)?;
            }
            Op::Free { pick } if !m.live.is_empty() => {
                let b = m.take(&h, pick % m.live.len(), usize::MAX)?;
                // SAFETY: `b` was live.
                unsafe { h.free(b.handle) };
            }
            Op::Realloc { pick, size } if !m.live.is_empty() => {
                let i = pick % m.live.len();
                let b = m.take(&h, i, 0)?;
                // SAFETY: `b` is live with this alignment.
                let p = unsafe { h.reallocate(b.handle, size, b.align) };
                prop_assert!(p.is_some(), "{name}: reallocate to {size} failed");
                let p = p.unwrap();
                let bytes = h.bytes(p, size);
                for j in 0..size.min(b.size) {
                    // SAFETY: the new block has at least `size` bytes.
                    let got = unsafe { bytes.as_ptr().add(j).read() };
                    prop_assert_eq!(got, byte(b.seed, j), "{}: realloc lost byte {}", name, j);
                }
                m.add(&h, p, size, b.align)?;
            }
            _ => {}
        }
        let st = h
            .heap()
            .check()
            .map_err(|e| TestCaseError::fail(format!("{name}: after {op:?}: {e}")))?;
        prop_assert_eq!(st.live_blocks, m.live.len(), "{}: live block count", name);
        prop_assert_eq!(st.heap_size, h.heap().heap_size());
    }
    while !m.live.is_empty() {
        let b = m.take(&h, 0, usize::MAX)?;
        // SAFETY: `b` was live.
        unsafe { h.free(b.handle) };
    }
    let st = h
        .heap()
        .check()
        .map_err(|e| TestCaseError::fail(format!("{name}: at the end: {e}")))?;
    prop_assert_eq!(st.live_blocks, 0);
    prop_assert_eq!(
        st.free_bytes + 8 * (name != HeapKind::Buddy) as usize,
        st.heap_size,
        "{}: free space leaked",
        name
    );
    Ok(())
}

/// Heap `kind` in CHERI mode of `format`, over its own arena.
fn cheri_heap(kind: HeapKind, format: Format, arena: &mut Arena) -> CheriHeap<'_> {
    let region = Region::new(format, arena.base().as_ptr() as usize, arena.capacity())
        .expect("the arena fits every format");
    CheriHeap::new(kind.build(arena).expect("a heap"), region)
}

// 100 cases of 1,000 operations: 10^5 random operations per heap.
proptest! {
    #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn every_heap_matches_the_model(ops in prop::collection::vec(op(), 1000)) {
        for &name in HeapKind::ALL {
            run(heap(name), &ops)?;
        }
    }
}

// In each CHERI format, 50 cases of 1,000 operations per heap.
proptest! {
    #![proptest_config(ProptestConfig { cases: 50, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn every_heap_in_every_cheri_format_matches_the_model(ops in prop::collection::vec(op(), 1000)) {
        let mut arena = Arena::new(256 << 20).expect("arena");
        for &format in Format::ALL {
            for &name in HeapKind::ALL {
                arena.reset();
                run(cheri_heap(name, format, &mut arena), &ops)?;
            }
        }
    }
}

#[test]
fn every_kind_builds_a_heap_of_that_kind_and_names_round_trip() {
    for &kind in HeapKind::ALL {
        assert_eq!(heap(kind).kind(), kind);
        assert_eq!(kind.name().parse::<HeapKind>(), Ok(kind));
    }
    assert!("no-such-fit".parse::<HeapKind>().is_err());
}

#[test]
fn requests_that_cannot_be_met_fail_cleanly() {
    for &name in HeapKind::ALL {
        let mut h = name.build(Arena::new(1 << 16).unwrap()).unwrap();
        assert!(
            h.allocate(1 << 20, 8).is_none(),
            "{name}: beyond the source"
        );
        assert!(h.allocate(usize::MAX, 8).is_none(), "{name}: usize::MAX");
        assert!(h.allocate(8, 3).is_none(), "{name}: alignment 3");
        let p = h.allocate(100, 8).expect("small request");
        // SAFETY: `p` is live.
        assert!(
            unsafe { h.reallocate(p, 1 << 20, 8) }.is_none(),
            "{name}: realloc beyond the source"
        );
        // SAFETY: a failed realloc leaves `p` live.
        unsafe { h.free(p) };
        h.check().unwrap();
    }
}

#[test]
fn coalescing_gives_back_one_block() {
    for &name in HeapKind::ALL.iter().filter(|&&k| k != HeapKind::Buddy) {
        let mut h = heap(name);
        let ps: Vec<_> = (0..100)
            .map(|i| h.allocate(16 + i * 8, 8).unwrap())
            .collect();
        for p in ps.iter().step_by(2).chain(ps.iter().skip(1).step_by(2)) {
            // SAFETY: each `p` is live once.
            unsafe { h.free(*p) };
        }
        let st = h.check().unwrap();
        assert_eq!(
            (st.free_blocks, st.largest_free + 8),
            (1, st.heap_size),
            "{name}"
        );
    }
}

#[test]
fn realloc_grows_in_place_at_the_end_of_the_heap() {
    for &name in HeapKind::ALL {
        let mut h = heap(name);
        let mut p = h.allocate(100, 8).unwrap();
        for size in (200..20_000).step_by(100) {
            // SAFETY: `p` is live.
            let q = unsafe { h.reallocate(p, size, 8) }.unwrap();
            assert_eq!(p, q, "{name}: realloc to {size} moved the last block");
            p = q;
        }
        h.check().unwrap();
    }
}

#[test]
fn holes_of_freed_large_blocks_coalesce_past_small_ones() {
    // malloc-lab's binary pattern: small and large blocks alternate, the large
    // ones are freed, then slightly larger ones are requested. Cutting small
    // blocks from the other end of free blocks keeps the holes contiguous.
    for &name in HeapKind::ALL.iter().filter(|&&k| k != HeapKind::Buddy) {
        let mut h = heap(name);
        let pairs: Vec<_> = (0..400)
            .map(|_| (h.allocate(64, 8).unwrap(), h.allocate(448, 8).unwrap()))
            .collect();
        for (_, large) in &pairs {
            // SAFETY: each large block is live once.
            unsafe { h.free(*large) };
        }
        let before = h.heap_size();
        for _ in 0..200 {
            h.allocate(512, 8).unwrap();
        }
        let grown = h.heap_size() - before;
        assert!(
            grown < 200 * 520 / 4,
            "{name}: grew by {grown} bytes for 200 blocks that fit in the holes"
        );
        h.check().unwrap();
    }
}

#[test]
fn heaps_can_move_to_another_thread() {
    fn assert_send<T: Send>(_: &T) {}
    let a = Arena::new(1 << 20).unwrap();
    let h = retype_core::heap::tlsf::Tlsf::new(a).unwrap();
    assert_send(&h);
    let h = std::thread::spawn(move || {
        let mut h = h;
        h.allocate(64, 8).unwrap();
        h
    })
    .join()
    .unwrap();
    assert_eq!(h.check().unwrap().live_blocks, 1);
}

#[test]
fn the_walker_finds_a_corrupt_header() {
    for &name in HeapKind::ALL {
        let mut h = heap(name);
        let a = h.allocate(40, 8).unwrap();
        let b = h.allocate(40, 8).unwrap();
        // SAFETY: `b` is live; freeing it leaves a free neighbour to coalesce with.
        unsafe { h.free(b) };
        h.check().unwrap();
        // SAFETY: every heap keeps a header word right before a payload; a
        // size of 3 is impossible in all of them.
        unsafe { a.as_ptr().cast::<usize>().sub(1).write(3) };
        assert!(
            h.check().is_err(),
            "{name}: a corrupt header went unnoticed"
        );
    }
}
