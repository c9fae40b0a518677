//! Virtual regions and memory objects: a fault in a region is filled by
//! its object, protection is per region, unmapping frees what the object
//! made.

mod common;

use common::MIB;
use retype_core::caps::types::PAGE;
use retype_core::caps::Rights;
use retype_vm::{Memobj, Options, Probe, Vm, VmError, Vregion, Vregions};

/// A 16 MiB space (no tables under its root) whose regions take the
/// window's first 8 MiB, their frames and tables the RAM from 4 MiB to
/// 12 MiB and root slots 16 to 255.
fn regions() -> (Vm, Vregions) {
    let vm = Vm::new(Options {
        ram: 16 * MIB,
        ..Options::default()
    })
    .expect("a space");
    let r = Vregions::new(&vm, 0..8 * MIB, 4 * MIB..12 * MIB, 16..256).expect("regions");
    (vm, r)
}

fn page(r: &Vregion, i: u64) -> usize {
    r.addr + (i * PAGE) as usize
}

fn write(addr: usize, v: u64) {
    // SAFETY: an address in a region allowing writes: a fault there is
    // filled by the region's object, then the store runs again.
    unsafe { (addr as *mut u64).write_volatile(v) }
}

fn read(addr: usize) -> u64 {
    // SAFETY: an address in a region allowing reads (see `write`).
    unsafe { (addr as *const u64).read_volatile() }
}

