//! HPCC RandomAccess (seed 001 §3.6.3, Table 3.1): 64-bit read-modify-write
//! updates at random places of a table, single thread, in giga-updates per
//! second, ours (the table is a Frame mapped through capabilities with the
//! page size asked for) against Linux (a memfd of the same pages, `mmap`).
//!
//! The update stream is HPCC's: starting from 1 (HPCC_starts(0)), each value
//! is the previous shifted left by one, XORed with the polynomial 7 when its
//! top bit was set, and XORed into the table entry its low bits name. HPCC
//! runs 4 updates per entry; `updates` is left to the caller so that large
//! tables finish in seconds. Running the stream twice restores the table
//! (XOR), which checks every update landed.

use std::time::Instant;

use super::median;
use super::mpu::{Linux, Ours};
use retype_vm::Backing;
use retype_vm::VmError;

const POLY: u64 = 7;

/// One table size and page size: median GUPS (ours, Linux).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GupsRow {
    pub bytes: u64,
    pub page: u64,
    pub updates: u64,
    pub gups: (f64, f64),
}

impl GupsRow {
    /// One JSON object (the keys are the interface).
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"gups\",\"bytes\":{},\"page_kib\":{},\"updates\":{},\"gups\":{:.5},\"linux_gups\":{:.5}}}",
            self.bytes,
            self.page >> 10,
            self.updates,
            self.gups.0,
            self.gups.1
        )
    }
}

/// `count` updates of HPCC's stream on `table`; returns the seconds taken.
fn update(table: &mut [u64], count: u64) -> f64 {
    let mask = table.len() as u64 - 1;
    let mut ran = 1u64;
    let t = Instant::now();
    for _ in 0..count {
        ran = (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 };
        table[(ran & mask) as usize] ^= ran;
    }
    t.elapsed().as_secs_f64()
}

/// Fills the table with its indices, runs the stream (timed), runs it
/// again and checks the table is back: GUPS.
fn gups(table: &mut [u64], count: u64) -> f64 {
    table
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as u64);
    let s = update(table, count);
    update(table, count);
    let bad = table
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v != i as u64)
        .count();
    assert_eq!(
        bad, 0,
        "RandomAccess: {bad} entries wrong after undoing the updates"
    );
    count as f64 / s / 1e9
}

/// `reps` runs of `updates` updates on a `bytes` table (a power of two) of
/// `backing` pages, ours then Linux in each. Each run builds its table and
/// frees it after, so only one side's memory is held at a time: a machine
/// with room (or huge pages) for one table of the size can run the row.
pub fn random_access(
    bytes: u64,
    backing: Backing,
    updates: u64,
    reps: u32,
) -> Result<GupsRow, VmError> {
    if !bytes.is_power_of_two() || bytes < backing.page() || updates == 0 || reps == 0 {
        return Err(VmError::PageSize {
            asked: bytes,
            backing: backing.page(),
        });
    }
    let n = (bytes / 8) as usize;
    let ours = || -> Result<f64, VmError> {
        let mut ours = Ours::new(bytes, backing)?;
        ours.map()?;
        // SAFETY: the table is mapped read-write for `bytes` bytes, page
        // aligned, and nothing else refers to it while the slice lives.
        let t = unsafe { std::slice::from_raw_parts_mut(ours.vm.base() as *mut u64, n) };
        Ok(gups(t, updates))
    };
    let linux = || -> Result<f64, VmError> {
        let mut linux = Linux::new(bytes, backing)?;
        linux.map()?;
        // SAFETY: as above, for the Linux mapping.
        let t = unsafe { std::slice::from_raw_parts_mut(linux.at as *mut u64, n) };
        let g = gups(t, updates);
        linux.unmap()?;
        Ok(g)
    };
    let (mut go, mut gl) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        go.push(ours()?);
        gl.push(linux()?);
    }
    Ok(GupsRow {
        bytes,
        page: backing.page(),
        updates,
        gups: (median(&mut go), median(&mut gl)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_tables_take_every_update() {
        let r = random_access(1 << 20, Backing::Small, 1 << 16, 1).unwrap();
        assert!(r.gups.0 > 0.0 && r.gups.1 > 0.0, "{r:?}");
        assert!(r
            .json()
            .starts_with("{\"bench\":\"gups\",\"bytes\":1048576,\"page_kib\":4,"));
    }

    #[test]
    fn one_gib_pages_map_the_table_where_two_are_free() {
        // Ours: the table's page and one for the root table after it.
        if let Err(why) = Backing::Huge1G.available(2 << 30) {
            eprintln!("skipped: {why}");
            return;
        }
        let r = random_access(1 << 30, Backing::Huge1G, 1 << 12, 1).unwrap();
        assert!(r.gups.0 > 0.0 && r.gups.1 > 0.0, "{r:?}");
        assert!(r.json().contains("\"page_kib\":1048576,"));
    }

    #[test]
    fn the_stream_is_hpccs() {
        // From 1: doubling until the top bit, then the polynomial folds in.
        let mut t = vec![0u64; 1 << 4];
        update(&mut t, 3);
        assert_eq!(&t[..9], &[0, 0, 2, 0, 4, 0, 0, 0, 8]);
        let mut ran = 1u64 << 63;
        ran = (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 };
        assert_eq!(ran, 7);
    }
}
