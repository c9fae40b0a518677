//! The shape of repeated measurements (seed 001 Figure 3.5: GUPS from run
//! to run): five-number summary, two signs of more than one mode, and a
//! text histogram that sets two distributions side by side.
//!
//! - The bimodality coefficient (Pfister et al. 2013) is
//!   (g² + 1) / (κ + 3(n − 1)² / ((n − 2)(n − 3))), g the sample skewness
//!   and κ the sample excess kurtosis; above 5/9 (that of a uniform
//!   distribution) it suggests two modes.
//! - The largest gap between neighbouring sorted values, as a share of the
//!   range: runs that fall into separate clusters leave a wide empty band.

/// The summary of one side's runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Dist {
    /// The runs, sorted.
    pub sorted: Vec<f64>,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    /// Bimodality coefficient (NaN with fewer than four runs or all equal).
    pub bimodality: f64,
    /// Largest gap between neighbours over max − min (0 if all equal).
    pub gap: f64,
}

/// The bimodality coefficient above which two modes are suspected.
pub const BIMODAL: f64 = 5.0 / 9.0;

/// The `p` quantile (0 to 1) of sorted values, interpolated linearly.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let at = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

fn bimodality(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 4 {
        return f64::NAN;
    }
    let mean = v.iter().sum::<f64>() / n;
    let moment = |k: i32| v.iter().map(|x| (x - mean).powi(k)).sum::<f64>() / n;
    let (m2, m3, m4) = (moment(2), moment(3), moment(4));
    if m2 == 0.0 {
        return f64::NAN;
    }
    // Sample (bias-corrected) skewness and excess kurtosis.
    let g1 = m3 / m2.powf(1.5);
    let g = g1 * (n * (n - 1.0)).sqrt() / (n - 2.0);
    let k1 = m4 / (m2 * m2) - 3.0;
    let kappa = (n - 1.0) / ((n - 2.0) * (n - 3.0)) * ((n + 1.0) * k1 + 6.0);
    (g * g + 1.0) / (kappa + 3.0 * (n - 1.0).powi(2) / ((n - 2.0) * (n - 3.0)))
}

impl Dist {
    /// The summary of `runs` (at least one).
    pub fn of(runs: &[f64]) -> Dist {
        assert!(!runs.is_empty(), "a distribution of no runs");
        let mut sorted = runs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
        let widest = sorted.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
        Dist {
            min,
            q1: quantile(&sorted, 0.25),
            median: quantile(&sorted, 0.5),
            q3: quantile(&sorted, 0.75),
            max,
            bimodality: bimodality(&sorted),
            gap: if max > min { widest / (max - min) } else { 0.0 },
            sorted,
        }
    }

    /// Whether the coefficient suggests more than one mode.
    pub fn multimodal(&self) -> bool {
        self.bimodality > BIMODAL
    }

    /// Runs in each of `bins` equal bins over `[lo, hi]` (the last closed).
    pub fn counts(&self, lo: f64, hi: f64, bins: usize) -> Vec<usize> {
        let mut c = vec![0; bins];
        for &x in &self.sorted {
            let at = if hi > lo {
                ((x - lo) / (hi - lo) * bins as f64) as usize
            } else {
                0
            };
            c[at.min(bins - 1)] += 1;
        }
        c
    }
}

/// Two distributions as one text histogram over their common range: a
/// line per bin, its lower edge, then a bar of `a`'s runs and one of
/// `b`'s.
pub fn histogram(a: (&str, &Dist), b: (&str, &Dist), bins: usize) -> String {
    let lo = a.1.min.min(b.1.min);
    let hi = a.1.max.max(b.1.max);
    let (ca, cb) = (a.1.counts(lo, hi, bins), b.1.counts(lo, hi, bins));
    let wa = ca.iter().max().copied().unwrap_or(0).max(a.0.len());
    let mut out = format!("    {:>10}  {:<wa$}  {}\n", "from", a.0, b.0);
    for i in 0..bins {
        let edge = lo + (hi - lo) * i as f64 / bins as f64;
        let bar = |n: usize| "#".repeat(n);
        out += &format!("    {edge:>10.5}  {:<wa$}  {}\n", bar(ca[i]), bar(cb[i]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles_interpolate_between_runs() {
        let d = Dist::of(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!(
            (d.min, d.q1, d.median, d.q3, d.max),
            (1.0, 2.0, 3.0, 4.0, 5.0)
        );
        let d = Dist::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((d.q1, d.median, d.q3), (1.75, 2.5, 3.25));
    }

    /// Two clusters read as bimodal with a wide gap; one bell-shaped
    /// cluster does not.
    #[test]
    fn two_clusters_are_told_from_one() {
        let mut rng = retype_core::rng::SplitMix64::new(35);
        let mut noise = || (0..4).map(|_| rng.below(1000) as f64).sum::<f64>() / 4000.0;
        let one: Vec<f64> = (0..40).map(|_| 10.0 + noise()).collect();
        let two: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 10.0 } else { 20.0 } + noise())
            .collect();
        let (one, two) = (Dist::of(&one), Dist::of(&two));
        assert!(!one.multimodal(), "{}", one.bimodality);
        assert!(two.multimodal(), "{}", two.bimodality);
        assert!(two.gap > 0.8 && one.gap < 0.5, "{} {}", two.gap, one.gap);
    }

    #[test]
    fn the_histogram_holds_every_run_of_both_sides() {
        let a = Dist::of(&[1.0, 1.0, 2.0, 4.0]);
        let b = Dist::of(&[3.0, 4.0, 4.0]);
        let h = histogram(("ours", &a), ("Linux", &b), 3);
        assert_eq!(h.matches('#').count(), 7, "{h}");
        assert_eq!(h.lines().count(), 4);
        // Bins of width 1 from 1: [1,2) [2,3) [3,4].
        assert_eq!(a.counts(1.0, 4.0, 3), [2, 1, 1]);
        assert_eq!(b.counts(1.0, 4.0, 3), [0, 0, 3]);
    }
}
