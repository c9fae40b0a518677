//! Redirecting a running process's calls: a recorder loaded into a process
//! that did not preload it is not in its symbol lookup order, so the program's
//! calls to `malloc` still go to its allocator. Every loaded object calls an
//! imported function through its global offset table (GOT), whose slots the
//! dynamic loader filled in (`R_X86_64_JUMP_SLOT` for calls through the PLT,
//! `R_X86_64_GLOB_DAT` for `-fno-plt` calls and taken addresses): writing our
//! function's address into each slot that names one of ours redirects every
//! later call, as heaptrack's injection does. Slots under RELRO are read-only
//! after loading: their page is made writable for the write and read-only
//! again. Each slot's old value is kept, so the detach puts them all back.
//!
//! Objects loaded after the redirect (a later `dlopen`) keep calling the
//! allocator directly; their calls are not recorded.

use std::ffi::CStr;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use libc::{c_int, c_void, dl_phdr_info, size_t};

/// A function of ours to put in place of the program's of the same name.
pub struct Hook {
    pub name: &'static CStr,
    pub to: usize,
}

/// The most slots one redirect rewrites (a large program has a few hundred).
const MAX_SLOTS: usize = 4096;

/// A slot rewritten: where, the value it held, whether its page is read-only.
#[derive(Clone, Copy)]
struct Slot {
    at: usize,
    old: usize,
    read_only: bool,
}

/// The slots rewritten.
struct Saved {
    len: usize,
    slots: [Slot; MAX_SLOTS],
}

static SAVED: Mutex<Saved> = Mutex::new(Saved {
    len: 0,
    slots: [Slot {
        at: 0,
        old: 0,
        read_only: false,
    }; MAX_SLOTS],
});

/// An entry of the dynamic section (`Elf64_Dyn`).
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

/// A relocation with addend (`Elf64_Rela`).
#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

/// A symbol (`Elf64_Sym`): only its name is read here.
#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// The dynamic-section tags and relocation types read here.
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_STRSZ: i64 = 10;
const DT_PLTREL: i64 = 20;
const DT_JMPREL: i64 = 23;
const R_X86_64_GLOB_DAT: u64 = 6;
const R_X86_64_JUMP_SLOT: u64 = 7;

/// Rewrites every GOT slot of every loaded object but the one at `skip` (our
/// own) that names a function of `hooks`; returns how many it rewrote.
pub fn redirect(hooks: &[Hook], skip: usize) -> usize {
    let mut walk = Walk {
        hooks,
        skip,
        page: page_size(),
        saved: SAVED.lock().unwrap_or_else(|e| e.into_inner()),
        rewritten: 0,
    };
    // SAFETY: the callback has dl_iterate_phdr's signature and `walk` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut walk).cast()) };
    walk.rewritten
}

/// Puts back every slot [`redirect`] rewrote.
pub fn restore() {
    let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
    let page = page_size();
    for s in &saved.slots[..saved.len] {
        write_slot(s.at, s.old, page, s.read_only);
    }
    saved.len = 0;
}

struct Walk<'a> {
    hooks: &'a [Hook],
    skip: usize,
    page: usize,
    saved: std::sync::MutexGuard<'a, Saved>,
    rewritten: usize,
}

/// The `dl_iterate_phdr` callback: rewrites one object's slots.
unsafe extern "C" fn visit(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info; `data` is the Walk above.
    let (info, walk) = unsafe { (&*info, &mut *data.cast::<Walk>()) };
    let base = info.dlpi_addr as usize;
    // SAFETY: the name is a NUL-terminated string or null.
    let vdso = !info.dlpi_name.is_null()
        && unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_bytes()
            .starts_with(b"linux-vdso");
    if base == walk.skip || vdso || info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
    let mut dynamic = None;
    let mut relro = 0..0;
    for p in phdrs {
        let at = base + p.p_vaddr as usize;
        match p.p_type {
            libc::PT_DYNAMIC => dynamic = Some(at),
            libc::PT_GNU_RELRO => relro = at..at + p.p_memsz as usize,
            _ => {}
        }
    }
    if let Some(dynamic) = dynamic {
        // SAFETY: PT_DYNAMIC of a loaded object points to its dynamic section.
        unsafe { walk.object(base, dynamic as *const Dyn, relro) };
    }
    0
}

