//! Virtual regions over a space (seed 001 §3.5.3; Barrelfish's `vregion`
//! and the `vspace` that holds them): a region is a range of the window
//! with its flags and the memory object that backs it ([`Memobj`]). As in
//! Barrelfish they sit on shadow page tables ([`Shadow`]), the record of
//! what is mapped, with the capabilities behind each mapping. The
//! regions take a part of the window that the application leaves to them,
//! make the page tables under it, and own the space's fault handler: a
//! fault in a region asks its memory object for the page and maps it, the
//! access then runs again; a fault anywhere else is fatal, as without a
//! handler. Mapping, unmapping and protecting are per region; unmapping
//! frees the frames the region's object made.
//!
//! Every call takes the space ([`Space`], locked): the fault handler runs
//! with it locked too, and then takes the regions, so both go in the same
//! order.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapError, CapRef, Rights};

use crate::error::VmError;
use crate::fault::{Fault, Resolution};
use crate::frames::Frames;
use crate::memobj::{Memobj, Source};
use crate::memory::Backing;
use crate::shadow::{Entry, Kind, Shadow};
use crate::space::Space;
use crate::vm::Vm;
use crate::walk;

/// A mapped region: where it is in the window and in the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vregion {
    /// Window offset of its first byte.
    pub va: u64,
    pub size: u64,
    /// Its first byte in the process.
    pub addr: usize,
}

/// The regions of one space, shared with its fault handler.
pub struct Vregions {
    state: Arc<Mutex<State>>,
    base: usize,
}

struct State {
    /// The window offsets left to the regions.
    range: Range<u64>,
    frames: Frames,
    regions: BTreeMap<u64, Region>,
    /// What the regions have mapped.
    shadow: Shadow,
    /// The page tables made so far, by the bytes one of their entries
    /// covers and the window offset they start at; kept for later regions.
    tables: BTreeMap<(u64, u64), CapRef>,
}

struct Region {
    size: u64,
    flags: Rights,
    memobj: Memobj,
}

impl Vregions {
    /// Regions in the window offsets `range` of `vm`, their frames and page
    /// tables made from the bytes `ram` of the space's RAM capability (from
    /// its start) in the root CNode `slots`; none of these may be used by
    /// anything else. Installs the space's fault handler.
    pub fn new(
        vm: &Vm,
        range: Range<u64>,
        ram: Range<u64>,
        slots: Range<u32>,
    ) -> Result<Vregions, VmError> {
        let frames = {
            let s = vm.lock();
            if s.memory().backing() != Backing::Small {
                return Err(VmError::PageSize {
                    asked: PAGE,
                    backing: s.memory().backing().page(),
                });
            }
            let aligned = range.start.is_multiple_of(PAGE) && range.end.is_multiple_of(PAGE);
            if !aligned || range.start > range.end || range.end > s.len() {
                return Err(VmError::NotInWindow);
            }
            Frames::new(&s, s.boot().ram, ram, slots)?
        };
        let levels = (1..).find(|l| 12 + 9 * l >= 64 || range.end <= 1 << (12 + 9 * l));
        let state = Arc::new(Mutex::new(State {
            range,
            frames,
            regions: BTreeMap::new(),
            shadow: Shadow::new(Kind::Array, levels.expect("some level count reaches")),
            tables: BTreeMap::new(),
        }));
        let handler = state.clone();
        vm.on_fault(move |s, f| lock(&handler).fault(s, f));
        Ok(Vregions {
            state,
            base: vm.base(),
        })
    }

    /// Maps a region of `bytes` (whole pages) with `flags`, backed by
    /// `memobj`, at the first free place: pinned memory now, the others on
    /// first touch.
    pub fn map(
        &self,
        s: &mut Space,
        bytes: u64,
        flags: Rights,
        memobj: Memobj,
    ) -> Result<Vregion, VmError> {
        if bytes == 0 || !bytes.is_multiple_of(PAGE) {
            return Err(VmError::Cap(CapError::InvalidSize { size: bytes }));
        }
        let mut st = lock(&self.state);
        let va = st.place(bytes).ok_or(VmError::Exhausted("address space"))?;
        st.regions.insert(
            va,
            Region {
                size: bytes,
                flags,
                memobj,
            },
        );
        if memobj == Memobj::Pinned {
            if let Err(e) = st.pin(s, va) {
                st.unmap(s, va)?;
                return Err(e);
            }
        }
        Ok(Vregion {
            va,
            size: bytes,
            addr: self.base + va as usize,
        })
    }

