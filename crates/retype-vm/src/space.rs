//! A space: the capability system of retype-core with real effect on one
//! window of this process. Every invocation is checked by retype-core first
//! (a refusal is a typed error and changes nothing); then the window is made
//! to show what the page tables now say, for the entries that changed.
//!
//! Inaccessible pages: where it can (4 KiB memory, no pager, Linux with
//! minor faults on shmem), a space makes a mapped page inaccessible by
//! removing its entries instead of by `mprotect`: the page's memory is kept
//! in the memfd's page cache, its range is registered for minor faults, and
//! any access is a SIGBUS that goes to the application's handler as a
//! SIGSEGV would. Making it accessible again maps the same pages back
//! (UFFDIO_CONTINUE). Once a range is registered (its mapping split then,
//! once), neither changes the process's mappings, where `mprotect` of one
//! page splits its mapping and merges it back: that makes a protection
//! change cheaper than Linux's (docs/reproduction-001-vm.md). An
//! inaccessible page reads dirty and accessed (its entry, which held those
//! bits, is gone): a collector rescans it, never misses it.

use std::ops::Range;
use std::sync::Arc;

use retype_core::caps::cap::MapInfo;
use retype_core::caps::system::Caps;
use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::vnode::{accepts, Slot};
use retype_core::caps::{AaTree, Boot, CapError, CapRef, Rights};
use retype_core::objects::{Arch, Config};

use crate::error::VmError;
use crate::fault::{Fault, Resolution};
use crate::memory::{Backing, Memory};
use crate::ranges::Ranges;
use crate::status::{self, Pagemap};
use crate::sync::{diff, diff_into, Action};
use crate::uffd::{self, Uffd};
use crate::walk::{self, Leaf, Tables};
use crate::window::{prot, Window};

/// The application's protection-fault handler (see [`crate::fault`]).
pub type Handler = dyn FnMut(&mut Space, &Fault) -> Resolution + Send;

/// How to build a space.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Bytes of physical memory (the memfd), a multiple of the page size.
    pub ram: u64,
    /// The root page table: its 512 entries cover the window, so an X86Pdir
    /// root gives a 1 GiB window, an X86Pdpt root 512 GiB.
    pub root: CapType,
    pub backing: Backing,
    /// Slots of the root CNode (a multiple of 256).
    pub root_slots: u32,
    /// Track dirty bits (userfaultfd write protection on every mapping).
    pub dirty_bits: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            ram: 64 << 20,
            root: CapType::X86Pdir,
            backing: Backing::Small,
            root_slots: 256,
            dirty_bits: true,
        }
    }
}

/// The capability system and the window that shows its page tables.
pub struct Space {
    caps: Caps<AaTree>,
    boot: Boot,
    root: CapRef,
    root_base: u64,
    memory: Memory,
    window: Window,
    tables: Tables,
    uffd: Option<Arc<Uffd>>,
    /// userfaultfd modes every mapped run is registered in.
    modes: u64,
    /// Inaccessible pages have no entries (see the module's text).
    hides: bool,
    /// Window ranges registered for minor faults (once made inaccessible).
    minor: Ranges,
    /// Why there are no dirty bits, when they were asked for.
    no_dirty: Option<String>,
    pagemap: Pagemap,
    pub(crate) handler: Option<Box<Handler>>,
    /// A system call failed part-way through making the window show the
    /// tables: the window was emptied, and shows them again once rebuilt.
    behind: bool,
    /// Buffers every invocation reuses, so that it allocates nothing.
    scratch: Scratch,
}

/// The leaves an invocation's ranges show before it (`ends`: where each
/// range's end), those they should show after, and the actions between.
#[derive(Default)]
struct Scratch {
    shown: Vec<Leaf>,
    ends: Vec<usize>,
    wanted: Vec<Leaf>,
    actions: Vec<Action>,
}

