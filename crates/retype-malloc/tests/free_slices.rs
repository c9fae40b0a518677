//! Pages released to a segment that stays in use keep their slices' pages resident only up to
//! a budget for the process (`resident::BUDGET_PAGES`, 1 MiB): past it, a release returns its
//! pages but the first. 24 pages of 256-byte blocks, each carved whole (64 KiB), are emptied
//! and given back to their segment, which a live block keeps in use: before, all of their
//! 384 OS pages stayed resident; now at most the budget's 256 and one page each. Counted
//! with `mincore`, in its own binary so that no other test's pages are counted.

use retype_malloc as rm;

const SEGMENT: usize = 2 << 20;
const OS_PAGE: usize = 4096;
/// `resident::BUDGET_PAGES`.
const BUDGET_PAGES: usize = (1 << 20) / OS_PAGE;
const PAGES: usize = 24;
const BLOCK: usize = 256;
/// Blocks of a page of 256-byte blocks, which spans one 64 KiB slice.
const PER_PAGE: usize = 64 * 1024 / BLOCK;

/// Whether the OS page holding `p` is resident.
fn resident(p: usize) -> bool {
    let mut v = 0u8;
    // SAFETY: mincore writes one byte for the one page asked about, mapped (ours).
    let rc = unsafe { libc::mincore((p & !(OS_PAGE - 1)) as *mut libc::c_void, 1, &mut v) };
    assert_eq!(rc, 0);
    v & 1 != 0
}

#[test]
fn free_slices_past_the_budget_are_returned() {
    // SAFETY: plain allocations, written within their size, each freed once.
    unsafe {
        let anchor = rm::malloc(16);
        assert!(!anchor.is_null());
        let blocks: Vec<usize> = (0..PAGES * PER_PAGE)
            .map(|_| {
                let p = rm::malloc(BLOCK);
                assert!(!p.is_null());
                p.write_bytes(1, BLOCK);
                p as usize
            })
            .collect();
        let segment = anchor as usize & !(SEGMENT - 1);
        assert!(
            blocks.iter().all(|&p| p & !(SEGMENT - 1) == segment),
            "the blocks share the anchor's segment"
        );
        let mut pages: Vec<usize> = blocks.iter().map(|&p| p / OS_PAGE).collect();
        pages.dedup();
        assert!(pages.len() >= PAGES * PER_PAGE * BLOCK / OS_PAGE);
        let count = || pages.iter().filter(|&&pg| resident(pg * OS_PAGE)).count();
        assert_eq!(count(), pages.len(), "carved pages are resident");
        for &p in &blocks {
            rm::free(p as *mut u8);
        }
        // The emptied pages go back to the segment (kept ones too), which stays in use.
        rm::trim();
        let left = count();
        assert!(
            left <= BUDGET_PAGES + PAGES,
            "{left} of {} pages still resident",
            pages.len()
        );
        rm::free(anchor);
    }
}
