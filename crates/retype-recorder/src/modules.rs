//! The objects loaded in the process (the program, its shared libraries, the
//! vDSO), found with `dl_iterate_phdr`. Each goes into the trace once per
//! segment as a module record (path, load bias, address range, build id) for
//! offline symbolization, and into a fixed table with its unwind tables
//! (`.eh_frame_hdr` and `.eh_frame`, read in place where the loader mapped
//! them), from which [`cfi`] derives the rule of an address.
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

use crate::cfi::{self, Evaluator, Rule, Tables};
use crate::{output, sys};

/// The most objects the table holds; further ones are written to the trace
/// but unwound through with frame pointers.
const MAX_OBJECTS: usize = 1024;

/// An object: its load bias, its address range `[start, end)` and its unwind tables.
#[derive(Clone, Copy)]
struct Object {
    base: u64,
    start: u64,
    end: u64,
    tables: Tables,
}

const NO_OBJECT: Object = Object {
    base: 0,
    start: 0,
    end: 0,
    tables: Tables::NONE,
};

/// The objects, sorted by start address, room for a scan's, and the state
/// rules are evaluated in (only touched while [`LOCK`] is held; static, so
/// a scan inside a hook takes little of the program's stack).
struct Table {
    objects: [Object; MAX_OBJECTS],
    len: usize,
    scratch: [Object; MAX_OBJECTS],
    evaluator: Evaluator,
}

