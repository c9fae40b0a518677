//! The objects loaded in the process (the program, its shared libraries, the
//! vDSO), found with `dl_iterate_phdr`. Each goes into the trace once per
//! segment as a module record (path, load bias, address range, build id) for
//! offline symbolization, and into the unwinder with its unwind tables
//! (`.eh_frame_hdr` and `.eh_frame`, read in place where the loader mapped them).
//!
//! The objects are scanned when a segment begins, when unwinding fails while
//! the loader's count of loads and unloads has changed since the last scan (a
//! library opened by `dlopen`: the recorder does not wrap `dlopen`, whose
//! caller decides where it looks for libraries), and when a segment ends. A
//! scan builds a new unwinder and publishes it; older ones are never freed, as
//! a thread may still be unwinding with one.

use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::ops::Range;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use framehop::x86_64::UnwinderX86_64;
use framehop::{ExplicitModuleSectionInfo, Module, MustNotAllocateDuringUnwind, Unwinder};
use gimli::{BaseAddresses, EhFrameHdr, LittleEndian, Pointer};
use libc::{c_int, c_void, dl_phdr_info, size_t, Elf64_Phdr};
use retype_trace::codec;

use crate::{output, sys};

/// framehop's unwinder over unwind tables read in place.
pub type Unwind = UnwinderX86_64<&'static [u8], MustNotAllocateDuringUnwind>;

/// The current unwinder; null before the first scan.
static UNWINDER: AtomicPtr<Unwind> = AtomicPtr::new(null_mut());
/// Held during a scan.
static LOCK: AtomicBool = AtomicBool::new(false);
/// The recorder's own object: its frames are left out of stacks.
static OWN_START: AtomicU64 = AtomicU64::new(0);
static OWN_END: AtomicU64 = AtomicU64::new(0);
/// The loader's loads plus unloads at the last scan.
static LOADS: AtomicU64 = AtomicU64::new(0);

/// An object as a scan sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Object {
    base: u64,
    start: u64,
    end: u64,
}

/// The objects of the last scan (only touched while [`LOCK`] is held).
struct Known(UnsafeCell<Vec<Object>>);
// SAFETY: accessed only by the thread holding LOCK.
unsafe impl Sync for Known {}
static KNOWN: Known = Known(UnsafeCell::new(Vec::new()));

/// The unwinder, once the objects have been scanned.
#[inline(always)]
pub fn unwinder() -> Option<&'static Unwind> {
    // SAFETY: published unwinders are leaked, never freed.
    unsafe { UNWINDER.load(Ordering::Acquire).as_ref() }
}

/// The addresses of the recorder's own code.
#[inline(always)]
pub fn own() -> Range<u64> {
    OWN_START.load(Ordering::Relaxed)..OWN_END.load(Ordering::Relaxed)
}

/// Scans the loaded objects. `fresh`: a segment begins, so every object is
/// written again and the unwinder is built anew; else only objects loaded or
/// unloaded since the last scan change anything.
pub fn scan(fresh: bool) {
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    // SAFETY: we hold LOCK.
    let known = unsafe { &mut *KNOWN.0.get() };
    if fresh {
        known.clear();
    }
    let mut s = Scan {
        known,
        found: Vec::new(),
        unwinder: None,
        loads: 0,
    };
    // SAFETY: the callback has dl_iterate_phdr's signature and `s` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut s).cast()) };
    let Scan {
        found,
        mut unwinder,
        loads,
        ..
    } = s;
    for gone in known.iter().filter(|o| !found.contains(o)) {
        unwinder
            .get_or_insert_with(|| current(fresh))
            .remove_module(gone.start);
    }
    if let Some(u) = unwinder {
        UNWINDER.store(Box::leak(Box::new(u)), Ordering::Release);
    }
    *known = found;
    LOADS.store(loads, Ordering::Relaxed);
    LOCK.store(false, Ordering::Release);
}

/// A copy of the current unwinder to change, or a new one.
fn current(fresh: bool) -> Unwind {
    match unwinder() {
        Some(u) if !fresh => u.clone(),
        _ => Unwind::new(),
    }
}

/// What a scan gathers while `dl_iterate_phdr` calls [`visit`].
struct Scan<'a> {
    known: &'a [Object],
    found: Vec<Object>,
    /// The new unwinder, once an object was added or removed.
    unwinder: Option<Unwind>,
    loads: u64,
}

