//! A GCBench-like collector (seed 001 §3.6.5, Table 3.4): a mutator that
//! allocates and drops binary trees as Boehm's GCBench does, on a fixed
//! heap, and a mostly-concurrent mark-sweep collector (Boehm, Demers and
//! Shenker 1991): a thread marks while the mutator runs; then the mutator
//! stops, marks again from the roots and from the marked objects on pages
//! modified meanwhile, and sweeps.
//!
//! Modified pages are found one of three ways, the rows of Table 3.4:
//! - [`Barrier::Dirty`]: the heap is a Frame mapped through capabilities
//!   (retype-vm); the mapping's dirty bits are cleared when marking starts
//!   and read when it ends (`Space::dirty`);
//! - [`Barrier::Traps`]: the same heap protected read-only through
//!   `modify_flags` when marking starts; the first write to a page traps to
//!   the space's fault handler, which records the page and makes it
//!   writable through `modify_flags`;
//! - [`Barrier::LinuxTraps`]: no capabilities, the heap an anonymous mapping
//!   protected with `mprotect` and a plain SIGSEGV handler
//!   ([`super::linux_traps`]): what a collector on Linux does.
//!
//! Configurations C1 to C5 grow the trees as the thesis's do: the largest
//! tree has depth 12 + 2k for Ck (GCBench's own is C2), the long-lived
//! tree that depth, the stretch tree one more; the heap (fixed, where
//! Boehm's grows) holds the stretch tree twice. Marking starts when a
//! quarter of the heap is left.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};

use super::linux_traps::TrapRegion;
use super::median;
use retype_vm::Options;
use retype_vm::Resolution;
use retype_vm::Vm;
use retype_vm::VmError;

/// How the collector finds pages the mutator modified while it marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    Dirty,
    Traps,
    LinuxTraps,
}

/// Nodes per 4 KiB page (a node is two 32-bit child indices).
const PER_PAGE: usize = PAGE as usize / 8;
/// Pages per leaf page table.
const PT_PAGES: usize = 512;
const MIN_DEPTH: u32 = 4;

/// A Frame mapped through capabilities: one Mapping capability per leaf
/// page table.
struct Mapped {
    vm: Vm,
    maps: Vec<CapRef>,
}

/// The heap's pages, and how writes to them are tracked (one per
/// [`Barrier`]).
enum Store {
    Dirty(Mapped),
    /// With the pages the space's handler saw written.
    Traps(Mapped, Arc<Mutex<Vec<usize>>>),
    Linux(TrapRegion),
}

impl Store {
    /// A Frame of `bytes` mapped read-write through capabilities; in trap
    /// mode its fault handler records and unprotects written pages.
    fn space(bytes: u64, barrier: Barrier) -> Result<Store, VmError> {
        let pages = (bytes / PAGE) as usize;
        let pts = pages.div_ceil(PT_PAGES);
        let vm = Vm::new(Options {
            ram: bytes + (pts as u64 + 16) * PAGE + (4 << 20),
            root_slots: (8 + 3 * pts as u32).next_multiple_of(256),
            dirty_bits: barrier == Barrier::Dirty,
            ..Options::default()
        })?;
        if bytes > vm.len() as u64 {
            return Err(VmError::PageSize {
                asked: bytes,
                backing: vm.len() as u64,
            });
        }
        let b = vm.boot();
        let slot = |i: usize| CapRef::l1(b.cspace, i as u32);
        let mut maps = Vec::new();
        {
            let mut s = vm.lock();
            let root = s.root();
            s.retype(b.ram, CapType::Frame, 0, bytes, 1, slot(4))?;
            for i in 0..pts {
                let (pt, ptm, m) = (slot(5 + 3 * i), slot(6 + 3 * i), slot(7 + 3 * i));
                s.retype(
                    b.ram,
                    CapType::X86Ptable,
                    bytes + i as u64 * PAGE,
                    PAGE,
                    1,
                    pt,
                )?;
                s.map(root, pt, i as u64, 0, 1, Rights::RW, ptm)?;
                let n = (pages - i * PT_PAGES).min(PT_PAGES) as u64;
                let off = (i * PT_PAGES) as u64 * PAGE;
                s.map(pt, slot(4), 0, off, n, Rights::RW, m)?;
                maps.push(m);
            }
        }
        if barrier == Barrier::Dirty {
            return Ok(Store::Dirty(Mapped { vm, maps }));
        }
        let touched: Arc<Mutex<Vec<usize>>> = Arc::default();
        let (log, pts) = (touched.clone(), maps.clone());
        vm.on_fault(move |s, f| {
            let page = (f.va / PAGE) as usize;
            log.lock().unwrap_or_else(|p| p.into_inner()).push(page);
            let (m, e) = (pts[page / PT_PAGES], (page % PT_PAGES) as u64);
            match s.modify_flags(m, e, 1, Rights::RW) {
                Ok(()) => Resolution::Retry,
                Err(_) => Resolution::Fail,
            }
        });
        Ok(Store::Traps(Mapped { vm, maps }, touched))
    }