impl Space {
    /// Boots the capability system over `o.ram` bytes of memfd memory and
    /// makes the root table (root CNode slot 3) from the last page of RAM.
    pub(crate) fn new(o: &Options, pager: bool) -> Result<Space, VmError> {
        if !matches!(
            o.root,
            CapType::X86Ptable | CapType::X86Pdir | CapType::X86Pdpt
        ) {
            return Err(VmError::Cap(CapError::NotAPageTable(o.root)));
        }
        let memory = Memory::new(o.ram, o.backing)?;
        let (mut caps, boot) = Caps::boot(Config::new(Arch::X86_64), o.ram, o.root_slots)?;
        let root = CapRef::l1(boot.cspace, 3);
        let ram = caps.get(boot.ram)?;
        caps.retype(boot.ram, o.root, ram.size - PAGE, PAGE, 1, root)?;
        let root_base = ram.base + ram.size - PAGE;
        let len = 512 * walk::span(o.root);
        let window = Window::reserve(len as usize, len.min(1 << 30) as usize)?;
        let Userfault {
            uffd,
            modes,
            hides,
            no_dirty,
        } = Userfault::open(pager, o.dirty_bits, !pager && o.backing == Backing::Small)?;
        let mut s = Space {
            caps,
            boot,
            root,
            root_base,
            memory,
            window,
            tables: Tables::new(),
            uffd,
            modes,
            hides,
            minor: Ranges::default(),
            no_dirty,
            pagemap: Pagemap::open()?,
            handler: None,
            behind: false,
            scratch: Scratch::default(),
        };
        s.tables = walk::tables(&s.caps, root_base);
        Ok(s)
    }

    // ----- what the application reads -----

    /// The capability system (every change goes through the space).
    pub fn caps(&self) -> &Caps<AaTree> {
        &self.caps
    }

    /// The first domain's CSpace, root CNode, PhysAddr and RAM.
    pub fn boot(&self) -> Boot {
        self.boot
    }

    /// The root page table (root CNode slot 3).
    pub fn root(&self) -> CapRef {
        self.root
    }

    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The window's first byte: virtual address 0 of the page tables.
    pub fn base(&self) -> usize {
        self.window.base()
    }

    pub fn len(&self) -> u64 {
        self.window.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.window.is_empty()
    }

    /// The leaf that maps window offset `va`: what the window shows there.
    pub fn translate(&self, va: u64) -> Option<Leaf> {
        self.leaves(&(va..va + 1)).pop()
    }

    pub(crate) fn uffd(&self) -> Option<Arc<Uffd>> {
        self.uffd.clone()
    }

    /// Whether inaccessible pages are kept without entries rather than
    /// `mprotect`ed (see the module's text).
    pub fn hides(&self) -> bool {
        self.hides
    }

    /// Whether mappings are write-protected for dirty bits.
    pub(crate) fn tracks_dirty(&self) -> bool {
        self.modes & uffd::MODE_WP != 0
    }

    // ----- invocations without effect on the window -----

    /// See [`Caps::retype`].
    pub fn retype(
        &mut self,
        src: CapRef,
        ty: CapType,
        offset: u64,
        objsize: u64,
        count: u64,
        dest: CapRef,
    ) -> Result<(), VmError> {
        Ok(self.caps.retype(src, ty, offset, objsize, count, dest)?)
    }

    /// See [`Caps::mint`].
    pub fn mint(&mut self, src: CapRef, dest: CapRef, rights: Rights) -> Result<(), VmError> {
        Ok(self.caps.mint(src, dest, rights, 0)?)
    }

    /// See [`Caps::copy`].
    pub fn copy(&mut self, src: CapRef, dest: CapRef) -> Result<(), VmError> {
        Ok(self.caps.copy(src, dest)?)
    }

    // ----- invocations that change what the window shows -----

    /// Deletes `r` (see [`Caps::delete`]); mappings that go with it leave
    /// the window.
    pub fn delete(&mut self, r: CapRef) -> Result<(), VmError> {
        self.invoke(&[self.whole()], true, |c| c.delete(r))
    }

