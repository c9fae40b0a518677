//! A memory gate for CI (`retype trace diff A B --fail-above 5%`): the sites
//! of recording B that grew past a threshold over recording A, on the
//! weight `--fail-on` names.
//!
//! A threshold is a share of A's figure (`5%`) or bytes (`1MB`, `64KiB`);
//! several must all be passed, so `--fail-above 5% --fail-above 64KiB`
//! ignores small sites' noise. A site absent from A grows past any share.

use clap::ValueEnum;
use retype_trace::sites::SiteStats;

use super::export::Weight;

/// How much a figure may grow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// A share of the first recording's figure, in percent.
    Percent(f64),
    /// An amount (bytes, or allocations for temporaries).
    Amount(u64),
}

impl Threshold {
    /// Reads `5%`, `0.5%`, `1MB` (10^6), `64KiB` (2^16), `4096` or `4096B`.
    pub fn parse(text: &str) -> Result<Threshold, String> {
        let t = text.trim();
        let bad = || {
            format!("{text:?}: a threshold is a percentage (5%) or an amount (1MB, 64KiB, 4096)")
        };
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            return (p.is_finite() && p >= 0.0)
                .then_some(Threshold::Percent(p))
                .ok_or_else(bad);
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let scale: f64 = match unit.trim() {
            "" | "B" => 1.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad()),
        };
        let v: f64 = number.parse().map_err(|_| bad())?;
        Ok(Threshold::Amount((v * scale).round() as u64))
    }

    /// Whether going from `a` to `b` grows past it.
    fn passed(self, a: u64, b: u64) -> bool {
        let growth = b.saturating_sub(a);
        match self {
            Threshold::Percent(p) => growth > 0 && growth as f64 * 100.0 > p * a as f64,
            Threshold::Amount(n) => growth > n,
        }
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Threshold::Percent(p) => write!(f, "{p}%"),
            Threshold::Amount(n) => write!(f, "{n}"),
        }
    }
}

/// What the gate holds to its thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, strum::Display)]
#[strum(serialize_all = "lowercase")]
pub enum Scope {
    /// Every site, and the total
    Site,
    /// The total only
    Total,
}

/// The gate: thresholds, all of which a growth must pass, on one weight.
#[derive(Clone, Debug)]
pub struct Gate {
    pub thresholds: Vec<Threshold>,
    pub on: Weight,
    pub per: Scope,
}

/// A site (or the total, named `(total)`) that grew past the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    pub site: String,
    pub a: u64,
    pub b: u64,
}

/// The name the total goes by in a diff.
pub const TOTAL: &str = "(total)";

impl Gate {
    /// The sites of `pairs` (a site's figures in A and B) and the `total`
    /// that grew past every threshold, the total first, then most growth first.
    pub fn breaches(
        &self,
        pairs: &[(String, [SiteStats; 2])],
        total: [SiteStats; 2],
    ) -> Vec<Breach> {
        let sites = match self.per {
            Scope::Site => pairs,
            Scope::Total => &[],
        };
        let mut out: Vec<Breach> = sites
            .iter()
            .map(|(k, [x, y])| (k.as_str(), x, y))
            .map(|(k, x, y)| Breach {
                site: k.to_string(),
                a: self.on.of(x),
                b: self.on.of(y),
            })
            .filter(|r| self.thresholds.iter().all(|t| t.passed(r.a, r.b)))
            .collect();
        out.sort_by(|x, y| (y.b - y.a, &x.site).cmp(&(x.b - x.a, &y.site)));
        let (a, b) = (self.on.of(&total[0]), self.on.of(&total[1]));
        if self.thresholds.iter().all(|t| t.passed(a, b)) {
            out.insert(
                0,
                Breach {
                    site: TOTAL.into(),
                    a,
                    b,
                },
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_read_and_hold() {
        assert_eq!(Threshold::parse("5%"), Ok(Threshold::Percent(5.0)));
        assert_eq!(Threshold::parse("1MB"), Ok(Threshold::Amount(1_000_000)));
        assert_eq!(Threshold::parse("64KiB"), Ok(Threshold::Amount(65_536)));
        assert_eq!(Threshold::parse("4096"), Ok(Threshold::Amount(4096)));
        for bad in ["", "%", "5 parsecs", "-5%", "x1MB"] {
            assert!(Threshold::parse(bad).is_err(), "{bad:?}");
        }
        let five = Threshold::Percent(5.0);
        assert!(!five.passed(100, 105) && five.passed(100, 106));
        assert!(five.passed(0, 1) && !five.passed(0, 0) && !five.passed(100, 50));
        assert!(!Threshold::Amount(10).passed(5, 15) && Threshold::Amount(10).passed(5, 16));
    }
}