    fn base(&self) -> usize {
        match self {
            Store::Dirty(m) | Store::Traps(m, _) => m.vm.base(),
            Store::Linux(r) => r.base(),
        }
    }
}

/// The heap: nodes in the store, marks and bookkeeping outside it (so
/// that marking does not dirty the heap).
struct Heap {
    store: Store,
    nodes: &'static [AtomicU32],
    pages: usize,
    marks: Arc<Vec<AtomicBool>>,
    allocated: Vec<bool>,
    free: Vec<u32>,
    /// The mutator's roots (a shadow stack).
    roots: Vec<u32>,
    marker: Option<JoinHandle<()>>,
    collections: u32,
}

fn mark_from(nodes: &[AtomicU32], marks: &[AtomicBool], mut stack: Vec<u32>) {
    while let Some(n) = stack.pop() {
        for c in [left(nodes, n), right(nodes, n)] {
            if c != 0 && !marks[c as usize].swap(true, Relaxed) {
                stack.push(c);
            }
        }
    }
}

fn left(nodes: &[AtomicU32], n: u32) -> u32 {
    nodes[2 * n as usize].load(Relaxed)
}

fn right(nodes: &[AtomicU32], n: u32) -> u32 {
    nodes[2 * n as usize + 1].load(Relaxed)
}

impl Heap {
    fn new(bytes: u64, barrier: Barrier) -> Result<Heap, VmError> {
        let store = match barrier {
            Barrier::LinuxTraps => Store::Linux(TrapRegion::new(bytes)?),
            Barrier::Dirty | Barrier::Traps => Store::space(bytes, barrier)?,
        };
        let pages = (bytes / PAGE) as usize;
        let count = pages * PER_PAGE;
        // SAFETY: the store is mapped read-write for `bytes` bytes at its
        // base for as long as it lives; the slice is only used while the
        // heap (which owns the store) exists, and the marker thread is
        // joined before the heap goes.
        let nodes: &'static [AtomicU32] =
            unsafe { std::slice::from_raw_parts(store.base() as *const AtomicU32, 2 * count) };
        Ok(Heap {
            store,
            nodes,
            pages,
            marks: Arc::new((0..count).map(|_| AtomicBool::new(false)).collect()),
            allocated: vec![false; count],
            // Node 0 is the null child.
            free: (1..count as u32).rev().collect(),
            roots: Vec::new(),
            marker: None,
            collections: 0,
        })
    }

    fn set(&self, n: u32, l: u32, r: u32) {
        self.nodes[2 * n as usize].store(l, Relaxed);
        self.nodes[2 * n as usize + 1].store(r, Relaxed);
    }

    /// Runs `f` on every mapping of a heap of `pages` pages with its first
    /// heap page and its page count.
    fn each_map(
        maps: &[CapRef],
        pages: usize,
        mut f: impl FnMut(CapRef, usize, u64) -> Result<(), VmError>,
    ) -> Result<(), VmError> {
        for (i, &m) in maps.iter().enumerate() {
            let first = i * PT_PAGES;
            f(m, first, (pages - first).min(PT_PAGES) as u64)?;
        }
        Ok(())
    }

    fn alloc(&mut self) -> Result<u32, VmError> {
        if self.free.is_empty() {
            self.collect()?;
        }
        let n = self.free.pop().expect("the heap holds the live trees");
        self.allocated[n as usize] = true;
        if self.marker.is_some() {
            self.marks[n as usize].store(true, Relaxed);
        } else if self.free.len() < self.allocated.len() / 4 {
            self.start_mark()?;
        }
        self.set(n, 0, 0);
        Ok(n)
    }

    /// Starts marking on a thread: modified pages are tracked from now on.
    fn start_mark(&mut self) -> Result<(), VmError> {
        let pages = self.pages;
        match &self.store {
            Store::Dirty(Mapped { vm, maps }) => {
                let mut s = vm.lock();
                Self::each_map(maps, pages, |m, _, n| s.dirty(m, 0, n, true).map(drop))?;
            }
            Store::Traps(Mapped { vm, maps }, touched) => {
                touched.lock().unwrap_or_else(|p| p.into_inner()).clear();
                let mut s = vm.lock();
                Self::each_map(maps, pages, |m, _, n| s.modify_flags(m, 0, n, Rights::READ))?;
            }
            Store::Linux(r) => r.protect()?,
        }
        self.marks.iter().for_each(|m| m.store(false, Relaxed));
        let (nodes, marks, roots) = (self.nodes, self.marks.clone(), self.roots.clone());
        roots
            .iter()
            .for_each(|&r| marks[r as usize].store(true, Relaxed));
        self.marker = Some(std::thread::spawn(move || mark_from(nodes, &marks, roots)));
        Ok(())
    }

