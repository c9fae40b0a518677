//! The figures seed 000 publishes (Tables 4.3, 4.4 and 4.5), to print beside
//! ours. Fragmentation in KiB: watermarking, alignment, total; the
//! applications' peak footprints.

use super::spec::App;

/// One column of the thesis's tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Published {
    pub peak: [f64; 3],
    pub avg: [f64; 3],
    /// Slab resets, total and per 100 allocation requests (Table 4.4 only).
    pub resets: Option<(u64, f64)>,
}

/// Which of the thesis's two allocators: `best` fit or (blind) `next` fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    Best,
    Next,
}

/// Tables 4.3 and 4.4: the uniform runs, seed 42, 1000 requests.
pub fn uniform(free_percent: u32, a: Allocator) -> Option<Published> {
    use Allocator::*;
    let p = |peak, avg, resets| {
        Some(Published {
            peak,
            avg,
            resets: Some(resets),
        })
    };
    match (free_percent, a) {
        (16, Best) => p(
            [553.80, 411.77, 951.66],
            [281.05, 231.73, 512.79],
            (30, 3.55),
        ),
        (16, Next) => p(
            [1106.69, 477.67, 1584.36],
            [407.09, 299.89, 706.98],
            (23, 2.71),
        ),
        (32, Best) => p(
            [865.92, 381.89, 1237.80],
            [442.09, 184.08, 626.17],
            (37, 5.17),
        ),
        (32, Next) => p(
            [1267.75, 449.03, 1691.00],
            [726.41, 267.21, 993.61],
            (24, 3.35),
        ),
        (48, Best) => p([282.95, 67.78, 340.09], [79.02, 11.03, 90.05], (158, 29.81)),
        (48, Next) => p(
            [785.69, 193.91, 979.59],
            [306.84, 80.35, 387.19],
            (13, 2.45),
        ),
        (64, Best) => p([36.34, 0.67, 36.44], [0.42, 0.02, 0.45], (422, 84.06)),
        (64, Next) => p([72.16, 15.98, 81.97], [6.03, 1.76, 7.79], (238, 47.41)),
        _ => None,
    }
}

/// Table 4.5: the application sequences 1–3.
pub fn sequence(n: usize, a: Allocator) -> Option<Published> {
    use Allocator::*;
    let p = |peak, avg| {
        Some(Published {
            peak,
            avg,
            resets: None,
        })
    };
    match (n, a) {
        (1, Best) => p([0.00, 0.19, 0.19], [0.00, 0.00, 0.00]),
        (1, Next) => p([0.00, 5.75, 5.75], [0.00, 4.81, 4.81]),
        (2, Best) => p([76.31, 28.38, 99.94], [0.24, 17.73, 17.96]),
        (2, Next) => p([212.25, 46.88, 230.69], [1.03, 29.27, 30.29]),
        (3, Best) => p([48.50, 13.94, 62.00], [1.01, 10.80, 11.81]),
        (3, Next) => p([309.56, 34.12, 334.00], [63.99, 20.88, 84.87]),
        _ => None,
    }
}

/// Each standalone application's peak footprint as §4.1.3 states it: bytes
/// and objects in use at the peak.
pub fn app_peak(app: App) -> (u64, u64) {
    match app {
        App::Hello => (46_400, 15),
        App::Timer => (104_448, 29),
        App::Fibonacci => (208_896, 58),
        App::Mltest => (1_157_376, 285),
    }
}
