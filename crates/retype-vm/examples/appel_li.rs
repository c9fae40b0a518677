//! Seed 001 Figure 3.2 here: Appel and Li's trap benchmarks, ours against
//! Linux's mprotect + SIGSEGV, one JSON line.
//!
//! cargo run --release -p retype-vm --example appel_li [ROUNDS] [TRAPS] [REPS]

use retype_vm::bench::appel::appel_li;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |d: u32| args.next().map_or(d, |a| a.parse().expect("a number"));
    let (rounds, traps, reps) = (next(1000), next(100_000), next(5));
    match appel_li(rounds, traps, reps) {
        Ok(row) => println!("{}", row.json()),
        Err(e) => eprintln!("appel-li: {e}"),
    }
}
