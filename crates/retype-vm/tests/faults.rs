//! Faults go to the application: protection faults to its handler (the
//! access resumes once it is resolved), missing pages to its pager.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use retype_core::caps::types::PAGE;
use retype_core::caps::Rights;
use retype_vm::{Fault, Options, PageRequest, Probe, Resolution, Vm, VmError};

fn write(addr: usize, v: u64) {
    // SAFETY: a window address; a fault there goes to the space's handler,
    // which makes the page writable before the store runs again.
    unsafe { (addr as *mut u64).write_volatile(v) }
}

fn read(addr: usize) -> u64 {
    // SAFETY: a window address the test has made readable (or whose
    // missing page the pager fills).
    unsafe { (addr as *const u64).read_volatile() }
}

#[test]
fn a_write_barrier_resolves_protection_faults_and_the_write_resumes() {
    let vm = space();
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 4), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 4, Rights::READ, m).unwrap();
    let seen: Arc<Mutex<Vec<Fault>>> = Arc::default();
    let log = seen.clone();
    vm.on_fault(move |s, fault| {
        log.lock().unwrap().push(*fault);
        let page = fault.va / PAGE;
        match s.modify_flags(m, page, 1, Rights::RW) {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    });
    let page = |i: usize| vm.base() + i * PAGE as usize;
    assert_eq!(read(page(2)), 0, "reads do not fault");
    write(page(2) + 8, 42);
    write(page(2) + 16, 43);
    write(page(0), 7);
    assert_eq!(read(page(2) + 8), 42, "the faulting write took effect");
    let faults = seen.lock().unwrap().clone();
    let at: Vec<(u64, bool)> = faults.iter().map(|f| (f.va, f.write)).collect();
    #[cfg(target_arch = "x86_64")]
    assert_eq!(at, [(2 * PAGE + 8, true), (0, true)], "one trap per page");
    assert_eq!(faults[0].addr, page(2) + 8);
    let mut b = [0u8; 8];
    vm.lock().memory().read(2 * PAGE + 16, &mut b).unwrap();
    assert_eq!(u64::from_ne_bytes(b), 43);
}

/// The process's mappings (VMAs) that start in `[base, base + len)`.
fn mappings(base: usize, len: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let starts = maps.lines().filter_map(|l| l.split('-').next());
    starts
        .filter_map(|a| usize::from_str_radix(a, 16).ok())
        .filter(|&a| a >= base && a - base < len)
        .count()
}

#[test]
fn inaccessible_pages_trap_on_any_access_keep_their_contents_and_the_access_resumes() {
    let vm = space();
    // Five pages, four made inaccessible: mprotect would split the mapping
    // each time.
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 5), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 5, Rights::RW, m).unwrap();
    let page = |i: usize| vm.base() + i * PAGE as usize;
    write(page(1), 41);
    // The first time registers the range for minor faults (a split once).
    vm.lock().modify_flags(m, 0, 4, Rights::NONE).unwrap();
    vm.lock().modify_flags(m, 0, 4, Rights::RW).unwrap();
    let before = mappings(vm.base(), vm.len());
    vm.lock().modify_flags(m, 0, 4, Rights::NONE).unwrap();
    let hides = vm.lock().hides();
    if hides {
        assert_eq!(
            mappings(vm.base(), vm.len()),
            before,
            "no mapping split: only entries removed"
        );
    }
    let p = Probe::new().unwrap();
    for i in 0..4 {
        // Page 0 was never touched: not even the kernel may read it.
        assert_eq!(p.read(page(i)), None, "page {i} readable (hides: {hides})");
        assert!(!p.write(page(i), 9), "page {i} writable");
    }
    let seen: Arc<Mutex<Vec<(u64, bool)>>> = Arc::default();
    let log = seen.clone();
    vm.on_fault(move |s, fault| {
        log.lock().unwrap().push((fault.va, fault.write));
        match s.modify_flags(m, fault.va / PAGE, 1, Rights::RW) {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    });
    assert_eq!(read(page(0)), 0);
    assert_eq!(read(page(1)), 41, "the contents stayed");
    write(page(2) + 8, 42);
    assert_eq!(read(page(2) + 8), 42);
    let faults = seen.lock().unwrap().clone();
    let vas: Vec<u64> = faults.iter().map(|f| f.0).collect();
    assert_eq!(vas, [0, PAGE, 2 * PAGE + 8], "one trap per page");
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        faults.iter().map(|f| f.1).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(p.read(page(3)), None, "page 3 was left inaccessible");
    vm.lock().modify_flags(m, 3, 1, Rights::READ).unwrap();
    assert_eq!(p.read(page(3)), Some(0));
    assert!(!p.write(page(3), 1), "shown again read-only");
}