impl Walk<'_> {
    /// Rewrites the slots of the object at `base` whose dynamic section is at `dynamic`.
    ///
    /// # Safety
    /// `dynamic` is the dynamic section of the loaded object at `base`.
    unsafe fn object(&mut self, base: usize, dynamic: *const Dyn, relro: Range<usize>) {
        let (mut strtab, mut strsz, mut symtab) = (0, 0, 0);
        let (mut rela, mut relasz, mut jmprel, mut pltrelsz, mut pltrel) = (0, 0, 0, 0, 0);
        // The loader relocates the table addresses in place (most objects);
        // one it left as it is holds offsets from the base.
        let at = |v: u64| {
            let v = v as usize;
            if v < base {
                v + base
            } else {
                v
            }
        };
        let mut d = dynamic;
        // SAFETY: the dynamic section ends with DT_NULL.
        unsafe {
            while (*d).tag != DT_NULL {
                let v = (*d).val;
                match (*d).tag {
                    DT_STRTAB => strtab = at(v),
                    DT_STRSZ => strsz = v as usize,
                    DT_SYMTAB => symtab = at(v),
                    DT_RELA => rela = at(v),
                    DT_RELASZ => relasz = v as usize,
                    DT_JMPREL => jmprel = at(v),
                    DT_PLTRELSZ => pltrelsz = v as usize,
                    DT_PLTREL => pltrel = v as i64,
                    _ => {}
                }
                d = d.add(1);
            }
        }
        if strtab == 0 || symtab == 0 {
            return;
        }
        if pltrel != DT_RELA {
            (jmprel, pltrelsz) = (0, 0);
        }
        for (table, size) in [(rela, relasz), (jmprel, pltrelsz)] {
            if table == 0 {
                continue;
            }
            let n = size / std::mem::size_of::<Rela>();
            // SAFETY: the table holds `size` bytes of relocations.
            let relocs = unsafe { std::slice::from_raw_parts(table as *const Rela, n) };
            for r in relocs {
                let (kind, sym) = (r.info & 0xffff_ffff, (r.info >> 32) as usize);
                if sym == 0 || (kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT) {
                    continue;
                }
                // SAFETY: the symbol index and its name are the object's own.
                let name = unsafe {
                    let s = &*(symtab as *const Sym).add(sym);
                    let off = s.name as usize;
                    if off >= strsz {
                        continue;
                    }
                    CStr::from_ptr((strtab + off) as *const libc::c_char)
                };
                let Some(hook) = self.hooks.iter().find(|h| h.name == name) else {
                    continue;
                };
                let slot = base + r.offset as usize;
                if self.saved.len == MAX_SLOTS {
                    return;
                }
                let read_only = relro.contains(&slot);
                if let Some(old) = write_slot(slot, hook.to, self.page, read_only) {
                    let k = self.saved.len;
                    self.saved.slots[k] = Slot {
                        at: slot,
                        old,
                        read_only,
                    };
                    self.saved.len += 1;
                    self.rewritten += 1;
                }
            }
        }
    }
}

/// Writes `value` into `slot` (opening its read-only page for the write if
/// `read_only`); returns the value it held, or `None` if it could not be written.
fn write_slot(slot: usize, value: usize, page: usize, read_only: bool) -> Option<usize> {
    let start = (slot & !(page - 1)) as *mut c_void;
    // SAFETY: `slot` is a GOT slot of a loaded object: mapped, aligned, ours
    // to write once its page is writable; other threads read it atomically.
    unsafe {
        if read_only && libc::mprotect(start, page, libc::PROT_READ | libc::PROT_WRITE) != 0 {
            return None;
        }
        let old = AtomicUsize::from_ptr(slot as *mut usize).swap(value, Ordering::AcqRel);
        if read_only {
            libc::mprotect(start, page, libc::PROT_READ);
        }
        Some(old)
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}
