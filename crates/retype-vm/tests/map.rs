//! Mapping frames through capabilities has real effect, and only through
//! capabilities.

mod common;

use common::*;
use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapError, Rights};
use retype_vm::{Backing, Options, Probe, VmError};

#[test]
fn a_mapped_frame_is_memory_and_its_page_size_is_4k() {
    let vm = space();
    let f = frame(&vm, 10, 0, 4);
    let (pt, m) = (slot(&vm, 4), slot(&vm, 11));
    vm.lock().map(pt, f, 8, PAGE, 2, Rights::RW, m).unwrap();
    let p = Probe::new().unwrap();
    let at = vm.base() + 8 * PAGE as usize;
    assert!(p.write(at, 0xfeed), "a RW mapping takes writes");
    assert_eq!(p.read(at), Some(0xfeed));
    let mut b = [0u8; 8];
    vm.lock().memory().read(PAGE, &mut b).unwrap();
    assert_eq!(
        u64::from_ne_bytes(b),
        0xfeed,
        "the write reached frame page 1"
    );
    assert_eq!(kernel_page_kib(at), Some(4));
    assert_eq!(p.read(at - PAGE as usize), None, "entry 7 is not mapped");
    assert_eq!(
        p.read(at + 2 * PAGE as usize),
        None,
        "entry 10 is not mapped"
    );
}

#[test]
fn mapping_without_a_frame_capability_is_refused() {
    let vm = space();
    let (pt, m) = (slot(&vm, 4), slot(&vm, 11));
    let p = Probe::new().unwrap();
    // RAM is not mappable; an empty slot is no capability at all.
    let ram = vm.boot().ram;
    let e = vm.lock().map(pt, ram, 0, 0, 1, Rights::RW, m).unwrap_err();
    assert!(matches!(
        e,
        VmError::Cap(CapError::InvalidMapping {
            table: CapType::X86Ptable,
            child: CapType::Ram
        })
    ));
    let e = vm.lock().map(pt, slot(&vm, 10), 0, 0, 1, Rights::RW, m);
    assert!(
        matches!(e, Err(VmError::Cap(CapError::EmptySlot { .. }))),
        "{e:?}"
    );
    // A read-only copy of a frame cannot be mapped writable.
    let f = frame(&vm, 10, 0, 1);
    vm.lock().mint(f, slot(&vm, 12), Rights::READ).unwrap();
    let e = vm.lock().map(pt, slot(&vm, 12), 0, 0, 1, Rights::RW, m);
    assert!(
        matches!(e, Err(VmError::Cap(CapError::MissingRights { .. }))),
        "{e:?}"
    );
    assert_eq!(p.read(vm.base()), None, "nothing was mapped");
    assert!(
        vm.lock().caps().get(m).is_err(),
        "no Mapping capability was made"
    );
    // A 2 MiB page needs huge-page memory.
    let big = frame(&vm, 13, 2 * MIB, 512);
    let root = vm.lock().root();
    let e = vm.lock().map(root, big, 1, 0, 1, Rights::RW, m);
    assert!(
        matches!(e, Err(VmError::PageSize { asked, backing: 4096 }) if asked == 2 * MIB),
        "{e:?}"
    );
}

#[test]
fn an_address_faults_after_its_frame_is_revoked_or_deleted() {
    let vm = space();
    let p = Probe::new().unwrap();
    let (pt, f) = (slot(&vm, 4), frame(&vm, 10, 0, 2));
    vm.lock().copy(f, slot(&vm, 12)).unwrap();
    // The frame mapped twice, once through a copy.
    vm.lock()
        .map(pt, f, 0, 0, 2, Rights::RW, slot(&vm, 20))
        .unwrap();
    vm.lock()
        .map(pt, slot(&vm, 12), 5, 0, 1, Rights::READ, slot(&vm, 21))
        .unwrap();
    assert!(p.write(vm.base(), 7));
    assert_eq!(
        p.read(vm.base() + 5 * PAGE as usize),
        Some(7),
        "one frame, two addresses"
    );
    vm.lock().revoke(f).unwrap();
    for page in [0, 1, 5] {
        assert_eq!(
            p.read(vm.base() + page * PAGE as usize),
            None,
            "page {page} after revoke"
        );
    }
    // Mapped again, then the frame's last capability deleted.
    vm.lock()
        .map(pt, f, 3, 0, 1, Rights::RW, slot(&vm, 20))
        .unwrap();
    assert_eq!(
        p.read(vm.base() + 3 * PAGE as usize),
        Some(7),
        "the memory kept its contents"
    );
    vm.lock().delete(f).unwrap();
    assert_eq!(p.read(vm.base() + 3 * PAGE as usize), None, "after delete");
}