#[test]
fn an_entry_the_kernel_dropped_is_mapped_back_without_the_handler() {
    let vm = space();
    if !vm.lock().hides() {
        return; // Only a space that hides takes minor faults.
    }
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 2), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 2, Rights::RW, m).unwrap();
    let at = vm.base();
    write(at, 5);
    vm.lock().modify_flags(m, 0, 2, Rights::NONE).unwrap();
    vm.lock().modify_flags(m, 0, 2, Rights::RW).unwrap();
    vm.on_fault(|_, _| Resolution::Fail);
    // As reclaim would: the entries go, the memory stays.
    // SAFETY: window pages of a shared mapping; their contents stay in the memfd.
    let rc = unsafe {
        libc::madvise(
            at as *mut libc::c_void,
            2 * PAGE as usize,
            libc::MADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0);
    assert_eq!(read(at), 5, "mapped back, not passed to the handler");
    write(at + PAGE as usize, 6);
    assert_eq!(read(at + PAGE as usize), 6);
}

#[test]
fn a_handler_can_map_a_frame_on_first_touch() {
    let vm = space();
    let (pt, f) = (slot(&vm, 4), frame(&vm, 10, 0, 8));
    vm.lock()
        .memory()
        .write(5 * PAGE, &77u64.to_ne_bytes())
        .unwrap();
    let next = Arc::new(Mutex::new(20u32));
    let cs = vm.boot().cspace;
    vm.on_fault(move |s, fault| {
        let page = fault.va / PAGE;
        let mut n = next.lock().unwrap();
        let m = retype_core::caps::CapRef::l1(cs, *n);
        *n += 1;
        match s.map(pt, f, page, page * PAGE, 1, Rights::RW, m) {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    });
    assert_eq!(read(vm.base() + 5 * PAGE as usize), 77);
    write(vm.base() + 6 * PAGE as usize, 1);
    let mapped = vm.lock().caps().ptes().filter(|p| !p.2.table).count();
    assert_eq!(mapped, 2, "two pages were mapped on demand");
}

/// Runs `f` in a forked child and returns the signal that ended it, if any.
fn in_child(f: impl FnOnce()) -> Option<i32> {
    // SAFETY: the child only touches memory and exits; the space it faults
    // in is this test's own, not locked by any thread at the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        f();
        // SAFETY: leaves the child at once, without running parent state's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status))
}

#[test]
fn an_unresolved_fault_is_fatal_as_without_a_handler() {
    let vm = space();
    vm.on_fault(|_, _| Resolution::Fail);
    let at = vm.base() + 3 * PAGE as usize;
    assert_eq!(in_child(|| write(at, 1)), Some(libc::SIGSEGV));
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 4), slot(&vm, 11));
    vm.lock().map(pt, f, 3, 0, 1, Rights::RW, m).unwrap();
    assert_eq!(
        in_child(|| write(at, 1)),
        None,
        "a mapped page does not fault"
    );
    // A child made by fork holds its own copy of the capabilities and a
    // window without the userfaultfd (Linux drops it at fork): a space it
    // makes itself is the one whose unresolved faults it dies of.
    let died = in_child(|| {
        let vm = space();
        let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 1), slot(&vm, 11));
        vm.lock().map(pt, f, 0, 0, 1, Rights::RW, m).unwrap();
        vm.lock().modify_flags(m, 0, 1, Rights::NONE).unwrap();
        vm.on_fault(|_, _| Resolution::Fail);
        let signal = if vm.lock().hides() {
            libc::SIGBUS
        } else {
            libc::SIGSEGV
        };
        // SAFETY: only reports which signal a hidden page raises.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
        write(vm.base(), 1);
    });
    assert!(
        matches!(died, Some(libc::SIGBUS | libc::SIGSEGV)),
        "an inaccessible page: {died:?}"
    );
}