    /// Unmaps `r`, deleting its mappings and the frames its object made.
    pub fn unmap(&self, s: &mut Space, r: Vregion) -> Result<(), VmError> {
        lock(&self.state).unmap(s, r.va)
    }

    /// Sets `r`'s flags: of its mapped pages now, of the others when they
    /// are touched.
    pub fn protect(&self, s: &mut Space, r: Vregion, flags: Rights) -> Result<(), VmError> {
        let mut st = lock(&self.state);
        let region = st.regions.get_mut(&r.va).ok_or(VmError::NoRegion(r.va))?;
        region.flags = flags;
        for (va, mut e) in st.mapped(r.va) {
            s.modify_flags(e.mapping, 0, e.pages as u64, flags)?;
            e.rights = flags;
            st.shadow.remove(va);
            st.shadow.insert(va, e).expect("where it was");
        }
        Ok(())
    }

    /// The pages of `r` that are mapped (touched, or pinned).
    pub fn resident(&self, r: Vregion) -> Result<u64, VmError> {
        let st = lock(&self.state);
        st.regions.get(&r.va).ok_or(VmError::NoRegion(r.va))?;
        Ok(st.mapped(r.va).iter().map(|(_, e)| e.pages as u64).sum())
    }

    /// Bytes of RAM left for frames and page tables.
    pub fn free_bytes(&self) -> u64 {
        lock(&self.state).frames.free_bytes()
    }
}

/// The regions, also from a fault handler whose thread panicked before.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The table type one level below `ty`.
fn below(ty: CapType) -> CapType {
    match ty {
        CapType::X86Pdpt => CapType::X86Pdir,
        _ => CapType::X86Ptable,
    }
}

impl State {
    /// The first free window offset with room for `bytes` (first fit).
    fn place(&self, bytes: u64) -> Option<u64> {
        let mut at = self.range.start;
        for (&va, r) in &self.regions {
            if va - at >= bytes {
                break;
            }
            at = va + r.size;
        }
        (self.range.end - at >= bytes).then_some(at)
    }

    /// The mappings of the region at `base`, by first page's offset.
    fn mapped(&self, base: u64) -> Vec<(u64, Entry)> {
        let end = base + self.regions[&base].size;
        let vas = self.shadow.mappings().into_iter().map(|(va, _)| va);
        vas.filter(|va| (base..end).contains(va))
            .map(|va| (va, *self.shadow.lookup(va).expect("recorded").1))
            .collect()
    }

    /// The region holding window offset `va`, with its start.
    fn region_at(&self, va: u64) -> Option<(u64, &Region)> {
        let (&base, r) = self.regions.range(..=va).next_back()?;
        (va - base < r.size).then_some((base, r))
    }

    /// The leaf page table covering `va`, made (with those above it) if
    /// missing; and its first window offset.
    fn table_for(&mut self, s: &mut Space, va: u64) -> Result<(CapRef, u64), VmError> {
        let mut table = s.root();
        let mut ty = s.caps().get(table)?.ty;
        let mut base = 0;
        while ty != CapType::X86Ptable {
            let span = walk::span(ty);
            let entry = (va - base) / span;
            base += entry * span;
            let child = below(ty);
            table = match self.tables.get(&(span, base)) {
                Some(&t) => t,
                None => {
                    let t = self.frames.make(s, child, 1)?;
                    self.map_into(s, table, entry, t, 0, 1, Rights::RW)
                        .inspect_err(|_| {
                            let _ = self.frames.destroy(s, t);
                        })?;
                    self.tables.insert((span, base), t);
                    t
                }
            };
            ty = child;
        }
        Ok((table, base))
    }

