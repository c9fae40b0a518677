//! The objects loaded in the process (the program, its shared libraries, the
//! vDSO), found with `dl_iterate_phdr`. Each goes into the trace once per
//! segment as a module record (path, load bias, address range, build id) for
//! offline symbolization, and into a fixed table with its unwind tables
//! (`.eh_frame_hdr` and `.eh_frame`, read in place where the loader mapped
//! them), where [`crate::cfi`] finds the rule of an address.
//!
//! The objects are scanned when a segment begins, when an address outside
//! every known object is unwound while the loader's count of loads and
//! unloads has changed since the last scan (a library opened by `dlopen`: the recorder does not
//! wrap `dlopen`, whose caller decides where it looks for libraries), and
//! when a segment ends. The table and the unwinding that reads it share one
//! lock; each change of the table bumps [`generation`], which empties the
//! threads' rule caches.

use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use libc::{c_int, c_void, dl_phdr_info, size_t, Elf64_Phdr};
use retype_trace::codec;

use crate::{output, sys};

/// The most objects the table holds; further ones are written to the trace
/// but unwound through with frame pointers.
const MAX_OBJECTS: usize = 1024;

/// An object and where its unwind tables are.
#[derive(Clone, Copy)]
pub struct Object {
    pub base: u64,
    pub start: u64,
    pub end: u64,
    /// `.eh_frame_hdr` and `.eh_frame` as mapped (empty when it has none).
    pub eh_frame_hdr: &'static [u8],
    pub eh_frame: &'static [u8],
}

const NO_OBJECT: Object = Object {
    base: 0,
    start: 0,
    end: 0,
    eh_frame_hdr: &[],
    eh_frame: &[],
};

/// The objects, sorted by start address, and room for a scan's (only
/// touched while [`LOCK`] is held; static, so a scan inside a hook takes
/// little of the program's stack).
struct Table {
    objects: [Object; MAX_OBJECTS],
    len: usize,
    scratch: [Object; MAX_OBJECTS],
}

struct Shared(UnsafeCell<Table>);
// SAFETY: accessed only by the thread holding LOCK.
unsafe impl Sync for Shared {}
static TABLE: Shared = Shared(UnsafeCell::new(Table {
    objects: [NO_OBJECT; MAX_OBJECTS],
    len: 0,
    scratch: [NO_OBJECT; MAX_OBJECTS],
}));

/// Held while the table is read or changed.
static LOCK: AtomicBool = AtomicBool::new(false);
/// Bumped whenever the table changes.
static GENERATION: AtomicU32 = AtomicU32::new(1);
/// The loader's loads plus unloads at the last scan.
static LOADS: AtomicU64 = AtomicU64::new(0);

/// The table while its lock is held.
pub struct Locked(&'static mut Table);

impl Drop for Locked {
    fn drop(&mut self) {
        LOCK.store(false, Ordering::Release);
    }
}

impl Locked {
    /// The object holding address `at`.
    pub fn find(&self, at: u64) -> Option<&Object> {
        let objects = &self.0.objects[..self.0.len];
        let i = objects.partition_point(|o| o.start <= at).checked_sub(1)?;
        Some(&objects[i]).filter(|o| at < o.end)
    }
}

/// Takes the table's lock.
pub fn lock() -> Locked {
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    // SAFETY: we hold LOCK, the only way to the table.
    Locked(unsafe { &mut *TABLE.0.get() })
}

/// The table's generation: rules cached under another one may be stale.
#[inline(always)]
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Acquire)
}

/// Scans the loaded objects. `fresh`: a segment begins, so every object is
/// written again; else only objects loaded since the last scan are.
pub fn scan(fresh: bool) {
    let t = lock();
    let table = &mut *t.0;
    let mut s = Scan {
        old: &table.objects[..if fresh { 0 } else { table.len }],
        new: &mut table.scratch,
        len: 0,
        loads: 0,
    };
    // SAFETY: the callback has dl_iterate_phdr's signature and `s` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut s).cast()) };
    let Scan { len, loads, .. } = s;
    table.scratch[..len].sort_unstable_by_key(|o| o.start);
    let key = |o: &Object| (o.start, o.end, o.base);
    let changed = table.scratch[..len]
        .iter()
        .map(key)
        .ne(table.objects[..table.len].iter().map(key));
    std::mem::swap(&mut table.objects, &mut table.scratch);
    table.len = len;
    LOADS.store(loads, Ordering::Relaxed);
    if changed {
        GENERATION.fetch_add(1, Ordering::Release);
    }
}

/// What a scan gathers while `dl_iterate_phdr` calls [`visit`].
struct Scan<'a> {
    /// The objects already written in this segment.
    old: &'a [Object],
    new: &'a mut [Object; MAX_OBJECTS],
    len: usize,
    loads: u64,
}

/// Whether the loader has loaded or unloaded an object since the last scan
/// (asked when an address lies outside every known object; the check takes
/// the loader's lock for one callback).
#[cold]
pub fn loader_changed() -> bool {
    loader_changes() != LOADS.load(Ordering::Relaxed)
}

/// The loader's loads plus unloads so far.
fn loader_changes() -> u64 {
    unsafe extern "C" fn first(info: *mut dl_phdr_info, _: size_t, data: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info; `data` is the u64 below.
        unsafe { *data.cast::<u64>() = (*info).dlpi_adds + (*info).dlpi_subs };
        1
    }
    let mut n = 0u64;
    // SAFETY: as in `scan`.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut n).cast()) };
    n
}