    /// Revokes `r` (see [`Caps::revoke`]): revoking a Frame removes every
    /// mapping of it from the window.
    pub fn revoke(&mut self, r: CapRef) -> Result<(), VmError> {
        self.invoke(&[self.whole()], true, |c| c.revoke(r))
    }

    /// Maps `count` entries of `table` from `entry` to `src` (a Frame's
    /// pages from `offset`, or a next-level table); see [`Caps::map`]. A
    /// frame's page size must be the memory's.
    #[allow(clippy::too_many_arguments)]
    pub fn map(
        &mut self,
        table: CapRef,
        src: CapRef,
        entry: u64,
        offset: u64,
        count: u64,
        flags: Rights,
        mapping: CapRef,
    ) -> Result<(), VmError> {
        let t = self.caps.get(table)?;
        let c = self.caps.get(src)?;
        if let Some(Slot::Pages(page)) = accepts(t.ty, c.ty) {
            if c.ty == CapType::DevFrame {
                return Err(VmError::DeviceFrame);
            }
            if page != self.memory.backing().page() {
                return Err(VmError::PageSize {
                    asked: page,
                    backing: self.memory.backing().page(),
                });
            }
        }
        let ranges = self.entry_ranges(t.base, entry, count);
        self.invoke(&ranges, c.ty.is_vnode(), |caps| {
            caps.map(table, src, entry, offset, count, flags, mapping)
        })
    }

    /// Removes `mapping` from `table` (see [`Caps::unmap`]).
    pub fn unmap(&mut self, table: CapRef, mapping: CapRef) -> Result<(), VmError> {
        let (ranges, table_moves) = match self.mapping(mapping, "unmap") {
            Ok(m) => (
                self.entry_ranges(m.ptable, m.entry as u64, m.pte_count as u64),
                m.target.is_vnode(),
            ),
            Err(_) => (Vec::new(), false),
        };
        self.invoke(&ranges, table_moves, |c| c.unmap(table, mapping))
    }

    /// Sets the flags of `pages` entries of `mapping` from its `first`
    /// (see [`Caps::modify_flags`]): `mprotect`, or entries removed and
    /// mapped back for inaccessible pages (see the module's text).
    pub fn modify_flags(
        &mut self,
        mapping: CapRef,
        first: u64,
        pages: u64,
        flags: Rights,
    ) -> Result<(), VmError> {
        let ranges = match self.mapping(mapping, "modify_flags") {
            Ok(m) => self.entry_ranges(m.ptable, m.entry as u64 + first, pages),
            Err(_) => Vec::new(),
        };
        self.invoke(&ranges, false, |c| {
            c.modify_flags(mapping, first, pages, flags)
        })
    }

    // ----- page status bits -----

    /// The dirty bits of `pages` pages of `mapping` from its `first`:
    /// written since mapped or since the last clear. With `clear`, they are
    /// reset in the same walk.
    pub fn dirty(
        &mut self,
        mapping: CapRef,
        first: u64,
        pages: u64,
        clear: bool,
    ) -> Result<Vec<bool>, VmError> {
        if !self.tracks_dirty() {
            let why = self.no_dirty.clone();
            return Err(VmError::Unsupported(why.unwrap_or_else(|| {
                "this space was made without dirty bits (Options::dirty_bits)".into()
            })));
        }
        self.status(mapping, first, pages, status::PAGE_IS_WRITTEN, clear)
    }

    /// Which of `pages` pages of `mapping` from its `first` are present in
    /// this process's page table: touched since mapped. Linux exposes no
    /// per-page accessed bit to user space (pagemap has none; idle page
    /// tracking needs CONFIG_IDLE_PAGE_TRACKING and physical frame numbers),
    /// so presence is the nearest it offers.
    pub fn accessed(
        &mut self,
        mapping: CapRef,
        first: u64,
        pages: u64,
    ) -> Result<Vec<bool>, VmError> {
        self.status(mapping, first, pages, status::PAGE_IS_PRESENT, false)
    }