#[test]
fn missing_pages_come_from_the_applications_pager() {
    let o = Options {
        ram: 16 * MIB,
        ..Options::default()
    };
    let asked: Arc<Mutex<Vec<PageRequest>>> = Arc::default();
    let log = asked.clone();
    let vm = match Vm::with_pager(o, move |req, page| {
        log.lock().unwrap().push(*req);
        let stamp = req.va / PAGE + 1000;
        page[..8].copy_from_slice(&stamp.to_ne_bytes());
    }) {
        Ok(vm) => vm,
        Err(VmError::Unsupported(why)) => {
            eprintln!("skipped: no userfaultfd pager here: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let (pt, f) = (slot(&vm, 4), frame(&vm, 10, 0, 4));
    let ram = vm.boot().ram;
    let root = vm.lock().root();
    vm.lock()
        .retype(
            ram,
            retype_core::caps::types::CapType::X86Ptable,
            8 * MIB,
            PAGE,
            1,
            pt,
        )
        .unwrap();
    vm.lock()
        .map(root, pt, 0, 0, 1, Rights::RW, slot(&vm, 5))
        .unwrap();
    vm.lock()
        .map(pt, f, 0, 0, 4, Rights::RW, slot(&vm, 11))
        .unwrap();
    let page = |i: u64| vm.base() + (i * PAGE) as usize;
    assert_eq!(read(page(2)), 1002, "the pager filled page 2");
    write(page(3), 5);
    assert_eq!(read(page(3)), 5, "a write fault is paged in, then written");
    // The page now lives in the frame: a second mapping needs no pager.
    vm.lock()
        .map(pt, f, 10, 2 * PAGE, 1, Rights::READ, slot(&vm, 12))
        .unwrap();
    assert_eq!(read(page(10)), 1002);
    let mut b = [0u8; 8];
    vm.lock().memory().read(2 * PAGE, &mut b).unwrap();
    assert_eq!(
        u64::from_ne_bytes(b),
        1002,
        "the frame holds the paged-in page"
    );
    let asked = asked.lock().unwrap().clone();
    let vas: Vec<u64> = asked.iter().map(|r| r.va).collect();
    assert_eq!(vas, [2 * PAGE, 3 * PAGE]);
    assert!(!asked[0].write && asked[1].write);
}

#[test]
fn threads_fault_at_once_and_each_page_traps_once() {
    let vm = space();
    let (pt, f, m) = (slot(&vm, 4), frame(&vm, 10, 0, 64), slot(&vm, 11));
    vm.lock().map(pt, f, 0, 0, 64, Rights::READ, m).unwrap();
    let traps: Arc<Mutex<Vec<u64>>> = Arc::default();
    let log = traps.clone();
    vm.on_fault(move |s, fault| {
        let page = fault.va / PAGE;
        log.lock().unwrap().push(page);
        match s.modify_flags(m, page, 1, Rights::RW) {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    });
    let base = vm.base();
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            sc.spawn(move || {
                // Every thread writes every page: pages race between threads.
                for i in 0..64u64 {
                    let page = (i + 16 * t) % 64;
                    write(base + (page * PAGE + 8 * t) as usize, page + 1);
                }
            });
        }
    });
    for page in 0..64u64 {
        for t in 0..4u64 {
            assert_eq!(read(base + (page * PAGE + 8 * t) as usize), page + 1);
        }
    }
    let mut traps = traps.lock().unwrap().clone();
    traps.sort();
    let n = traps.len();
    traps.dedup();
    assert_eq!(traps, (0..64).collect::<Vec<_>>(), "every page trapped");
    // A thread that faulted while another was resolving the same page
    // retries without a change; each page is made writable at most 4 times.
    assert!(n <= 4 * 64, "{n} traps");
}
