//! Dirty and accessed bits as invocations on a mapping.

mod common;

use common::*;
use retype_core::caps::types::PAGE;
use retype_core::caps::Rights;
use retype_vm::{Options, Probe, VmError};

#[test]
fn dirty_bits_of_a_range_are_read_and_cleared() {
    let vm = space();
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 4), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 4, Rights::RW, m).unwrap();
    let dirty = |clear| vm.lock().dirty(m, 0, 4, clear);
    match dirty(false) {
        Err(VmError::Unsupported(why)) => {
            eprintln!("skipped: no dirty bits here: {why}");
            return;
        }
        r => assert_eq!(r.unwrap(), [false; 4], "a new mapping is clean"),
    }
    let p = Probe::new().unwrap();
    let page = |i: u64| vm.base() + (i * PAGE) as usize;
    assert_eq!(p.read(page(0)), Some(0), "reading does not dirty");
    // SAFETY: a mapped, writable window page.
    unsafe { (page(1) as *mut u64).write_volatile(1) };
    assert!(p.write(page(3), 3), "a write through the kernel counts too");
    assert_eq!(dirty(true).unwrap(), [false, true, false, true]);
    assert_eq!(dirty(false).unwrap(), [false; 4], "cleared");
    // SAFETY: as above.
    unsafe { (page(0) as *mut u64).write_volatile(2) };
    assert_eq!(vm.lock().dirty(m, 0, 2, false).unwrap(), [true, false]);
    assert_eq!(vm.lock().dirty(m, 3, 1, false).unwrap(), [false]);
    // A page made inaccessible by removing its entries reads dirty and
    // accessed (its entry held the bits): a collector rescans, never misses.
    vm.lock().modify_flags(m, 2, 1, Rights::NONE).unwrap();
    let hidden = vm.lock().hides();
    assert_eq!(dirty(false).unwrap(), [true, false, hidden, false]);
    assert_eq!(vm.lock().accessed(m, 2, 1).unwrap(), [hidden]);
    let e = vm.lock().dirty(m, 3, 2, false);
    assert!(matches!(e, Err(VmError::Cap(_))), "{e:?}");
    let e = vm.lock().dirty(f, 0, 1, false);
    assert!(
        matches!(e, Err(VmError::Cap(_))),
        "a Frame is not a mapping: {e:?}"
    );
}

#[test]
fn a_space_without_dirty_bits_says_so() {
    let vm = space_with(Options {
        ram: 16 * MIB,
        dirty_bits: false,
        ..Options::default()
    });
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 1), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 1, Rights::RW, m).unwrap();
    let e = vm.lock().dirty(m, 0, 1, false);
    assert!(matches!(e, Err(VmError::Unsupported(_))), "{e:?}");
}

#[test]
fn accessed_pages_are_the_ones_touched_since_mapping() {
    let vm = space();
    let (pt, m, m2) = (slot(&vm, 4), slot(&vm, 11), slot(&vm, 13));
    let f = frame(&vm, 10, 0, 4);
    let far = frame(&vm, 12, 4 * MIB, 1);
    vm.lock().map(pt, f, 0, 0, 4, Rights::RW, m).unwrap();
    vm.lock().map(pt, far, 100, 0, 1, Rights::RW, m2).unwrap();
    match vm.lock().accessed(m, 0, 4) {
        Err(VmError::Unsupported(why)) => {
            eprintln!("skipped: no accessed bits here: {why}");
            return;
        }
        r => assert_eq!(r.unwrap(), [false; 4]),
    }
    let p = Probe::new().unwrap();
    assert_eq!(p.read(vm.base() + 2 * PAGE as usize), Some(0));
    // Neighbours of a touched page may be mapped with it (fault-around, large
    // folios), so only the touched page and another frame's page are certain.
    assert!(vm.lock().accessed(m, 2, 1).unwrap()[0]);
    assert_eq!(vm.lock().accessed(m2, 0, 1).unwrap(), [false]);
}