    fn status(
        &mut self,
        mapping: CapRef,
        first: u64,
        pages: u64,
        category: u64,
        clear: bool,
    ) -> Result<Vec<bool>, VmError> {
        let m = self.mapping(mapping, "status bits")?;
        self.catch_up()?;
        let count = m.pte_count as u64;
        if pages == 0 || first >= count || pages > count - first {
            return Err(VmError::Cap(CapError::InvalidEntry {
                entry: first,
                count: pages,
            }));
        }
        let ty = self
            .caps
            .vnode(m.ptable)
            .expect("a live mapping's table")
            .ty;
        let s = walk::span(ty);
        let vas = self.tables.get(&m.ptable).ok_or(VmError::NotInWindow)?;
        let mut out = vec![false; pages as usize];
        for &va in vas {
            let va = va + (m.entry as u64 + first) * s;
            let start = self.base() + va as usize;
            let end = start + (pages * s) as usize;
            let found = self.pagemap.scan(start, end, category, clear)?;
            let bits = status::per_page(&found, start, s as usize, pages as usize);
            out.iter_mut().zip(bits).for_each(|(o, b)| *o |= b);
            let range = va..va + pages * s;
            if self.hides && self.minor.intersects(&range) {
                for l in self.leaves(&range) {
                    if prot(l.flags) == libc::PROT_NONE {
                        let first = (l.va.max(va) - va) / s;
                        let end = (l.va + l.size).min(range.end).div_ceil(s) - va / s;
                        out[first as usize..end as usize].fill(true);
                    }
                }
            }
        }
        Ok(out)
    }

    // ----- keeping the window in step with the tables -----

    fn mapping(&self, r: CapRef, op: &'static str) -> Result<MapInfo, VmError> {
        let c = self.caps.get(r)?;
        c.map
            .ok_or(VmError::Cap(CapError::WrongType { op, found: c.ty }))
    }

    /// The window ranges that entries `entry..entry + count` of the table
    /// at `table` cover, once for each place the table is reachable (none
    /// if it is not, or if the entries are not in the table: retype-core
    /// then refuses or changes nothing the window shows).
    fn entry_ranges(&self, table: u64, entry: u64, count: u64) -> Vec<Range<u64>> {
        let (Some(vas), Some(v)) = (self.tables.get(&table), self.caps.vnode(table)) else {
            return Vec::new();
        };
        let s = walk::span(v.ty);
        let end = (entry.saturating_add(count)).min(v.entries.len() as u64);
        vas.iter()
            .map(|va| va + entry.min(end) * s..va + end * s)
            .collect()
    }

    /// Runs the invocation `op` on the capabilities, then makes the window
    /// show what the tables say in `ranges`, which must hold every entry
    /// `op` can change: the leaves there before and after are compared, so
    /// the tables are the only record of what is mapped. `tables_move`:
    /// `op` may add or remove page tables, so where they are is read again.
    fn invoke(
        &mut self,
        ranges: &[Range<u64>],
        tables_move: bool,
        op: impl FnOnce(&mut Caps<AaTree>) -> Result<(), CapError>,
    ) -> Result<(), VmError> {
        self.catch_up()?;
        let mut s = std::mem::take(&mut self.scratch);
        let r = self.invoke_with(&mut s, ranges, tables_move, op);
        self.scratch = s;
        r
    }

    fn invoke_with(
        &mut self,
        s: &mut Scratch,
        ranges: &[Range<u64>],
        tables_move: bool,
        op: impl FnOnce(&mut Caps<AaTree>) -> Result<(), CapError>,
    ) -> Result<(), VmError> {
        s.shown.clear();
        s.ends.clear();
        for r in ranges {
            self.leaves_into(r, &mut s.shown);
            s.ends.push(s.shown.len());
        }
        op(&mut self.caps)?;
        if tables_move {
            self.tables = walk::tables(&self.caps, self.root_base);
        }
        let mut start = 0;
        for (r, &end) in ranges.iter().zip(&s.ends) {
            s.wanted.clear();
            self.leaves_into(r, &mut s.wanted);
            diff_into(&s.shown[start..end], &s.wanted, &mut s.actions);
            for &a in &s.actions {
                if let Err(e) = self.apply(a, false) {
                    return Err(self.fall_behind(e));
                }
            }
            start = end;
        }
        Ok(())
    }

