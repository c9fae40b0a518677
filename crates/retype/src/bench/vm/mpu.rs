//! Seed 001 §3.6.2 (Figure 3.3): map, protect and unmap a whole buffer,
//! time per page, through capabilities against raw Linux in the same run,
//! alternated round by round: `mmap` of a memfd, `mprotect`, `munmap`, and
//! System V shared memory (`shmat`, `mprotect`, `shmdt`), the thesis's two
//! Linux lines; and Figure 2.3's other two Linux facilities: anonymous
//! memory mapped with `MAP_POPULATE` (the kernel zeroes and maps every page
//! at once) and a POSIX shared memory object (`shm_open`, then `mmap`),
//! which cannot take huge pages.
//!
//! Ours: the frame and the page tables are made beforehand (as Barrelfish
//! maps "a previously allocated frame"); one `map`, `modify_flags` and
//! `unmap` invocation per leaf page table (512 entries at most). Both sides
//! are lazy as Linux is: no page is touched, so no page-table entry of the
//! real MMU is written by either.

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};

use super::{median, timed};
use retype_vm::memory::{Backing, Memory};
use retype_vm::VmError;
use retype_vm::{Options, Space, Vm};

/// One buffer size: median nanoseconds per page of each operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub bytes: u64,
    pub page: u64,
    pub rounds: u32,
    /// map, protect, unmap: (ours, Linux).
    pub map: (f64, f64),
    pub protect: (f64, f64),
    pub unmap: (f64, f64),
    /// Linux through System V shared memory: shmat, mprotect, shmdt.
    pub shm: (f64, f64, f64),
    /// Linux, `mmap(MAP_POPULATE)` of anonymous memory, `mprotect`,
    /// `munmap` (none above [`POPULATE_MAX`]: it takes the memory).
    pub populate: Option<(f64, f64, f64)>,
    /// Linux, `mmap` of a `shm_open` object, `mprotect`, `munmap` (4 KiB
    /// pages only).
    pub shm_open: Option<(f64, f64, f64)>,
}

/// The largest buffer mapped with `MAP_POPULATE`, which allocates and
/// zeroes it: 1 GiB, on a machine shared with others.
pub const POPULATE_MAX: u64 = 1 << 30;

impl Row {
    pub fn pages(&self) -> u64 {
        self.bytes / self.page
    }

    /// One JSON object (the keys are the interface).
    pub fn json(&self) -> String {
        let op = |name: &str, (ours, linux): (f64, f64)| {
            format!("\"{name}_ns_per_page\":{ours:.2},\"linux_{name}_ns_per_page\":{linux:.2}")
        };
        let (shmat, shm_protect, shmdt) = self.shm;
        let three = |name: &str, v: Option<(f64, f64, f64)>| {
            let f = |x: Option<f64>| x.map_or("null".into(), |x| format!("{x:.2}"));
            format!(
                "\"{name}_map_ns_per_page\":{},\"{name}_protect_ns_per_page\":{},\"{name}_unmap_ns_per_page\":{}",
                f(v.map(|v| v.0)),
                f(v.map(|v| v.1)),
                f(v.map(|v| v.2))
            )
        };
        format!(
            "{{\"bytes\":{},\"page_kib\":{},\"pages\":{},\"rounds\":{},{},{},{},\"shm_map_ns_per_page\":{shmat:.2},\"shm_protect_ns_per_page\":{shm_protect:.2},\"shm_unmap_ns_per_page\":{shmdt:.2},{},{}}}",
            self.bytes,
            self.page >> 10,
            self.pages(),
            self.rounds,
            op("map", self.map),
            op("protect", self.protect),
            op("unmap", self.unmap),
            three("populate", self.populate),
            three("shm_open", self.shm_open)
        )
    }
}

/// The buffer as leaf tables and their mapping slots.
pub(crate) struct Ours {
    pub(crate) vm: Vm,
    frame: CapRef,
    /// (leaf table, its mapping slot, pages it maps, offset in the frame).
    leaves: Vec<(CapRef, CapRef, u64, u64)>,
}