struct Shared(UnsafeCell<Table>);
// SAFETY: accessed only by the thread holding LOCK.
unsafe impl Sync for Shared {}
static TABLE: Shared = Shared(UnsafeCell::new(Table {
    objects: [NO_OBJECT; MAX_OBJECTS],
    len: 0,
    scratch: [NO_OBJECT; MAX_OBJECTS],
    evaluator: Evaluator::new(),
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
    /// The rule for code address `at` (see [`cfi::rule`]), and whether `at`
    /// lies outside every known object (then: the frame-pointer rule).
    pub fn rule(&mut self, at: u64) -> (Rule, bool) {
        let t = &mut *self.0;
        match find(&t.objects[..t.len], at) {
            Some(o) => (cfi::rule(&o.tables, &mut t.evaluator, at), false),
            None => (cfi::FRAME_POINTER, true),
        }
    }
}

/// The object of `objects` (sorted by start) that holds address `at`.
fn find(objects: &[Object], at: u64) -> Option<&Object> {
    let i = objects.partition_point(|o| o.start <= at).checked_sub(1)?;
    Some(&objects[i]).filter(|o| at < o.end)
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
    let Some((lo, hi)) = extent(phdrs) else {
        return 0;
    };
    let o = Object {
        base,
        start: base.wrapping_add(lo),
        end: base.wrapping_add(hi),
        tables: unwind_tables(base, phdrs),
    };
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

/// The addresses an object's loaded segments span, `[lo, hi)` before its
/// load bias; `None` if it has none.
fn extent(phdrs: &[Elf64_Phdr]) -> Option<(u64, u64)> {
    let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let lo = loads().map(|p| p.p_vaddr).min()?;
    let hi = loads().map(|p| p.p_vaddr + p.p_memsz).max()?;
    Some((lo, hi))
}

/// Copies the GNU build id of the object at `base` into `out`; returns its length.
fn build_id(base: u64, phdrs: &[Elf64_Phdr], out: &mut [u8]) -> usize {
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        // SAFETY: a PT_NOTE segment lies in the object's mapped image.
        let notes = unsafe {
            std::slice::from_raw_parts(
                base.wrapping_add(p.p_vaddr) as *const u8,
                p.p_memsz as usize,
            )
        };
        if let Some(id) = gnu_build_id(notes) {
            let n = id.len().min(out.len());
            out[..n].copy_from_slice(&id[..n]);
            return n;
        }
    }
    0
}

/// The GNU build id among the ELF notes `notes` (a PT_NOTE segment), if one is there whole.
fn gnu_build_id(notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: usize = 3;
    let word = |i: usize| {
        notes
            .get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut at = 0;
    while let (Some(namesz), Some(descsz), Some(kind)) = (word(at), word(at + 4), word(at + 8)) {
        let name = at + 12;
        let desc = name + namesz.next_multiple_of(4);
        if kind == NT_GNU_BUILD_ID && notes.get(name..name + namesz) == Some(b"GNU\0") {
            return notes.get(desc..desc + descsz);
        }
        at = desc + descsz.next_multiple_of(4);
    }
    None
}

/// The unwind tables of the object at load bias `base` (none if it has no
/// `PT_GNU_EH_FRAME` header, or its `.eh_frame` cannot be found).
fn unwind_tables(base: u64, phdrs: &[Elf64_Phdr]) -> Tables {
    let Some(hdr) = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME) else {
        return Tables::NONE;
    };
    let hdr_at = base.wrapping_add(hdr.p_vaddr);
    // SAFETY: PT_GNU_EH_FRAME lies in a loaded, read-only segment of the
    // object, mapped while the object is loaded.
    let hdr_bytes: &'static [u8] =
        unsafe { std::slice::from_raw_parts(hdr_at as *const u8, hdr.p_memsz as usize) };
    let Some(frame_at) = cfi::eh_frame_address(hdr_bytes, hdr_at) else {
        return Tables::NONE;
    };
    // .eh_frame runs at most to the end of the file-backed part of its segment.
    let end = phdrs.iter().find_map(|p| {
        let start = base.wrapping_add(p.p_vaddr);
        let end = start + p.p_filesz;
        (p.p_type == libc::PT_LOAD && (start..end).contains(&frame_at)).then_some(end)
    });
    match end {
        Some(end) => Tables {
            eh_frame_hdr: hdr_bytes,
            // SAFETY: [frame_at, end) lies in a loaded segment, as above.
            eh_frame: unsafe {
                std::slice::from_raw_parts(frame_at as *const u8, (end - frame_at) as usize)
            },
        },
        None => Tables::NONE,
    }
}

/// In a fork child: a thread that held the lock does not exist there.
pub fn after_fork_child() {
    LOCK.store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use libc::Elf64_Phdr;
    use proptest::prelude::*;

    use super::{extent, find, gnu_build_id, lock, scan, Object, NO_OBJECT};
    use crate::cfi::{Kind, Rule, FRAME_POINTER};

    fn object(start: u64, end: u64) -> Object {
        Object {
            start,
            end,
            ..NO_OBJECT
        }
    }

    fn segment(p_type: u32, p_vaddr: u64, p_memsz: u64) -> Elf64_Phdr {
        Elf64_Phdr {
            p_type,
            p_flags: 0,
            p_offset: 0,
            p_vaddr,
            p_paddr: p_vaddr,
            p_filesz: p_memsz,
            p_memsz,
            p_align: 4096,
        }
    }

    /// One ELF note: sizes, type, then name and descriptor, each padded to 4 bytes.
    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        for word in [name.len() as u32, desc.len() as u32, kind] {
            n.extend_from_slice(&word.to_le_bytes());
        }
        for part in [name, desc] {
            n.extend_from_slice(part);
            n.resize(n.len().next_multiple_of(4), 0);
        }
        n
    }

    #[test]
    fn an_address_is_found_in_the_object_whose_range_holds_it() {
        let objects = [
            object(0x1000, 0x2000),
            object(0x2000, 0x3000),
            object(0x5000, 0x6000),
        ];
        let start_of = |at| find(&objects, at).map(|o| o.start);
        assert_eq!(start_of(0xfff), None);
        assert_eq!(start_of(0x1000), Some(0x1000));
        assert_eq!(start_of(0x1fff), Some(0x1000));
        assert_eq!(start_of(0x2000), Some(0x2000));
        assert_eq!(start_of(0x3000), None);
        assert_eq!(start_of(0x4fff), None);
        assert_eq!(start_of(0x5fff), Some(0x5000));
        assert_eq!(start_of(0x6000), None);
        assert_eq!(find(&[], 0x1000).map(|o| o.start), None);
    }

    proptest! {
        #[test]
        fn find_agrees_with_a_linear_search(
            sizes in prop::collection::vec((0..64u64, 1..64u64), 0..20),
            pick in any::<prop::sample::Index>(),
            nudge in 0..3u64,
        ) {
            // Objects in address order, each after a gap (possibly none).
            let mut objects = Vec::new();
            let mut end = 1;
            for (gap, size) in sizes {
                objects.push(object(end + gap, end + gap + size));
                end += gap + size;
            }
            // An address at, just before or just after an object's start or end.
            let bounds: Vec<u64> = objects.iter().flat_map(|o| [o.start, o.end]).collect();
            let at = if bounds.is_empty() { nudge } else { *pick.get(&bounds) + nudge - 1 };
            let linear = objects.iter().find(|o| o.start <= at && at < o.end).map(|o| o.start);
            prop_assert_eq!(find(&objects, at).map(|o| o.start), linear);
        }
    }

    #[test]
    fn an_object_spans_its_loaded_segments_only() {
        let phdrs = [
            segment(libc::PT_PHDR, 0x40, 0x1c0),
            segment(libc::PT_LOAD, 0x3000, 0x500),
            segment(libc::PT_LOAD, 0, 0x1000),
            segment(libc::PT_NOTE, 0x10000, 0x40),
        ];
        assert_eq!(extent(&phdrs), Some((0, 0x3500)));
        assert_eq!(extent(&phdrs[3..]), None);
    }

    #[test]
    fn the_build_id_is_the_gnu_note_of_its_type() {
        let id = [0xde, 0xad, 0xbe, 0xef, 0x01];
        let mut notes = note(b"GNU\0", 1, &[0; 16]); // the ABI tag
        notes.extend(note(b"Linux\0", 3, b"not an id")); // another vendor's type 3
        notes.extend(note(b"GNU\0", 3, &id));
        assert_eq!(gnu_build_id(&notes), Some(&id[..]));
        assert_eq!(gnu_build_id(&notes[..notes.len() - 8]), None, "cut short");
        assert_eq!(gnu_build_id(&note(b"GNU\0", 1, &id)), None);
        assert_eq!(gnu_build_id(&[]), None);
    }

    /// A function of this test program (which has call-frame information).
    extern "C" fn probe() {}

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_scan_finds_this_program_and_its_call_frame_information() {
        scan(true);
        // On entry to a function the caller's stack pointer is 8 bytes above ours.
        let entry = Rule {
            cfa: 8,
            bp: 0,
            kind: Kind::Sp,
        };
        assert_eq!(lock().rule(probe as *const () as u64), (entry, false));
        assert_eq!(lock().rule(16), (FRAME_POINTER, true));
    }
}
