//! An application that maps frames through capabilities, takes a fault in
//! its own handler (a write barrier) and reads the dirty bits of a mapping.
//!
//! cargo run -p retype-vm --example tour

use retype_core::caps::types::{CapType, PAGE};
use retype_core::caps::{CapRef, Rights};
use retype_vm::{Options, Resolution, Vm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 64 MiB of memfd memory under RAM capabilities; a root page directory
    // whose 512 entries cover a reserved 1 GiB window.
    let vm = Vm::new(Options::default())?;
    let b = vm.boot();
    let slot = |i| CapRef::l1(b.cspace, i);
    let (pt, frame, m) = (slot(4), slot(5), slot(7));
    {
        let mut s = vm.lock();
        s.retype(b.ram, CapType::X86Ptable, 32 << 20, PAGE, 1, pt)?;
        s.retype(b.ram, CapType::Frame, 0, 16 * PAGE, 1, frame)?;
        let root = s.root();
        s.map(root, pt, 0, 0, 1, Rights::RW, slot(6))?; // PT at PD entry 0
        s.map(pt, frame, 0, 0, 16, Rights::READ, m)?; // 16 pages, read-only
        let refused = s.map(pt, b.ram, 16, 0, 1, Rights::RW, slot(8));
        println!(
            "mapping RAM (no Frame capability): {}",
            refused.unwrap_err()
        );
    }
    // The first write to a page traps to this handler, which makes the page
    // writable through the Mapping capability; the write then resumes.
    vm.on_fault(move |s, f| {
        println!("fault at window offset {:#x}, write: {}", f.va, f.write);
        match s.modify_flags(m, f.va / PAGE, 1, Rights::RW) {
            Ok(()) => Resolution::Retry,
            Err(_) => Resolution::Fail,
        }
    });
    let page = |i: usize| (vm.base() + i * PAGE as usize) as *mut u64;
    // SAFETY: window pages mapped above; the handler resolves the write fault.
    unsafe {
        page(3).write_volatile(42);
        page(3).add(1).write_volatile(43); // no second fault: already writable
        println!("read back {}", page(3).read_volatile());
        println!("page 5 reads {} (no fault)", page(5).read_volatile());
    }
    match vm.lock().dirty(m, 0, 16, true) {
        Ok(bits) => {
            let dirty: Vec<usize> = (0..16).filter(|&i| bits[i]).collect();
            println!("dirty pages of the mapping: {dirty:?} (now cleared)");
        }
        Err(e) => println!("dirty bits: {e}"),
    }
    vm.lock().revoke(frame)?;
    println!(
        "after revoking the frame, page 3 is {:?}",
        vm.lock().translate(3 * PAGE)
    );
    Ok(())
}