#[test]
fn protect_and_unmap_take_effect_and_the_window_stays_reserved() {
    let vm = space();
    let p = Probe::new().unwrap();
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 4), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 4, Rights::RW, m).unwrap();
    vm.lock().modify_flags(m, 1, 2, Rights::READ).unwrap();
    let page = |i: usize| vm.base() + i * PAGE as usize;
    assert_eq!(
        (0..4).map(|i| p.write(page(i), 1)).collect::<Vec<_>>(),
        [true, false, false, true]
    );
    vm.lock().modify_flags(m, 0, 4, Rights::NONE).unwrap();
    assert_eq!(p.read(page(0)), None, "no rights: no access");
    let e = vm.lock().modify_flags(m, 3, 2, Rights::RW);
    assert!(
        matches!(e, Err(VmError::Cap(CapError::InvalidEntry { .. }))),
        "{e:?}"
    );
    vm.lock().unmap(pt, m).unwrap();
    assert_eq!(p.read(page(0)), None);
    // The pages are still ours: a hinted mmap there lands elsewhere.
    // SAFETY: a fresh anonymous mapping without MAP_FIXED cannot clobber anything.
    let q = unsafe {
        libc::mmap(
            page(0) as *mut libc::c_void,
            PAGE as usize,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(q, libc::MAP_FAILED);
    assert_ne!(q as usize, page(0), "the window kept its reservation");
    // SAFETY: unmaps the mapping just made.
    unsafe { libc::munmap(q, PAGE as usize) };
}

#[test]
fn unmapping_a_page_table_removes_its_pages_and_mapping_it_again_restores_them() {
    let vm = space();
    let p = Probe::new().unwrap();
    let (pt, f) = (slot(&vm, 4), frame(&vm, 10, 0, 1));
    vm.lock()
        .map(pt, f, 2, 0, 1, Rights::RW, slot(&vm, 11))
        .unwrap();
    assert!(p.write(vm.base() + 2 * PAGE as usize, 9));
    let root = vm.lock().root();
    vm.lock().unmap(root, slot(&vm, 5)).unwrap();
    assert_eq!(p.read(vm.base() + 2 * PAGE as usize), None);
    // The same PT at PD entry 3: its page appears 6 MiB further.
    vm.lock()
        .map(root, pt, 3, 0, 1, Rights::READ, slot(&vm, 5))
        .unwrap();
    let at = vm.base() + (6 * MIB + 2 * PAGE) as usize;
    assert_eq!(p.read(at), Some(9));
    assert!(!p.write(at, 1), "the PD entry allows reads only");
}

#[test]
fn two_mib_frames_map_as_huge_pages_when_reserved() {
    let o = Options {
        ram: 8 * MIB,
        backing: Backing::Huge2M,
        ..Options::default()
    };
    if let Err(why) = Backing::Huge2M.available(o.ram) {
        eprintln!("skipped: {why}");
        return;
    }
    let vm = retype_vm::Vm::new(o).unwrap();
    let p = Probe::new().unwrap();
    let root = vm.lock().root();
    let f = frame(&vm, 10, 2 * MIB, 512);
    vm.lock()
        .map(root, f, 1, 0, 1, Rights::RW, slot(&vm, 11))
        .unwrap();
    let at = vm.base() + 2 * MIB as usize;
    assert!(p.write(at + 4096, 5));
    assert_eq!(kernel_page_kib(at), Some(2048));
    let (ram, pt) = (vm.boot().ram, slot(&vm, 4));
    vm.lock()
        .retype(ram, CapType::X86Ptable, 0, PAGE, 1, pt)
        .unwrap();
    let e = vm.lock().map(pt, f, 0, 0, 1, Rights::RW, slot(&vm, 12));
    assert!(
        matches!(e, Err(VmError::PageSize { asked: 4096, .. })),
        "{e:?}"
    );
}