#[test]
fn anonymous_pages_are_made_on_first_touch_zeroed_and_apart() {
    let (vm, vr) = regions();
    let r = vr
        .map(&mut vm.lock(), 8 * PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    let probe = Probe::new().unwrap();
    assert_eq!(vr.resident(r).unwrap(), 0, "nothing before the first touch");
    assert_eq!(
        probe.read(page(&r, 3)),
        None,
        "untouched pages are not mapped"
    );
    write(page(&r, 3) + 8, 33);
    assert_eq!(
        vr.resident(r).unwrap(),
        1,
        "the write's fault made one page"
    );
    assert_eq!(read(page(&r, 5)), 0, "a read's fault makes a zeroed page");
    assert_eq!(vr.resident(r).unwrap(), 2);
    write(page(&r, 5), 55);
    assert_eq!(
        read(page(&r, 3) + 8),
        33,
        "each page has a frame of its own"
    );
    assert_eq!(read(page(&r, 3)), 0);
    vr.unmap(&mut vm.lock(), r).unwrap();
    // The same place and the same RAM come back first fit: zeroed again.
    let again = vr
        .map(&mut vm.lock(), 8 * PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    assert_eq!(again.va, r.va);
    assert_eq!(read(page(&again, 5)), 0, "a reused frame is zeroed");
    assert_eq!(read(page(&again, 3) + 8), 0);
}

#[test]
fn unmapping_frees_the_frames_the_object_made() {
    let (vm, vr) = regions();
    let probe = Probe::new().unwrap();
    // The first region makes the page tables, which stay for later ones.
    let first = vr
        .map(&mut vm.lock(), PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    write(first.addr, 1);
    let before = vr.free_bytes();
    let r = vr
        .map(&mut vm.lock(), 16 * PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    for i in [0, 2, 4, 15] {
        write(page(&r, i), i + 100);
    }
    assert_eq!(before - vr.free_bytes(), 4 * PAGE, "four pages touched");
    vr.unmap(&mut vm.lock(), r).unwrap();
    assert_eq!(vr.free_bytes(), before, "their frames came back");
    assert_eq!(probe.read(page(&r, 2)), None, "and left the window");
    assert!(matches!(vr.resident(r), Err(VmError::NoRegion(_))));
    assert!(matches!(
        vr.unmap(&mut vm.lock(), r),
        Err(VmError::NoRegion(_))
    ));
    assert_eq!(read(first.addr), 1, "the other region keeps its page");
}

#[test]
fn protect_applies_to_mapped_pages_and_to_those_touched_later() {
    let (vm, vr) = regions();
    let probe = Probe::new().unwrap();
    let r = vr
        .map(&mut vm.lock(), 4 * PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    write(page(&r, 0), 7);
    vr.protect(&mut vm.lock(), r, Rights::READ).unwrap();
    assert!(
        !probe.write(page(&r, 0), 8),
        "a mapped page turned read-only"
    );
    assert_eq!(probe.read(page(&r, 0)), Some(7));
    assert_eq!(read(page(&r, 1)), 0, "a page touched later is made");
    assert!(!probe.write(page(&r, 1), 8), "read-only, as the region");
    vr.protect(&mut vm.lock(), r, Rights::NONE).unwrap();
    assert_eq!(probe.read(page(&r, 0)), None, "no access at all");
    vr.protect(&mut vm.lock(), r, Rights::RW).unwrap();
    assert!(probe.write(page(&r, 1), 9));
    assert_eq!(read(page(&r, 0)), 7, "contents survive protection changes");
    assert_eq!(read(page(&r, 1)), 9);
}

#[test]
fn one_frame_regions_show_the_applications_frame_and_leave_it_behind() {
    let (vm, vr) = regions();
    // The application's frame: two pages at physical 1 MiB, root slot 10.
    let frame = common::slot(&vm, 10);
    vm.lock()
        .retype(
            vm.boot().ram,
            retype_core::caps::CapType::Frame,
            MIB,
            2 * PAGE,
            1,
            frame,
        )
        .unwrap();
    vm.lock()
        .memory()
        .write(MIB + PAGE, &42u64.to_ne_bytes())
        .unwrap();
    let before = vr.free_bytes();
    let r = vr
        .map(
            &mut vm.lock(),
            PAGE,
            Rights::RW,
            Memobj::OneFrame {
                frame,
                offset: PAGE,
            },
        )
        .unwrap();
    assert_eq!(read(r.addr), 42, "the frame's second page, on first touch");
    write(r.addr + 8, 43);
    vr.unmap(&mut vm.lock(), r).unwrap();
    let mut b = [0u8; 8];
    vm.lock().memory().read(MIB + PAGE + 8, &mut b).unwrap();
    assert_eq!(u64::from_ne_bytes(b), 43, "the write went to the frame");
    assert!(vm.lock().caps().get(frame).is_ok(), "the frame stays");
    // Only the page tables of the first mapping came from the regions.
    assert_eq!(before - vr.free_bytes(), PAGE);
}

#[test]
fn pinned_regions_are_mapped_whole_across_page_tables() {
    let (vm, vr) = regions();
    let probe = Probe::new().unwrap();
    // 511 pages first, so the pinned region crosses into the next table.
    let lead = vr
        .map(&mut vm.lock(), 511 * PAGE, Rights::RW, Memobj::Anonymous)
        .unwrap();
    let r = vr
        .map(&mut vm.lock(), 3 * PAGE, Rights::READ, Memobj::Pinned)
        .unwrap();
    assert_eq!(r.va, lead.size);
    assert_eq!(vr.resident(r).unwrap(), 3, "mapped before any touch");
    for i in 0..3 {
        assert_eq!(probe.read(page(&r, i)), Some(0), "page {i}, zeroed");
        assert!(!probe.write(page(&r, i), 1), "page {i}, read-only");
    }
    let before = vr.free_bytes();
    vr.unmap(&mut vm.lock(), r).unwrap();
    assert_eq!(vr.free_bytes() - before, 3 * PAGE);
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let (vm, vr) = regions();
    let beyond = vm.len() as u64 + PAGE;
    assert!(matches!(
        Vregions::new(&vm, 0..beyond, 4 * MIB..12 * MIB, 16..256),
        Err(VmError::NotInWindow)
    ));
    assert!(Vregions::new(&vm, 0..8 * MIB, 4 * MIB + 1..12 * MIB, 16..256).is_err());
    assert!(vr
        .map(&mut vm.lock(), PAGE + 1, Rights::RW, Memobj::Anonymous)
        .is_err());
    assert!(vr
        .map(&mut vm.lock(), 0, Rights::RW, Memobj::Anonymous)
        .is_err());
    let big = vr
        .map(&mut vm.lock(), 8 * MIB, Rights::RW, Memobj::Anonymous)
        .unwrap();
    assert!(matches!(
        vr.map(&mut vm.lock(), PAGE, Rights::RW, Memobj::Anonymous),
        Err(VmError::Exhausted(_))
    ));
    vr.unmap(&mut vm.lock(), big).unwrap();
    // More pinned memory than the regions' RAM: refused, nothing kept.
    let free = vr.free_bytes();
    assert!(matches!(
        vr.map(&mut vm.lock(), 8 * MIB, Rights::RW, Memobj::Pinned),
        Err(VmError::Exhausted(_))
    ));
    let after = vr.free_bytes();
    assert!(
        after <= free && free - after <= 4 * PAGE,
        "only page tables kept"
    );
    vr.map(&mut vm.lock(), 8 * MIB, Rights::RW, Memobj::Anonymous)
        .expect("the address space came back");
}
