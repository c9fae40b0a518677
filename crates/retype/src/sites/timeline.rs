//! `retype trace timeline`: live heap bytes over time for the whole process
//! and its top sites (those whose own live bytes rose highest), the rest
//! summed as one band ([`retype_trace::timeline`] holds the walk); beside
//! them the process's RSS and the bytes it mapped itself.

use std::collections::HashMap;

use retype_trace::timeline::{timeline, Series};
use retype_trace::window::Window;
use retype_trace::{Kind, Trace};

use super::{Analysis, By};

/// The name of the band that sums the sites not shown.
pub const OTHER: &str = "(other sites)";

/// A site's band.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Band {
    pub site: String,
    /// Its highest live bytes in the window.
    pub peak_bytes: u64,
}

/// One moment: ns after the first event, the process's live bytes, and each
/// band's (the bands add up to the process); the RSS last sampled and the
/// bytes mapped then (`None` before the first sample or mapping call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moment {
    pub time_ns: u64,
    pub live_bytes: u64,
    pub bands: Vec<u64>,
    pub rss_bytes: Option<u64>,
    pub mapped_bytes: Option<u64>,
}

/// The timeline of a recording's sites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteTimeline {
    /// The top sites, highest first, then [`OTHER`] if any site is left out.
    pub bands: Vec<Band>,
    pub moments: Vec<Moment>,
    /// How many sites the recording has in the window.
    pub sites_total: usize,
    /// The RSS samples in the window.
    pub rss: Series,
    /// The bytes mapped after each mapping call in the window.
    pub mapped: Series,
}

/// The timeline of `trace` (analysed as `a`) in `window`, over `spans`
/// spans of time, its `top` sites by `by` in their own bands.
pub fn of(
    trace: &Trace,
    a: &Analysis,
    window: Window,
    by: By,
    spans: usize,
    top: usize,
) -> SiteTimeline {
    let mut keys: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let group: Vec<usize> = a
        .stacks
        .iter()
        .map(|r| {
            let (key, _) = r.site_of(by);
            *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                keys.len() - 1
            })
        })
        .collect();
    let t = timeline(trace, window, spans, &group, keys.len());
    let mut order: Vec<usize> = (0..keys.len()).filter(|&g| t.group_peaks[g] > 0).collect();
    order.sort_by(|&x, &y| (t.group_peaks[y], &keys[x]).cmp(&(t.group_peaks[x], &keys[y])));
    let sites_total = order.len();
    let rest = order.split_off(top.min(order.len()));
    let mut bands: Vec<Band> = order
        .iter()
        .map(|&g| Band {
            site: keys[g].clone(),
            peak_bytes: t.group_peaks[g],
        })
        .collect();
    // An aggregate recording's snapshots name only their top stacks: the
    // live bytes they do not name are the other sites'.
    let unnamed = a.kind == Kind::Aggregate;
    let other = !rest.is_empty() || unnamed;
    let moments: Vec<Moment> = t
        .points
        .iter()
        .map(|p| {
            let mut v: Vec<u64> = order.iter().map(|&g| p.groups[g]).collect();
            if unnamed {
                v.push(p.live_bytes.saturating_sub(v.iter().sum()));
            } else if other {
                v.push(rest.iter().map(|&g| p.groups[g]).sum());
            }
            Moment {
                time_ns: p.time_ns,
                live_bytes: p.live_bytes,
                bands: v,
                rss_bytes: t.rss.at(p.time_ns),
                mapped_bytes: t.mapped.at(p.time_ns),
            }
        })
        .collect();
    if other {
        let peak_bytes = moments
            .iter()
            .map(|m| *m.bands.last().unwrap())
            .max()
            .unwrap_or(0);
        bands.push(Band {
            site: OTHER.into(),
            peak_bytes,
        });
    }
    SiteTimeline {
        bands,
        moments,
        sites_total,
        rss: t.rss,
        mapped: t.mapped,
    }
}