    /// Finishes the collection: waits for the marker (or marks now), then
    /// marks from the roots and the marked objects of modified pages, and
    /// sweeps.
    fn collect(&mut self) -> Result<(), VmError> {
        if self.marker.is_none() {
            self.start_mark()?;
        }
        self.marker
            .take()
            .expect("marking")
            .join()
            .expect("the marker does not panic");
        self.finish()
    }

    /// The stopped part of a collection, once the marker is done.
    fn finish(&mut self) -> Result<(), VmError> {
        let pages = self.pages;
        let pages: Vec<usize> = match &self.store {
            Store::Dirty(Mapped { vm, maps }) => {
                let mut s = vm.lock();
                let mut out = Vec::new();
                Self::each_map(maps, pages, |m, first, n| {
                    let bits = s.dirty(m, 0, n, false)?;
                    out.extend((0..bits.len()).filter(|&p| bits[p]).map(|p| first + p));
                    Ok(())
                })?;
                out
            }
            Store::Traps(Mapped { vm, maps }, touched) => {
                let mut s = vm.lock();
                Self::each_map(maps, pages, |m, _, n| s.modify_flags(m, 0, n, Rights::RW))?;
                std::mem::take(&mut *touched.lock().unwrap_or_else(|p| p.into_inner()))
            }
            Store::Linux(r) => r.unprotect()?,
        };
        let mut grey: Vec<u32> = Vec::new();
        for &r in &self.roots {
            if !self.marks[r as usize].swap(true, Relaxed) {
                grey.push(r);
            }
        }
        for p in pages {
            let first = (p * PER_PAGE) as u32;
            grey.extend(
                (first..first + PER_PAGE as u32).filter(|&n| self.marks[n as usize].load(Relaxed)),
            );
        }
        mark_from(self.nodes, &self.marks, grey);
        for n in 1..self.allocated.len() {
            if self.allocated[n] && !self.marks[n].load(Relaxed) {
                self.allocated[n] = false;
                self.free.push(n as u32);
            }
        }
        self.collections += 1;
        Ok(())
    }

    /// GCBench's bottom-up tree.
    fn make_tree(&mut self, depth: u32) -> Result<u32, VmError> {
        if depth == 0 {
            return self.alloc();
        }
        let l = self.make_tree(depth - 1)?;
        self.roots.push(l);
        let r = self.make_tree(depth - 1)?;
        self.roots.push(r);
        let n = self.alloc()?;
        self.set(n, l, r);
        self.roots.truncate(self.roots.len() - 2);
        Ok(n)
    }

    /// GCBench's top-down tree under the (rooted) node `n`.
    fn populate(&mut self, depth: u32, n: u32) -> Result<(), VmError> {
        if depth == 0 {
            return Ok(());
        }
        let l = self.alloc()?;
        self.set(n, l, 0);
        let r = self.alloc()?;
        self.set(n, l, r);
        self.populate(depth - 1, l)?;
        self.populate(depth - 1, r)
    }

    /// Nodes reachable from `n`, to check that no live node was freed.
    fn count(&self, n: u32) -> u64 {
        let mut stack = vec![n];
        let mut seen = 0;
        while let Some(n) = stack.pop() {
            assert!(self.allocated[n as usize], "a reachable node was freed");
            seen += 1;
            stack.extend(
                [left(self.nodes, n), right(self.nodes, n)]
                    .into_iter()
                    .filter(|&c| c != 0),
            );
        }
        seen
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        if let Some(m) = self.marker.take() {
            let _ = m.join();
        }
    }
}

/// One run of GCBench's mutator for configuration `config` (1 to 5).
fn run(config: u32, barrier: Barrier) -> Result<(f64, u32, u64), VmError> {
    let max = 12 + 2 * config;
    let tree = |d: u32| (1u64 << (d + 1)) - 1;
    // Twice the stretch tree: the long-lived tree and a temporary one of the
    // largest depth fill half of it.
    let bytes = (2 * tree(max + 1) * 8).next_power_of_two();
    let mut h = Heap::new(bytes, barrier)?;
    let t = Instant::now();
    h.make_tree(max + 1)?; // the stretch tree, garbage at once
    let long_lived = h.alloc()?;
    h.roots.push(long_lived);
    h.populate(max, long_lived)?;
    for d in (MIN_DEPTH..=max).step_by(2) {
        let iterations = 2 * tree(max) / tree(d);
        for _ in 0..iterations {
            let top = h.alloc()?;
            h.roots.push(top);
            h.populate(d, top)?;
            h.roots.pop();
            h.make_tree(d)?;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        h.count(long_lived),
        tree(max),
        "the long-lived tree survived whole"
    );
    Ok((secs, h.collections, bytes))
}

/// Configuration `config`'s runtime with each barrier, the three
/// alternated `reps` times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GcRow {
    pub config: u32,
    pub heap_bytes: u64,
    /// Median seconds and collections: (dirty bits, traps, Linux traps).
    pub seconds: (f64, f64, f64),
    pub collections: (u32, u32, u32),
}

