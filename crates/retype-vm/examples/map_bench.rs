//! Seed 001 Figure 3.3 here: map, protect and unmap of buffers from 4 KiB
//! up, time per page, ours against raw Linux, one JSON line per size.
//!
//! cargo run --release -p retype-vm --example map_bench [MAX_MIB] [ROUNDS]

use retype_vm::bench::map_protect_unmap;
use retype_vm::Backing;

fn main() {
    let mut args = std::env::args().skip(1);
    let max_mib: u64 = args.next().map_or(1024, |a| a.parse().expect("MAX_MIB"));
    let rounds: u32 = args.next().map_or(9, |a| a.parse().expect("ROUNDS"));
    for backing in [Backing::Small, Backing::Huge2M] {
        let mut bytes = backing.page();
        if let Err(why) = backing.available(max_mib << 20) {
            eprintln!("{} KiB pages skipped: {why}", backing.page() >> 10);
            continue;
        }
        while bytes <= max_mib << 20 {
            match map_protect_unmap(bytes, backing, rounds) {
                Ok(row) => println!("{}", row.json()),
                Err(e) => eprintln!("{bytes} bytes: {e}"),
            }
            bytes *= 4;
        }
    }
}