impl Ours {
    /// A space with root PDPT, a `bytes` frame at physical 0 and the tables
    /// to map it with `backing`'s pages, all mapped except the frame.
    pub(crate) fn new(bytes: u64, backing: Backing) -> Result<Ours, VmError> {
        let page = backing.page();
        // The leaf tables: PTs under PDs (4 KiB pages), PDs (2 MiB), or
        // the root PDPT itself (1 GiB pages), each entry one page.
        let leaf_span = 512 * page;
        let nleaf = bytes.div_ceil(leaf_span);
        let npd = bytes.div_ceil(1 << 30);
        let tables = match backing {
            Backing::Small => nleaf + npd,
            Backing::Huge2M => nleaf,
            Backing::Huge1G => 0,
        };
        let slots = (8 + 3 * tables as u32).next_multiple_of(256);
        let extra = (tables + 1) * PAGE + slots as u64 * 64;
        let o = Options {
            ram: (bytes + extra).next_multiple_of(page),
            root: CapType::X86Pdpt,
            backing,
            root_slots: slots,
            dirty_bits: false,
        };
        let vm = Vm::new(o)?;
        let mut space = vm.lock();
        let b = vm.boot();
        let slot = |i: u64| CapRef::l1(b.cspace, i as u32);
        let frame = slot(4);
        space.retype(b.ram, CapType::Frame, 0, bytes, 1, frame)?;
        let mut next = 5u64;
        let mut table = |space: &mut Space, ty, parent: CapRef, entry| {
            let (t, m) = (slot(next), slot(next + 1));
            let off = bytes.next_multiple_of(page) + (next - 5) / 2 * PAGE;
            next += 2;
            space.retype(b.ram, ty, off, PAGE, 1, t)?;
            space.map(parent, t, entry, 0, 1, Rights::RW, m)?;
            Ok::<CapRef, VmError>(t)
        };
        let root = space.root();
        let mut pds = Vec::new();
        if page == PAGE {
            for j in 0..npd {
                pds.push(table(&mut space, CapType::X86Pdir, root, j)?);
            }
        }
        let mut leaves = Vec::new();
        for i in 0..nleaf {
            let t = match backing {
                Backing::Small => table(
                    &mut space,
                    CapType::X86Ptable,
                    pds[(i / 512) as usize],
                    i % 512,
                )?,
                Backing::Huge2M => table(&mut space, CapType::X86Pdir, root, i)?,
                Backing::Huge1G => root,
            };
            let n = ((bytes - i * leaf_span) / page).min(512);
            leaves.push((t, CapRef::l1(b.cspace, 0), n, i * leaf_span));
        }
        for (k, l) in leaves.iter_mut().enumerate() {
            l.1 = slot(next + k as u64);
        }
        drop(space);
        Ok(Ours { vm, frame, leaves })
    }

    pub(crate) fn map(&mut self) -> Result<(), VmError> {
        let mut space = self.vm.lock();
        for &(t, m, n, off) in &self.leaves {
            space.map(t, self.frame, 0, off, n, Rights::RW, m)?;
        }
        Ok(())
    }

    fn protect(&mut self) -> Result<(), VmError> {
        let mut space = self.vm.lock();
        for &(_, m, n, _) in &self.leaves {
            space.modify_flags(m, 0, n, Rights::READ)?;
        }
        Ok(())
    }

    fn unmap(&mut self) -> Result<(), VmError> {
        let mut space = self.vm.lock();
        for &(t, m, _, _) in &self.leaves {
            space.unmap(t, m)?;
        }
        Ok(())
    }
}

/// Raw Linux on a memfd of the same pages.
pub(crate) struct Linux {
    memory: Memory,
    pub(crate) at: *mut libc::c_void,
    bytes: usize,
}

impl Linux {
    pub(crate) fn new(bytes: u64, backing: Backing) -> Result<Linux, VmError> {
        Ok(Linux {
            memory: Memory::new(bytes, backing)?,
            at: std::ptr::null_mut(),
            bytes: bytes as usize,
        })
    }

    pub(crate) fn map(&mut self) -> Result<(), VmError> {
        use std::os::fd::AsRawFd;
        let p = map_shared(self.memory.fd().as_raw_fd(), self.bytes)?;
        self.at = p;
        base_pages_if_small(p, self.bytes, self.memory.backing())
    }

    fn protect(&mut self) -> Result<(), VmError> {
        read_only(self.at, self.bytes)
    }