impl GcRow {
    /// One JSON object (the keys are the interface).
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"gcbench\",\"config\":\"C{}\",\"heap_bytes\":{},\"dirty_seconds\":{:.3},\"traps_seconds\":{:.3},\"linux_traps_seconds\":{:.3},\"dirty_collections\":{},\"traps_collections\":{},\"linux_traps_collections\":{}}}",
            self.config,
            self.heap_bytes,
            self.seconds.0,
            self.seconds.1,
            self.seconds.2,
            self.collections.0,
            self.collections.1,
            self.collections.2
        )
    }
}

pub fn gcbench(config: u32, reps: u32) -> Result<GcRow, VmError> {
    if !(1..=5).contains(&config) || reps == 0 {
        return Err(VmError::Unsupported(format!(
            "configuration C{config}, {reps} runs"
        )));
    }
    const BARRIERS: [Barrier; 3] = [Barrier::Dirty, Barrier::Traps, Barrier::LinuxTraps];
    let mut secs: [Vec<f64>; 3] = Default::default();
    let (mut collections, mut heap) = ([0; 3], 0);
    for _ in 0..reps {
        for (i, barrier) in BARRIERS.into_iter().enumerate() {
            let (s, c, b) = run(config, barrier)?;
            secs[i].push(s);
            collections[i] = c;
            heap = b;
        }
    }
    let [d, t, l] = secs.map(|mut v| median(&mut v));
    Ok(GcRow {
        config,
        heap_bytes: heap,
        seconds: (d, t, l),
        collections: collections.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small heap under heavy churn: every barrier collects and keep every
    /// live node (checked by `run`: the long-lived tree is whole).
    #[test]
    fn every_barrier_collects_and_keeps_the_live_trees() {
        for barrier in [Barrier::Traps, Barrier::Dirty, Barrier::LinuxTraps] {
            let mut h = Heap::new(1 << 20, barrier).unwrap();
            let keep = h.alloc().unwrap();
            h.roots.push(keep);
            h.populate(10, keep).unwrap();
            for _ in 0..1000 {
                let t = h.make_tree(8).unwrap();
                h.set(keep, left(h.nodes, keep), t);
            }
            // The first finishes the cycle under way (whose floating garbage,
            // allocated black while it marked, survives it); the second
            // marks with the mutator stopped and leaves only live nodes.
            h.collect().unwrap();
            h.collect().unwrap();
            assert!(
                h.collections >= 3,
                "{barrier:?}: {} collections",
                h.collections
            );
            // The left subtree (depth 9) and the last tree hung on the right.
            assert_eq!(
                h.count(keep),
                1 + ((1 << 10) - 1) + ((1 << 9) - 1),
                "{barrier:?}"
            );
            let live = h.allocated.iter().filter(|&&a| a).count();
            assert_eq!(
                live as u64,
                h.count(keep),
                "{barrier:?}: garbage left after a collection"
            );
        }
    }

    /// The race the modified pages are for: the marker misses a subtree
    /// that the mutator moves under an already marked node. The race is
    /// played out by hand (the marker finishes, the subtree is unmarked as if
    /// not reached, the store is made); only the modified page of the
    /// marked node leads the stopped remark to the subtree.
    #[test]
    fn the_remark_finds_a_subtree_moved_under_a_marked_node() {
        for barrier in [Barrier::Traps, Barrier::Dirty, Barrier::LinuxTraps] {
            let mut h = Heap::new(1 << 20, barrier).unwrap();
            let keep = h.alloc().unwrap();
            h.roots.push(keep);
            h.populate(6, keep).unwrap();
            let moved = left(h.nodes, keep);
            h.start_mark().unwrap();
            h.marker.take().unwrap().join().unwrap();
            let mut stack = vec![moved];
            while let Some(n) = stack.pop() {
                h.marks[n as usize].store(false, Relaxed);
                stack.extend(
                    [left(h.nodes, n), right(h.nodes, n)]
                        .into_iter()
                        .filter(|&c| c != 0),
                );
            }
            h.set(keep, moved, right(h.nodes, keep));
            h.finish().unwrap();
            assert_eq!(
                h.count(keep),
                (1 << 7) - 1,
                "{barrier:?}: the moved subtree was kept"
            );
        }
    }
}
