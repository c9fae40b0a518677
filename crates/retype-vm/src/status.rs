//! Page status bits through PAGEMAP_SCAN (Linux 6.7), an ioctl on
//! /proc/self/pagemap that reports page categories by range and, for pages
//! under asynchronous userfaultfd write protection, can write-protect what
//! it reports in the same walk: a per-range read-and-clear of dirty bits.
//!
//! Why not soft-dirty: it needs CONFIG_MEM_SOFT_DIRTY (off in this kernel),
//! and clearing it (`echo 4 > /proc/self/clear_refs`) is process-wide, so one
//! range's clear would lose every other range's bits.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::error::VmError;

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
struct ScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Region {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 = (3 << 30) | ((size_of::<ScanArg>() as u64) << 16) | (0x66 << 8) | 16;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
/// Written since write protection was last applied.
pub const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// Present in this mapping's page table.
pub const PAGE_IS_PRESENT: u64 = 1 << 3;

/// An open /proc/self/pagemap.
#[derive(Debug)]
pub struct Pagemap(File);

impl Pagemap {
    pub fn open() -> Result<Pagemap, VmError> {
        File::open("/proc/self/pagemap")
            .map(Pagemap)
            .map_err(|err| VmError::Os {
                call: "open /proc/self/pagemap",
                err,
            })
    }

    /// The address ranges in `[start, end)` that have `category`; with
    /// `clear`, write-protects them as it reports them (dirty bits only).
    pub fn scan(
        &self,
        start: usize,
        end: usize,
        category: u64,
        clear: bool,
    ) -> Result<Vec<(usize, usize)>, VmError> {
        let mut out = Vec::new();
        let mut buf = [Region::default(); 64];
        let mut at = start as u64;
        while at < end as u64 {
            let mut arg = ScanArg {
                size: size_of::<ScanArg>() as u64,
                flags: if clear {
                    PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC
                } else {
                    0
                },
                start: at,
                end: end as u64,
                vec: buf.as_mut_ptr() as u64,
                vec_len: buf.len() as u64,
                category_mask: category,
                return_mask: category,
                ..ScanArg::default()
            };
            // SAFETY: `arg` and the region buffer it points to are valid for the call.
            let n = unsafe { libc::ioctl(self.0.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg) };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                return Err(match err.raw_os_error() {
                    Some(libc::ENOTTY | libc::EINVAL) => {
                        VmError::Unsupported(format!("PAGEMAP_SCAN (Linux 6.7): {err}"))
                    }
                    _ => VmError::Os {
                        call: "PAGEMAP_SCAN",
                        err,
                    },
                });
            }
            out.extend(
                buf[..n as usize]
                    .iter()
                    .map(|r| (r.start as usize, r.end as usize)),
            );
            at = arg.walk_end;
        }
        Ok(out)
    }
}

/// For each of `count` pages of `size` bytes from `start`, whether any
/// byte lies in one of `regions` (sorted, disjoint).
pub fn per_page(regions: &[(usize, usize)], start: usize, size: usize, count: usize) -> Vec<bool> {
    let mut out = vec![false; count];
    for &(s, e) in regions {
        let first = s.saturating_sub(start) / size;
        let last = (e - start).div_ceil(size).min(count);
        out[first.min(count)..last].fill(true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::per_page;

    #[test]
    fn regions_mark_the_pages_they_touch() {
        let r = [(0x1000, 0x2000), (0x3800, 0x5000)];
        assert_eq!(
            per_page(&r, 0x1000, 0x1000, 5),
            [true, false, true, true, false]
        );
        assert_eq!(per_page(&r, 0, 0x4000, 2), [true, true]);
        assert_eq!(per_page(&[], 0, 0x1000, 2), [false, false]);
    }
}