    pub(crate) fn unmap(&mut self) -> Result<(), VmError> {
        unmap(self.at, self.bytes)
    }
}

/// `munmap` of a whole Linux-side mapping, made by its `map` and borrowed by nothing.
fn unmap(at: *mut libc::c_void, bytes: usize) -> Result<(), VmError> {
    // SAFETY: a mapping of ours, `bytes` long, which nothing borrows.
    if unsafe { libc::munmap(at, bytes) } != 0 {
        return Err(VmError::os("munmap"));
    }
    Ok(())
}

/// `mprotect(PROT_READ)` of a whole Linux-side buffer.
fn read_only(at: *mut libc::c_void, bytes: usize) -> Result<(), VmError> {
    // SAFETY: a mapping or attachment of ours, `bytes` long.
    if unsafe { libc::mprotect(at, bytes, libc::PROT_READ) } != 0 {
        return Err(VmError::os("mprotect"));
    }
    Ok(())
}

/// Keeps a Linux-side buffer of 4 KiB memory on base pages, as ours is.
fn base_pages_if_small(
    at: *mut libc::c_void,
    bytes: usize,
    backing: Backing,
) -> Result<(), VmError> {
    if backing == Backing::Small {
        no_huge_pages(at as usize, bytes)?;
    }
    Ok(())
}

/// `madvise(MADV_NOHUGEPAGE)` over the Linux-side mapping at `at`.
fn no_huge_pages(at: usize, len: usize) -> Result<(), VmError> {
    // SAFETY: changes only the huge-page policy of pages, never their contents.
    if unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE) } != 0 {
        return Err(VmError::os("madvise"));
    }
    Ok(())
}

/// Raw Linux through a System V shared memory segment of the same pages.
struct Shm {
    id: libc::c_int,
    at: *mut libc::c_void,
    bytes: usize,
    backing: Backing,
}

impl Shm {
    fn new(bytes: u64, backing: Backing) -> Result<Shm, VmError> {
        // SHM_HUGE_SHIFT: the page size's log2, as for memfd and mmap.
        let flags = match backing {
            Backing::Small => 0,
            _ => libc::SHM_HUGETLB | ((backing.page().trailing_zeros() as libc::c_int) << 26),
        };
        // SAFETY: a fresh private segment; the result is checked.
        let id = unsafe {
            libc::shmget(
                libc::IPC_PRIVATE,
                bytes as usize,
                libc::IPC_CREAT | 0o600 | flags,
            )
        };
        if id < 0 {
            return Err(VmError::os("shmget"));
        }
        Ok(Shm {
            id,
            at: std::ptr::null_mut(),
            bytes: bytes as usize,
            backing,
        })
    }

    fn map(&mut self) -> Result<(), VmError> {
        // SAFETY: attaches our segment where the kernel chooses.
        let p = unsafe { libc::shmat(self.id, std::ptr::null(), 0) };
        if p as isize == -1 {
            return Err(VmError::os("shmat"));
        }
        self.at = p;
        base_pages_if_small(p, self.bytes, self.backing)
    }

    fn protect(&mut self) -> Result<(), VmError> {
        read_only(self.at, self.bytes)
    }

    fn unmap(&mut self) -> Result<(), VmError> {
        // SAFETY: the attachment made by `map`, which nothing borrows.
        if unsafe { libc::shmdt(self.at) } != 0 {
            return Err(VmError::os("shmdt"));
        }
        Ok(())
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: removes our own segment (detached: the last round unmapped it).
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// Raw Linux, Figure 2.3's "MMAP": anonymous memory that `mmap` with
/// `MAP_POPULATE` allocates, zeroes and maps at once (hugetlb pages for
/// 2 MiB; for 4 KiB none unless THP is "always": this machine's is
/// "madvise").
struct Populate {
    at: *mut libc::c_void,
    bytes: usize,
    backing: Backing,
}

impl Populate {
    fn map(&mut self) -> Result<(), VmError> {
        let huge = match self.backing {
            Backing::Small => 0,
            b => libc::MAP_HUGETLB | ((b.page().trailing_zeros() as libc::c_int) << 26),
        };
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | huge;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh anonymous mapping where the kernel chooses.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), self.bytes, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap(MAP_POPULATE)"));
        }
        self.at = p;
        Ok(())
    }