/// Called when unwinding a stack failed before its end; counts the thread's
/// failures (`failures`). Every 64th time, scans again if the loader's
/// count of loads and unloads has changed (the check takes the loader's lock).
#[cold]
pub fn unwinding_failed(failures: &mut u32) {
    *failures = failures.wrapping_add(1);
    if *failures % 64 == 1 && loader_changes() != LOADS.load(Ordering::Relaxed) {
        scan(false);
    }
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

/// The `dl_iterate_phdr` callback: notes each object, and writes and adds
/// the ones the last scan did not know.
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
    let o = Object {
        base,
        start: base.wrapping_add(lo),
        end: base.wrapping_add(hi),
    };
    s.found.push(o);
    let here = visit as *const () as u64;
    if (o.start..o.end).contains(&here) {
        OWN_START.store(o.start, Ordering::Relaxed);
        OWN_END.store(o.end, Ordering::Relaxed);
    }
    if s.known.contains(&o) {
        return 0;
    }
    // SAFETY: dlpi_name is a NUL-terminated string (empty for the program).
    let name = unsafe { info.dlpi_name.as_ref() }.map_or(&b""[..], |_| {
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
    });
    write_record(&o, name, phdrs);
    let fresh = s.known.is_empty();
    s.unwinder
        .get_or_insert_with(|| current(fresh))
        .add_module(module(&o, phdrs));
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
        let mut at = 0;
        let word = |i: usize| {
            notes
                .get(i..i + 4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        };
        while let (Some(namesz), Some(descsz), Some(kind)) = (word(at), word(at + 4), word(at + 8))
        {
            let name = at + 12;
            let desc = name + (namesz as usize).next_multiple_of(4);
            let next = desc + (descsz as usize).next_multiple_of(4);
            if kind == NT_GNU_BUILD_ID && notes.get(name..name + namesz as usize) == Some(b"GNU\0")
            {
                let Some(id) = notes.get(desc..desc + descsz as usize) else {
                    break;
                };
                let n = id.len().min(out.len());
                out[..n].copy_from_slice(&id[..n]);
                return n;
            }
            at = next;
        }
    }
    0
}

/// The unwinder's view of object `o`: its address range and unwind tables.
fn module(o: &Object, phdrs: &[Elf64_Phdr]) -> Module<&'static [u8]> {
    let mut info = ExplicitModuleSectionInfo::<&'static [u8]> {
        base_svma: 0,
        ..Default::default()
    };
    let svma = |p: &Elf64_Phdr| p.p_vaddr..p.p_vaddr + p.p_memsz;
    info.text_svma = phdrs
        .iter()
        .find(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0)
        .map(svma);
    if let Some(hdr) = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME) {
        let hdr_at = o.base.wrapping_add(hdr.p_vaddr);
        // SAFETY: PT_GNU_EH_FRAME lies in a loaded, read-only segment of the
        // object, mapped while the object is loaded.
        let hdr_bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(hdr_at as *const u8, hdr.p_memsz as usize) };
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at);
        let eh_frame = EhFrameHdr::new(hdr_bytes, LittleEndian)
            .parse(&bases, 8)
            .ok()
            .and_then(|h| match h.eh_frame_ptr() {
                Pointer::Direct(at) => Some(at),
                Pointer::Indirect(_) => None,
            });
        // .eh_frame runs at most to the end of the file-backed part of its segment.
        let segment_end = |at: u64| {
            phdrs.iter().find_map(|p| {
                let start = o.base.wrapping_add(p.p_vaddr);
                let end = start + p.p_filesz;
                (p.p_type == libc::PT_LOAD && (start..end).contains(&at)).then_some(end)
            })
        };
        if let Some((at, end)) = eh_frame.and_then(|at| Some((at, segment_end(at)?))) {
            info.eh_frame_hdr_svma = Some(svma(hdr));
            info.eh_frame_hdr = Some(hdr_bytes);
            info.eh_frame_svma = Some(at - o.base..end - o.base);
            // SAFETY: [at, end) lies in a loaded segment, as above.
            info.eh_frame =
                Some(unsafe { std::slice::from_raw_parts(at as *const u8, (end - at) as usize) });
        }
    }
    Module::new(String::new(), o.start..o.end, o.base, info)
}

/// In a fork child: a thread that held the lock does not exist there.
pub fn after_fork_child() {
    LOCK.store(false, Ordering::Release);
}
