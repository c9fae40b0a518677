//! Seed 001 Table 3.4 here: a GCBench-like mostly-concurrent collector
//! finding modified pages by dirty bits in one run and by protection traps
//! in the other, configurations C1 up to MAX, one JSON line each.
//!
//! cargo run --release -p retype-vm --example gcbench [MAX] [REPS]

use retype_vm::bench::gc::gcbench;

fn main() {
    let mut args = std::env::args().skip(1);
    let max: u32 = args.next().map_or(4, |a| a.parse().expect("MAX (1 to 5)"));
    let reps: u32 = args.next().map_or(3, |a| a.parse().expect("REPS"));
    for config in 1..=max {
        match gcbench(config, reps) {
            Ok(row) => println!("{}", row.json()),
            Err(e) => eprintln!("C{config}: {e}"),
        }
    }
}