    /// A window system call failed after the tables changed: part of the
    /// window may show the old tables. Empties the whole window (one
    /// `mmap` over it, which only removes mappings), so that it grants no
    /// access the tables do not, until [`Space::catch_up`] rebuilds it. If
    /// even that fails, access the tables took away might remain: abort.
    fn fall_behind(&mut self, e: VmError) -> VmError {
        if let Err(again) = self.window.clear(0, self.len()) {
            eprintln!("retype-vm: cannot empty the window after {e}: {again}; aborting");
            std::process::abort();
        }
        self.minor.clear();
        self.behind = true;
        VmError::Behind(Box::new(e))
    }

    /// Rebuilds the window from the tables if it fell behind; true if it
    /// did (the caller's access may now succeed). Every page it maps reads
    /// dirty: a collector that trusts dirty bits rescans, never misses one.
    pub(crate) fn catch_up(&mut self) -> Result<bool, VmError> {
        if !self.behind {
            return Ok(false);
        }
        for a in diff(&[], &self.leaves(&self.whole())) {
            if let Err(e) = self.apply(a, true) {
                return Err(self.fall_behind(e));
            }
        }
        self.behind = false;
        Ok(true)
    }

    /// Every window offset (delete and revoke may change any entry).
    fn whole(&self) -> Range<u64> {
        0..self.len()
    }

    fn leaves(&self, r: &Range<u64>) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.leaves_into(r, &mut out);
        out
    }

    fn leaves_into(&self, r: &Range<u64>, out: &mut Vec<Leaf>) {
        walk::leaves(&self.caps, self.root_base, 0, Rights::ALL, r, out);
    }

    /// Makes the window do `a`. A page mapped afresh reads clean (dirty
    /// bits: not written since mapped), except with `written`, when the
    /// window is rebuilt and what was written before is not known.
    fn apply(&mut self, a: Action, written: bool) -> Result<(), VmError> {
        match a {
            Action::Clear { va, len } => {
                self.window.clear(va, len)?;
                self.minor.remove(va..va + len);
                Ok(())
            }
            Action::Protect {
                va,
                len,
                phys,
                from,
                flags,
            } => {
                let none = libc::PROT_NONE;
                match (prot(from), prot(flags)) {
                    (was, now) if !self.hides || (was != none && now != none) => {
                        self.window.protect(va, len, flags)
                    }
                    (was, now) if was == now => Ok(()),
                    (was, _) if was != none => self.hide(va, len, phys, from),
                    _ => self.show(va, len, flags),
                }
            }
            Action::Map {
                va,
                len,
                phys,
                flags,
            } => {
                self.window.map(va, len, self.memory.fd(), phys, flags)?;
                self.minor.remove(va..va + len);
                if self.memory.backing() == Backing::Small {
                    self.window.base_pages_only(va, len)?;
                }
                if let Some(u) = self.uffd.as_ref().filter(|_| self.modes != 0) {
                    let at = self.base() + va as usize;
                    u.register(at, len, self.modes)?;
                    if self.tracks_dirty() && !written {
                        u.write_protect(at, len)?;
                    }
                }
                if self.hides && prot(flags) == libc::PROT_NONE {
                    return self.hide(va, len, phys, flags);
                }
                Ok(())
            }
        }
    }

    /// The userfaultfd of a space that hides inaccessible pages.
    fn hider(&self) -> Arc<Uffd> {
        self.uffd
            .clone()
            .expect("a space that hides has a userfaultfd")
    }

    /// Makes `[va, va + len)`, which shows `phys` with protection `was`,
    /// inaccessible by removing its entries. In this order, no step grants
    /// an access: minor faults are registered, the memory is made resident
    /// (an entry-less page not in the page cache would be a fresh page the
    /// kernel maps without asking), the entries go, and only then may the
    /// mapping's protection widen to read-write, the protection every
    /// inaccessible page keeps so that showing it again is one call.
    fn hide(&mut self, va: u64, len: u64, phys: u64, was: Rights) -> Result<(), VmError> {
        let u = self.hider();
        if !self.minor.covers(&(va..va + len)) {
            u.register(
                self.base() + va as usize,
                len,
                self.modes | uffd::MODE_MINOR,
            )?;
            self.minor.insert(va..va + len);
        }
        self.memory.populate(phys, len)?;
        self.window.drop_entries(va, len)?;
        if prot(was) != prot(Rights::RW) {
            self.window.protect(va, len, Rights::RW)?;
        }
        Ok(())
    }

    /// Makes hidden `[va, va + len)` show its pages with `flags`: the
    /// protection first (narrowing from read-write), then the entries.
    fn show(&mut self, va: u64, len: u64, flags: Rights) -> Result<(), VmError> {
        if prot(flags) != prot(Rights::RW) {
            self.window.protect(va, len, flags)?;
        }
        let u = self.hider();
        u.continue_pages(self.base() + va as usize, len)
    }

    /// A SIGBUS at window offset `va` where the tables allow access: the
    /// page's entry went (the kernel reclaimed it) after it was hidden once.
    /// Maps it back; true if the access may run again.
    pub(crate) fn refill(&mut self, va: u64) -> bool {
        if !self.hides {
            return false;
        }
        // The invocations' buffer: a fault allocates nothing.
        let mut leaf = std::mem::take(&mut self.scratch.wanted);
        leaf.clear();
        self.leaves_into(&(va..va + 1), &mut leaf);
        let shown = leaf
            .first()
            .is_some_and(|l| prot(l.flags) != libc::PROT_NONE);
        self.scratch.wanted = leaf;
        if !shown {
            return false;
        }
        let page = self.base() + (va - va % PAGE) as usize;
        let u = self.hider();
        u.continue_pages(page, PAGE).is_ok()
    }
}