/// The `dl_iterate_phdr` callback: notes each object, and writes the ones
/// the segment has not seen.
unsafe extern "C" fn visit(info: *mut dl_phdr_info, _: size_t, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the Scan of `scan`; the loader passes a valid info
    // whose program headers stay mapped while the object is loaded.
    let (s, info) = unsafe { (&mut *data.cast::<Scan>(), &*info) };
    s.loads = info.dlpi_adds + info.dlpi_subs;
    // SAFETY: as above.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = info.dlpi_addr;
    let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let (Some(lo), Some(hi)) = (
        loads().map(|p| p.p_vaddr).min(),
        loads().map(|p| p.p_vaddr + p.p_memsz).max(),
    ) else {
        return 0;
    };
    let o = object(base, base.wrapping_add(lo), base.wrapping_add(hi), phdrs);
    if !s
        .old
        .iter()
        .any(|k| (k.start, k.end, k.base) == (o.start, o.end, o.base))
    {
        let name = if info.dlpi_name.is_null() {
            &b""[..]
        } else {
            // SAFETY: dlpi_name is a NUL-terminated string (empty for the program).
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        write_record(&o, name, phdrs);
    }
    if s.len < MAX_OBJECTS {
        s.new[s.len] = o;
        s.len += 1;
    }
    0
}

/// Writes the module record of object `o`, named `name` by the loader.
fn write_record(o: &Object, name: &[u8], phdrs: &[Elf64_Phdr]) {
    let mut exe = [0u8; 4096];
    let path = if name.is_empty() {
        // The program itself: the loader gives no name.
        let n = sys::readlink(b"/proc/self/exe\0", &mut exe);
        &exe[..n]
    } else {
        name
    };
    let mut text = [0u8; 4096];
    let path = sys::utf8_or_ascii(path, &mut text);
    let mut id = [0u8; 64];
    let id_len = build_id(o.base, phdrs, &mut id);
    let mut rec = [0u8; 4096 + 64 + 6 * codec::MAX_VARINT];
    let fields = codec::ModuleFields {
        base: o.base,
        start: o.start,
        end: o.end,
        build_id: &id[..id_len],
        path,
    };
    if let Some(at) = codec::module_record(&mut rec, &fields) {
        output::write(&rec[at]);
    }
}

/// Copies the GNU build id of the object at `base` into `out`; returns its length.
fn build_id(base: u64, phdrs: &[Elf64_Phdr], out: &mut [u8]) -> usize {
    const NT_GNU_BUILD_ID: u32 = 3;
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        // SAFETY: a PT_NOTE segment lies in the object's mapped image.
        let notes = unsafe {
            std::slice::from_raw_parts(
                base.wrapping_add(p.p_vaddr) as *const u8,
                p.p_memsz as usize,
            )
        };
        let word = |i: usize| {
            notes
                .get(i..i + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let mut at = 0;
        while let (Some(namesz), Some(descsz), Some(kind)) = (word(at), word(at + 4), word(at + 8))
        {
            let name = at + 12;
            let desc = name + namesz.next_multiple_of(4);
            if kind == NT_GNU_BUILD_ID as usize && notes.get(name..name + namesz) == Some(b"GNU\0")
            {
                let Some(id) = notes.get(desc..desc + descsz) else {
                    break;
                };
                let n = id.len().min(out.len());
                out[..n].copy_from_slice(&id[..n]);
                return n;
            }
            at = desc + descsz.next_multiple_of(4);
        }
    }
    0
}

/// Object `[start, end)` at load bias `base` with its unwind tables.
fn object(base: u64, start: u64, end: u64, phdrs: &[Elf64_Phdr]) -> Object {
    let mut o = Object {
        base,
        start,
        end,
        ..NO_OBJECT
    };
    let Some(hdr) = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME) else {
        return o;
    };
    let hdr_at = base.wrapping_add(hdr.p_vaddr);
    // SAFETY: PT_GNU_EH_FRAME lies in a loaded, read-only segment of the
    // object, mapped while the object is loaded.
    let hdr_bytes: &'static [u8] =
        unsafe { std::slice::from_raw_parts(hdr_at as *const u8, hdr.p_memsz as usize) };
    let Some(frame_at) = crate::cfi::eh_frame_address(hdr_bytes, hdr_at) else {
        return o;
    };
    // .eh_frame runs at most to the end of the file-backed part of its segment.
    let end = phdrs.iter().find_map(|p| {
        let start = base.wrapping_add(p.p_vaddr);
        let end = start + p.p_filesz;
        (p.p_type == libc::PT_LOAD && (start..end).contains(&frame_at)).then_some(end)
    });
    if let Some(end) = end {
        o.eh_frame_hdr = hdr_bytes;
        // SAFETY: [frame_at, end) lies in a loaded segment, as above.
        o.eh_frame =
            unsafe { std::slice::from_raw_parts(frame_at as *const u8, (end - frame_at) as usize) };
    }
    o
}

/// In a fork child: a thread that held the lock does not exist there.
pub fn after_fork_child() {
    LOCK.store(false, Ordering::Release);
}