    fn protect(&mut self) -> Result<(), VmError> {
        read_only(self.at, self.bytes)
    }

    fn unmap(&mut self) -> Result<(), VmError> {
        unmap(self.at, self.bytes)
    }
}

/// Raw Linux, Figure 2.3's "SHM": a POSIX shared memory object
/// (`shm_open`, unlinked at once, its descriptor kept) mapped with `mmap`.
struct ShmOpen {
    fd: std::os::fd::OwnedFd,
    at: *mut libc::c_void,
    bytes: usize,
}

impl ShmOpen {
    fn new(bytes: u64) -> Result<ShmOpen, VmError> {
        use std::os::fd::FromRawFd;
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = std::ffi::CString::new(format!("/retype-vm-{}-{n}", std::process::id()))
            .expect("no NUL in the name");
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the result is checked.
        let fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        if fd < 0 {
            return Err(VmError::os("shm_open"));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: removes the name just made; the object lives on in `fd`.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        use std::os::fd::AsRawFd;
        // SAFETY: a descriptor we own and a non-negative length.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
            return Err(VmError::os("ftruncate"));
        }
        Ok(ShmOpen {
            fd,
            at: std::ptr::null_mut(),
            bytes: bytes as usize,
        })
    }

    fn map(&mut self) -> Result<(), VmError> {
        use std::os::fd::AsRawFd;
        let p = map_shared(self.fd.as_raw_fd(), self.bytes)?;
        self.at = p;
        no_huge_pages(p as usize, self.bytes)
    }

    fn protect(&mut self) -> Result<(), VmError> {
        read_only(self.at, self.bytes)
    }

    fn unmap(&mut self) -> Result<(), VmError> {
        unmap(self.at, self.bytes)
    }
}

/// Maps, protects and unmaps a `bytes` buffer of `backing` pages `rounds`
/// times each way: ours, Linux's `mmap`, its `shmat`, `MAP_POPULATE` (up
/// to [`POPULATE_MAX`]) and `shm_open` (4 KiB pages) in every round.
pub fn map_protect_unmap(bytes: u64, backing: Backing, rounds: u32) -> Result<Row, VmError> {
    let page = backing.page();
    if bytes == 0 || !bytes.is_multiple_of(page) || rounds == 0 {
        return Err(VmError::PageSize {
            asked: bytes,
            backing: page,
        });
    }
    let mut ours = Ours::new(bytes, backing)?;
    let mut linux = Linux::new(bytes, backing)?;
    let mut shm = Shm::new(bytes, backing)?;
    let mut populate = (bytes <= POPULATE_MAX).then_some(Populate {
        at: std::ptr::null_mut(),
        bytes: bytes as usize,
        backing,
    });
    let mut shm_open = match backing {
        Backing::Small => Some(ShmOpen::new(bytes)?),
        _ => None,
    };
    let mut t: [Vec<f64>; 15] = Default::default();
    for _ in 0..rounds {
        t[0].push(timed(|| ours.map())?);
        t[1].push(timed(|| ours.protect())?);
        t[2].push(timed(|| ours.unmap())?);
        t[3].push(timed(|| linux.map())?);
        t[4].push(timed(|| linux.protect())?);
        t[5].push(timed(|| linux.unmap())?);
        t[6].push(timed(|| shm.map())?);
        t[7].push(timed(|| shm.protect())?);
        t[8].push(timed(|| shm.unmap())?);
        if let Some(p) = populate.as_mut() {
            t[9].push(timed(|| p.map())?);
            t[10].push(timed(|| p.protect())?);
            t[11].push(timed(|| p.unmap())?);
        }
        if let Some(s) = shm_open.as_mut() {
            t[12].push(timed(|| s.map())?);
            t[13].push(timed(|| s.protect())?);
            t[14].push(timed(|| s.unmap())?);
        }
    }
    let pages = (bytes / page) as f64;
    let per = t.map(|mut v| {
        if v.is_empty() {
            f64::NAN
        } else {
            median(&mut v) / pages
        }
    });
    Ok(Row {
        bytes,
        page,
        rounds,
        map: (per[0], per[3]),
        protect: (per[1], per[4]),
        unmap: (per[2], per[5]),
        shm: (per[6], per[7], per[8]),
        populate: populate.map(|_| (per[9], per[10], per[11])),
        shm_open: shm_open.map(|_| (per[12], per[13], per[14])),
    })
}

