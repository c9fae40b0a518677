//! The allocator's address space at the peak, read from the process
//! (`/proc/PID/smaps`), as seed 003 asks TLM to find holes in it.
//!
//! A run of its own (untimed) gives the workload `TLM_SMAPS`: its workers
//! meet at the peak (the last growing round's blocks all allocated and
//! touched) and one copies `/proc/self/smaps`, followed by the bytes of the
//! program's own anonymous memory (its tables and the workers' stacks) and
//! the part of it resident. The rest of the anonymous memory is the
//! allocator's (with the C library's few pages of its own): its address
//! space, the part of it resident, and, against the bytes the workers hold
//! (every page of which they touched), the resident bytes that are not
//! theirs (the allocator's bookkeeping and the free memory it keeps
//! resident) and the mapped bytes that are not resident (holes: reserved,
//! returned or never touched).

use std::ffi::OsStr;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::workload::{self, Plan};

/// The anonymous mappings of one smaps snapshot, added up, and the
/// program's own part of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Anonymous {
    pub size_bytes: u64,
    pub rss_bytes: u64,
    pub own_bytes: u64,
    pub own_rss_bytes: u64,
}

impl Anonymous {
    /// Reads an smaps text: each mapping's header line, then its `Key: N kB`
    /// fields, and the workload's line `tlm-own BYTES RESIDENT` at the end.
    /// Anonymous: no file (inode 0) and no name but `[heap]` or an
    /// `[anon:…]` label, so the main stack, the vDSO and files are left out.
    pub fn parse(text: &str) -> Result<Anonymous> {
        let mut total = Anonymous::default();
        let mut counted = false;
        let mut own = None;
        for (n, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if first == "tlm-own" {
                let v: Vec<u64> = words.filter_map(|w| w.parse().ok()).collect();
                let [bytes, rss] = v[..] else {
                    bail!(
                        "smaps line {}: not `tlm-own BYTES RESIDENT`: {line:?}",
                        n + 1
                    );
                };
                own = Some((bytes, rss));
                continue;
            }
            if let Some(key) = first.strip_suffix(':') {
                if !counted || !(key == "Size" || key == "Rss") {
                    continue;
                }
                let kib: u64 = words
                    .next()
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("smaps line {}: {line:?}", n + 1))?;
                if key == "Size" {
                    total.size_bytes += kib << 10;
                } else {
                    total.rss_bytes += kib << 10;
                }
                continue;
            }
            // A header: range perms offset dev inode [name].
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 5 || !first.contains('-') {
                bail!(
                    "smaps line {}: neither a mapping nor a field: {line:?}",
                    n + 1
                );
            }
            let name = fields.get(5).copied().unwrap_or("");
            counted = fields[4] == "0"
                && (name.is_empty() || name == "[heap]" || name.starts_with("[anon:"));
        }
        let (own_bytes, own_rss_bytes) =
            own.context("no `tlm-own` line: not a snapshot of the TLM workload")?;
        Ok(Anonymous {
            own_bytes,
            own_rss_bytes,
            ..total
        })
    }
}

/// The allocator's address space at the peak, from the two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Space {
    /// The bytes the workers hold at the peak.
    pub live_bytes: u64,
    /// The allocator's anonymous address space.
    pub mapped_bytes: i64,
    /// The part of it resident.
    pub resident_bytes: i64,
    /// Resident bytes that are not the workers' blocks: bookkeeping and the
    /// free memory kept resident.
    pub overhead_bytes: i64,
    /// Mapped bytes not resident: holes.
    pub hole_bytes: i64,
}

impl Space {
    pub fn at(peak: Anonymous, live_bytes: u64) -> Space {
        let mapped = peak.size_bytes as i64 - peak.own_bytes as i64;
        let resident = peak.rss_bytes as i64 - peak.own_rss_bytes as i64;
        Space {
            live_bytes,
            mapped_bytes: mapped,
            resident_bytes: resident,
            overhead_bytes: resident - live_bytes as i64,
            hole_bytes: mapped - resident,
        }
    }
}

/// Runs `exe` for `plan` once more with `env`, its snapshots written into
/// `dir`, and reads them.
pub fn measure(exe: &Path, plan: &Plan, env: &[(&str, &OsStr)], dir: &Path) -> Result<Space> {
    let path = dir.join("smaps");
    let env = [env, &[("TLM_SMAPS", path.as_os_str())]].concat();
    workload::run(exe, plan, &env)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let peak = Anonymous::parse(&text).with_context(|| path.display().to_string())?;
    std::fs::remove_file(&path).ok();
    Ok(Space::at(peak, plan.peak_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAPSHOT: &str = "\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                  12 kB
7f0000000000-7f0000400000 rw-p 00000000 00:00 0 
Size:               4096 kB
KernelPageSize:        4 kB
Rss:                1024 kB
7f0000400000-7f0000401000 r-xp 00000000 08:01 1234                       /usr/lib/libc.so.6
Size:                  4 kB
Rss:                   4 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  16 kB
tlm-own 8192 4096
";

    #[test]
    fn only_anonymous_mappings_count() {
        let a = Anonymous::parse(SNAPSHOT).unwrap();
        assert_eq!(a.size_bytes, (132 + 4096) << 10);
        assert_eq!(a.rss_bytes, (12 + 1024) << 10);
        assert_eq!((a.own_bytes, a.own_rss_bytes), (8192, 4096));
        let without = SNAPSHOT.replace("tlm-own 8192 4096\n", "");
        assert!(Anonymous::parse(&without).is_err());
    }

    #[test]
    fn a_line_of_neither_kind_is_an_error_with_its_number() {
        let e = Anonymous::parse("Size: 4 kB\nnonsense\ntlm-own 0 0\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn the_workload_holds_its_blocks_resident_at_the_peak() {
        let plan = Plan {
            threads: 2,
            size: 16 << 10,
            rounds: 3,
            steady: 1,
            blocks: 32,
        };
        let dir = std::env::temp_dir().join(format!("retype-space-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = measure(&workload::build().unwrap(), &plan, &[], &dir).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(s.live_bytes, plan.peak_bytes());
        // Every page of every block was touched: resident, whatever glibc keeps.
        assert!(s.resident_bytes >= s.live_bytes as i64, "{s:?}");
        assert!(s.mapped_bytes >= s.resident_bytes, "{s:?}");
    }

    #[test]
    fn the_programs_own_memory_is_not_the_allocators() {
        let peak = Anonymous {
            size_bytes: 20 << 20,
            rss_bytes: 6 << 20,
            own_bytes: 2 << 20,
            own_rss_bytes: 1 << 20,
        };
        let s = Space::at(peak, 4 << 20);
        assert_eq!((s.mapped_bytes, s.resident_bytes), (18 << 20, 5 << 20));
        assert_eq!((s.overhead_bytes, s.hole_bytes), (1 << 20, 13 << 20));
    }
}