    /// Maps `pages` pages of `src` from `offset` at `entry` of `table`
    /// through a mapping capability in a slot of its own, which it returns.
    #[allow(clippy::too_many_arguments)]
    fn map_into(
        &mut self,
        s: &mut Space,
        table: CapRef,
        entry: u64,
        src: CapRef,
        offset: u64,
        pages: u64,
        flags: Rights,
    ) -> Result<CapRef, VmError> {
        let m = self.frames.slot()?;
        s.map(table, src, entry, offset, pages, flags, m)
            .inspect_err(|_| self.frames.free_slot(m))?;
        Ok(m)
    }

    /// Maps `pages` pages at `va` (inside one leaf table) of `frame` from
    /// `offset`, with the flags of the region at `base`, and records it.
    fn map_run(
        &mut self,
        s: &mut Space,
        base: u64,
        va: u64,
        pages: u64,
        frame: CapRef,
        offset: u64,
    ) -> Result<(), VmError> {
        let rights = self.regions[&base].flags;
        let (table, table_va) = self.table_for(s, va)?;
        let mapping = self.map_into(
            s,
            table,
            (va - table_va) / PAGE,
            frame,
            offset,
            pages,
            rights,
        )?;
        let e = Entry {
            mapping,
            frame,
            offset,
            pages: pages as u16,
            rights,
        };
        self.shadow.insert(va, e).expect("a page no mapping holds");
        Ok(())
    }

    /// A frame of `pages` zeroed pages, made for a region.
    fn fresh(&mut self, s: &mut Space, pages: u64) -> Result<CapRef, VmError> {
        let f = self.frames.make(s, CapType::Frame, pages)?;
        let phys = s.caps().get(f)?.base;
        if let Err(e) = s.memory().write(phys, &vec![0; (pages * PAGE) as usize]) {
            self.frames.destroy(s, f)?;
            return Err(e);
        }
        Ok(f)
    }

    /// Makes and maps the frames of the pinned region at `base`, a frame
    /// per leaf table it crosses.
    fn pin(&mut self, s: &mut Space, base: u64) -> Result<(), VmError> {
        let end = base + self.regions[&base].size;
        let leaf = 512 * PAGE;
        let mut va = base;
        while va < end {
            let pages = (((va / leaf + 1) * leaf).min(end) - va) / PAGE;
            let f = self.fresh(s, pages)?;
            self.map_run(s, base, va, pages, f, 0)
                .or_else(|e| self.frames.destroy(s, f).and(Err(e)))?;
            va += pages * PAGE;
        }
        Ok(())
    }

    /// Removes the region at `va`: its mappings, and the frames it made.
    fn unmap(&mut self, s: &mut Space, va: u64) -> Result<(), VmError> {
        if !self.regions.contains_key(&va) {
            return Err(VmError::NoRegion(va));
        }
        // The object's own frames go with the region; an application's stays.
        let owned = !matches!(self.regions[&va].memobj, Memobj::OneFrame { .. });
        for (at, e) in self.mapped(va) {
            s.delete(e.mapping)?;
            self.shadow.remove(at);
            self.frames.free_slot(e.mapping);
            if owned {
                self.frames.destroy(s, e.frame)?;
            }
        }
        self.regions.remove(&va);
        Ok(())
    }

    /// A fault at `f`: the page comes from the region's memory object if
    /// the region allows the access and the page is not there yet (a fault
    /// on a mapped page is a protection fault, not the object's to solve).
    fn fault(&mut self, s: &mut Space, f: &Fault) -> Resolution {
        let Some((base, r)) = self.region_at(f.va) else {
            return Resolution::Fail;
        };
        let page = (f.va - base) / PAGE;
        let need = if f.write { Rights::WRITE } else { Rights::READ };
        if !r.flags.contains(need) || self.shadow.lookup(f.va).is_some() {
            return Resolution::Fail;
        }
        let va = base + page * PAGE;
        let done = match r.memobj.page(page * PAGE) {
            Source::Fresh => self.fresh(s, 1).and_then(|frame| {
                self.map_run(s, base, va, 1, frame, 0)
                    .or_else(|e| self.frames.destroy(s, frame).and(Err(e)))
            }),
            Source::Borrowed { frame, offset } => self.map_run(s, base, va, 1, frame, offset),
            Source::None => return Resolution::Fail,
        };
        match done {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    }
}