/// A fresh read-write shared mapping of `bytes` of the object behind `fd`,
/// where the kernel chooses.
fn map_shared(fd: libc::c_int, bytes: usize) -> Result<*mut libc::c_void, VmError> {
    // SAFETY: a fresh shared mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(VmError::os("mmap"));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `[at, at + bytes)` in memory (`mincore`).
    fn resident(at: *mut libc::c_void, bytes: usize) -> usize {
        let mut v = vec![0u8; bytes.div_ceil(PAGE as usize)];
        // SAFETY: a mapping of ours and a vector of one byte per page.
        assert_eq!(unsafe { libc::mincore(at, bytes, v.as_mut_ptr()) }, 0);
        v.iter().filter(|&&b| b & 1 != 0).count()
    }

    /// Figure 2.3's difference: `MAP_POPULATE` makes every page at once;
    /// a `shm_open` object's mapping makes none, and its pages outlive it.
    #[test]
    fn populate_maps_every_page_and_a_shm_object_keeps_its_own() {
        let bytes = 64 * PAGE as usize;
        let mut p = Populate {
            at: std::ptr::null_mut(),
            bytes,
            backing: Backing::Small,
        };
        p.map().unwrap();
        assert_eq!(resident(p.at, bytes), 64);
        p.unmap().unwrap();
        let mut s = ShmOpen::new(bytes as u64).unwrap();
        s.map().unwrap();
        assert_eq!(resident(s.at, bytes), 0);
        // SAFETY: page 3 of the mapping just made, writable.
        unsafe { (s.at as *mut u8).add(3 * PAGE as usize).write_volatile(7) };
        s.protect().unwrap();
        s.unmap().unwrap();
        s.map().unwrap();
        assert_eq!(resident(s.at, bytes), 1);
        // SAFETY: as above, mapped again.
        assert_eq!(
            unsafe { (s.at as *const u8).add(3 * PAGE as usize).read_volatile() },
            7
        );
        s.unmap().unwrap();
    }

    #[test]
    fn a_row_covers_every_page_and_leaves_nothing_mapped() {
        let r = map_protect_unmap(3 << 20, Backing::Small, 2).unwrap();
        assert_eq!(r.pages(), 768);
        for (ours, linux) in [r.map, r.protect, r.unmap] {
            assert!(ours > 0.0 && linux > 0.0, "{r:?}");
        }
        let j = r.json();
        assert!(
            j.starts_with("{\"bytes\":3145728,\"page_kib\":4,\"pages\":768,"),
            "{j}"
        );
        assert!(j.contains("\"linux_unmap_ns_per_page\":"), "{j}");
        assert!(j.contains("\"shm_unmap_ns_per_page\":"), "{j}");
        let (shmat, protect, shmdt) = r.shm;
        assert!(shmat > 0.0 && protect > 0.0 && shmdt > 0.0, "{r:?}");
        for (name, v) in [("populate", r.populate), ("shm_open", r.shm_open)] {
            let (m, p, u) = v.unwrap_or_else(|| panic!("{name} missing: {r:?}"));
            assert!(m > 0.0 && p > 0.0 && u > 0.0, "{name}: {r:?}");
            assert!(j.contains(&format!("\"{name}_unmap_ns_per_page\":")), "{j}");
        }
        let mut ours = Ours::new(3 << 20, Backing::Small).unwrap();
        ours.map().unwrap();
        let leaves = |o: &Ours| o.vm.lock().caps().ptes().filter(|p| !p.2.table).count();
        assert_eq!(leaves(&ours), 768);
        assert_eq!(
            ours.vm.lock().translate(767 * PAGE).map(|l| l.phys),
            Some(767 * PAGE)
        );
        ours.protect().unwrap();
        assert_eq!(
            ours.vm.lock().translate(0).map(|l| l.flags),
            Some(Rights::READ)
        );
        ours.unmap().unwrap();
        assert_eq!(leaves(&ours), 0);
        assert_eq!(ours.vm.lock().translate(0), None);
    }
}