/// The userfaultfd for a pager, dirty bits and hidden pages.
struct Userfault {
    uffd: Option<Arc<Uffd>>,
    /// The modes to register mappings in.
    modes: u64,
    hides: bool,
    /// Why dirty bits are missing, when they were asked for.
    no_dirty: Option<String>,
}

impl Userfault {
    /// Dirty bits need Linux 6.7 (asynchronous write protection), hidden
    /// pages minor faults on shmem: what the kernel refuses is done
    /// without (inaccessible pages by `mprotect`); a pager must work.
    fn open(pager: bool, dirty: bool, hide: bool) -> Result<Userfault, VmError> {
        let missing = if pager { uffd::MODE_MISSING } else { 0 };
        let mut no_dirty = None;
        let mut refused = None;
        for (d, h) in [(dirty, hide), (dirty, false), (false, false)] {
            if !pager && !d && !h {
                break;
            }
            match Uffd::open(pager, d, h) {
                Ok(u) => {
                    return Ok(Userfault {
                        uffd: Some(Arc::new(u)),
                        modes: missing | if d { uffd::MODE_WP } else { 0 },
                        hides: h,
                        no_dirty,
                    })
                }
                Err(e) => {
                    if d && !h {
                        no_dirty = Some(e.to_string());
                    }
                    refused = Some(e);
                }
            }
        }
        match refused {
            Some(e) if pager => Err(e),
            _ => Ok(Userfault {
                uffd: None,
                modes: 0,
                hides: false,
                no_dirty,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use retype_core::caps::types::{CapType, PAGE};
    use retype_core::caps::{CapRef, Rights};

    use super::Options;
    use crate::error::VmError;
    use crate::probe::Probe;
    use crate::vm::Vm;
    use crate::window::fail_in;

    const PAGES: usize = 4;

    /// A space whose PT (root entry 0) maps a frame of four pages read-write
    /// at entries 0..4, page `i` holding `i + 1`: (space, frame, mapping).
    fn mapped() -> (Vm, CapRef, CapRef) {
        let vm = Vm::new(Options {
            ram: 16 << 20,
            ..Options::default()
        })
        .unwrap();
        let b = vm.boot();
        let slot = |i| CapRef::l1(b.cspace, i);
        {
            let mut s = vm.lock();
            s.retype(b.ram, CapType::X86Ptable, 8 << 20, PAGE, 1, slot(4))
                .unwrap();
            let root = s.root();
            s.map(root, slot(4), 0, 0, 1, Rights::RW, slot(5)).unwrap();
            let pages = PAGES as u64;
            s.retype(b.ram, CapType::Frame, 0, pages * PAGE, 1, slot(10))
                .unwrap();
            s.map(slot(4), slot(10), 0, 0, pages, Rights::RW, slot(11))
                .unwrap();
        }
        let p = Probe::new().unwrap();
        for i in 0..PAGES {
            assert!(p.write(page(&vm, i), i as u64 + 1));
        }
        (vm, slot(10), slot(11))
    }

    fn page(vm: &Vm, i: usize) -> usize {
        vm.base() + i * PAGE as usize
    }

    /// What the window lets each page do: (the value read, writable).
    fn shown(vm: &Vm) -> Vec<(Option<u64>, bool)> {
        let p = Probe::new().unwrap();
        (0..PAGES)
            .map(|i| {
                let v = p.read(page(vm, i));
                (v, v.is_some_and(|v| p.write(page(vm, i), v)))
            })
            .collect()
    }

    /// The window fails part-way: the invocation says so, the window grants
    /// nothing until the next invocation rebuilds it as the tables say, and
    /// the memory kept what was written.
    #[test]
    fn a_failed_system_call_empties_the_window_until_it_is_rebuilt() {
        let (vm, _, m) = mapped();
        vm.lock().modify_flags(m, 1, 2, Rights::READ).unwrap();
        fail_in(1);
        let e = vm.lock().modify_flags(m, 0, 1, Rights::NONE).unwrap_err();
        fail_in(0);
        assert!(matches!(e, VmError::Behind(_)), "{e}");
        assert!(e.to_string().contains("ENOMEM") || e.to_string().contains("memory"));
        assert!(shown(&vm).iter().all(|&s| s == (None, false)), "emptied");
        vm.lock().modify_flags(m, 3, 1, Rights::READ).unwrap();
        let want = [
            (None, false),
            (Some(2), false),
            (Some(3), false),
            (Some(4), false),
        ];
        assert_eq!(shown(&vm), want, "rebuilt as the tables say");
    }

    /// A revoke whose window call fails still takes every access away.
    #[test]
    fn a_revoke_that_fails_part_way_leaves_no_access() {
        let (vm, f, _) = mapped();
        fail_in(1);
        let e = vm.lock().revoke(f);
        fail_in(0);
        assert!(matches!(e, Err(VmError::Behind(_))), "{e:?}");
        assert!(shown(&vm).iter().all(|&s| s == (None, false)));
        vm.lock().catch_up().unwrap();
        assert!(
            shown(&vm).iter().all(|&s| s == (None, false)),
            "still revoked"
        );
    }

    /// A fault in a window that fell behind rebuilds it, and the access
    /// resumes as if nothing had failed.
    #[test]
    fn a_fault_rebuilds_a_window_that_fell_behind() {
        let (vm, _, m) = mapped();
        fail_in(1);
        let e = vm.lock().modify_flags(m, 2, 1, Rights::READ);
        fail_in(0);
        assert!(matches!(e, Err(VmError::Behind(_))), "{e:?}");
        // SAFETY: page 1 is mapped read-write by the tables; the window, now
        // empty, faults and the space's fault handler rebuilds it.
        let v = unsafe { (page(&vm, 1) as *const u64).read_volatile() };
        assert_eq!(v, 2);
        assert_eq!(shown(&vm)[2], (Some(3), false), "page 2 read-only");
    }
}
