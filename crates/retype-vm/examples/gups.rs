//! Seed 001 Table 3.1 here: HPCC RandomAccess GUPS by table size and page
//! size, ours against Linux, one JSON line per row.
//!
//! cargo run --release -p retype-vm --example gups [MAX_MIB] [UPDATES] [REPS]

use retype_vm::bench::gups::random_access;
use retype_vm::Backing;

fn main() {
    let mut args = std::env::args().skip(1);
    let max_mib: u64 = args.next().map_or(1024, |a| a.parse().expect("MAX_MIB"));
    let updates: u64 = args.next().map_or(1 << 24, |a| a.parse().expect("UPDATES"));
    let reps: u32 = args.next().map_or(3, |a| a.parse().expect("REPS"));
    for backing in [Backing::Small, Backing::Huge2M] {
        // Ours and Linux each hold a table of the largest size at once.
        if let Err(why) = backing.available(2 * (max_mib << 20) + (4 << 20)) {
            eprintln!("{} KiB pages skipped: {why}", backing.page() >> 10);
            continue;
        }
        // 1 MiB, 4 MiB, ... for both page sizes, so that rows line up.
        let sizes = (0..).map(|k| 1u64 << (20 + 2 * k));
        for bytes in sizes.take_while(|&b| b <= max_mib << 20) {
            if bytes < backing.page() {
                continue;
            }
            match random_access(bytes, backing, updates, reps) {
                Ok(row) => println!("{}", row.json()),
                Err(e) => eprintln!("{bytes} bytes: {e}"),
            }
        }
    }
}
