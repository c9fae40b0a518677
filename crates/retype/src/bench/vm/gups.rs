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
//!
//! [`spread`] keeps every run instead of the median (Figure 3.5: the
//! thesis found GUPS multimodal from run to run on Linux, and not on
//! Barrelfish).

use std::time::Instant;

use super::dist::Dist;
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
/// `backing` pages, ours then Linux in each: the GUPS of every run (ours,
/// Linux). Each run builds its table and frees it after, so only one
/// side's memory is held at a time: a machine with room (or huge pages) for
/// one table of the size can run the row.
fn runs(
    bytes: u64,
    backing: Backing,
    updates: u64,
    reps: u32,
) -> Result<(Vec<f64>, Vec<f64>), VmError> {
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
    Ok((go, gl))
}

/// Median GUPS of `reps` runs (see [`runs`]).
pub fn random_access(
    bytes: u64,
    backing: Backing,
    updates: u64,
    reps: u32,
) -> Result<GupsRow, VmError> {
    let (mut go, mut gl) = runs(bytes, backing, updates, reps)?;
    Ok(GupsRow {
        bytes,
        page: backing.page(),
        updates,
        gups: (median(&mut go), median(&mut gl)),
    })
}

/// GUPS of every run at one table and page size: (ours, Linux).
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadRow {
    pub bytes: u64,
    pub page: u64,
    pub updates: u64,
    pub ours: Dist,
    pub linux: Dist,
}

impl SpreadRow {
    /// One JSON object (the keys are the interface): each side's runs and
    /// summary under its prefix.
    pub fn json(&self) -> String {
        let side = |p: &str, d: &Dist| {
            let runs: Vec<String> = d.sorted.iter().map(|g| format!("{g:.5}")).collect();
            let bc = if d.bimodality.is_finite() {
                format!("{:.3}", d.bimodality)
            } else {
                "null".into()
            };
            format!(
                "\"{p}runs\":[{}],\"{p}min\":{:.5},\"{p}q1\":{:.5},\"{p}median\":{:.5},\"{p}q3\":{:.5},\"{p}max\":{:.5},\"{p}bimodality\":{bc},\"{p}gap\":{:.3}",
                runs.join(","),
                d.min,
                d.q1,
                d.median,
                d.q3,
                d.max,
                d.gap
            )
        };
        format!(
            "{{\"bench\":\"gups-spread\",\"bytes\":{},\"page_kib\":{},\"updates\":{},{},{}}}",
            self.bytes,
            self.page >> 10,
            self.updates,
            side("", &self.ours),
            side("linux_", &self.linux)
        )
    }
}

/// `reps` runs (see [`runs`]), every one kept.
pub fn spread(bytes: u64, backing: Backing, updates: u64, reps: u32) -> Result<SpreadRow, VmError> {
    let (go, gl) = runs(bytes, backing, updates, reps)?;
    Ok(SpreadRow {
        bytes,
        page: backing.page(),
        updates,
        ours: Dist::of(&go),
        linux: Dist::of(&gl),
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

    /// Every run is kept on both sides, sorted, its summary within it.
    #[test]
    fn the_spread_keeps_every_run() {
        let r = spread(1 << 20, Backing::Small, 1 << 14, 5).unwrap();
        for d in [&r.ours, &r.linux] {
            assert_eq!(d.sorted.len(), 5, "{r:?}");
            assert!(d.sorted.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
            assert!(d.min > 0.0 && d.min <= d.median && d.median <= d.max);
        }
        let j: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(j["bench"], "gups-spread");
        assert_eq!(j["linux_runs"].as_array().map(Vec::len), Some(5));
        assert_eq!(j["runs"].as_array().map(Vec::len), Some(5));
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
