//! PageRank with its arrays on chosen page sizes (seed 001 §3.6.4, Table
//! 3.3): the thesis ran Shoal's Green-Marl PageRank with every array on
//! 4 KiB, 2 MiB or 1 GiB pages; Barrelfish lets a program pick the page
//! size per array, where Linux needs huge-page pools or THP's policy.
//!
//! The graph is R-MAT (Chakrabarti et al. 2004: quadrant probabilities
//! 0.57, 0.19, 0.19, 0.05), 2^scale vertices and 16 edges per vertex, from
//! a fixed seed, its vertex numbers scrambled by a bijection so that the
//! high-degree ones spread over the arrays. It is kept by destination
//! (compressed rows of incoming edges), so each iteration reads the edge
//! array in order and gathers its sources' contributions at random: the
//! access pattern for which the page size matters.
//!
//! The arrays fall into two groups, each placed on its own [`Place`]:
//! - edges: the source of every edge (4 bytes an edge), read in order;
//! - vertices: the row offsets, out-degrees, contributions and new ranks
//!   (24 bytes a vertex), the contributions read at random.
//!
//! Ours places a group in a Frame mapped through capabilities with 4 KiB or
//! 2 MiB pages (retype-vm; one space per page size, since a space's memory
//! has one page size). Linux places it in an anonymous mapping with THP
//! off (`MADV_NOHUGEPAGE`) or on (`MADV_HUGEPAGE`), or in hugetlbfs pages
//! (`MAP_HUGETLB`). "Mixed" puts the edges on 4 KiB pages and the vertices
//! on 2 MiB ones.

use std::time::Instant;

use retype_core::rng::SplitMix64;

use super::mpu::Ours;
use retype_vm::Backing;
use retype_vm::VmError;

/// Edges per vertex (Graph500's edge factor).
pub const EDGE_FACTOR: u64 = 16;
const DAMPING: f64 = 0.85;
const SEED: u64 = 0x5eed_0001;

/// A graph by destination: `sources[offsets[v]..offsets[v + 1]]` are the
/// vertices with an edge to `v`.
pub struct Graph {
    pub offsets: Vec<u32>,
    pub sources: Vec<u32>,
    pub out_degree: Vec<u32>,
}

impl Graph {
    pub fn vertices(&self) -> usize {
        self.out_degree.len()
    }

    /// Bytes of the edge group and of the vertex group.
    pub fn bytes(&self) -> (u64, u64) {
        let n = self.vertices() as u64;
        (
            4 * self.sources.len() as u64,
            4 * (n + 1) + 4 * n + 8 * n + 8 * n,
        )
    }

    /// The R-MAT graph of 2^`scale` vertices from the fixed seed.
    pub fn rmat(scale: u32) -> Graph {
        assert!((1..=28).contains(&scale), "R-MAT scale {scale}");
        let n = 1usize << scale;
        let m = (n as u64 * EDGE_FACTOR) as usize;
        // Two passes over the same stream: count, then place.
        let mut in_degree = vec![0u32; n];
        let mut out_degree = vec![0u32; n];
        rmat_edges(scale, m, |s, d| {
            in_degree[d] += 1;
            out_degree[s] += 1;
        });
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u32);
        for &d in &in_degree {
            offsets.push(offsets.last().expect("one") + d);
        }
        let mut fill: Vec<u32> = offsets[..n].to_vec();
        let mut sources = vec![0u32; m];
        rmat_edges(scale, m, |s, d| {
            sources[fill[d] as usize] = s as u32;
            fill[d] += 1;
        });
        Graph {
            offsets,
            sources,
            out_degree,
        }
    }
}

/// Calls `edge(source, destination)` for the `m` edges of the R-MAT stream.
fn rmat_edges(scale: u32, m: usize, mut edge: impl FnMut(usize, usize)) {
    let mut rng = SplitMix64::new(SEED);
    let mask = (1u64 << scale) - 1;
    // An odd multiplier permutes the numbers modulo 2^scale.
    let scramble = |v: u64| v.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask;
    for _ in 0..m {
        let (mut s, mut d) = (0u64, 0u64);
        let mut bits = 0u64;
        for level in 0..scale {
            if level % 8 == 0 {
                bits = rng.next_u64();
            }
            // 0.57, 0.19, 0.19, 0.05 of 256.
            let (sb, db) = match (bits >> (8 * (level % 8))) & 0xff {
                0..146 => (0, 0),
                146..195 => (0, 1),
                195..244 => (1, 0),
                _ => (1, 1),
            };
            s = s << 1 | sb;
            d = d << 1 | db;
        }
        edge(scramble(s) as usize, scramble(d) as usize);
    }
}

/// Where a group of arrays lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A Frame mapped through capabilities with these pages (retype-vm).
    Ours(Backing),
    /// Anonymous memory, THP off (`MADV_NOHUGEPAGE`).
    ThpOff,
    /// Anonymous memory, THP on (`MADV_HUGEPAGE`).
    ThpOn,
    /// hugetlbfs 2 MiB pages (`MAP_HUGETLB`), from the reserved pool.
    Hugetlb,
}

impl Place {
    fn page(self) -> u64 {
        match self {
            Place::Ours(b) => b.page(),
            Place::ThpOff | Place::ThpOn => 4 << 10,
            Place::Hugetlb => 2 << 20,
        }
    }

    /// Whether `bytes` can be placed here now, or why not.
    pub fn available(self, bytes: u64) -> Result<(), String> {
        match self {
            Place::Ours(b) => b.available(bytes),
            Place::Hugetlb => Backing::Huge2M.available(bytes),
            Place::ThpOff | Place::ThpOn => Ok(()),
        }
    }
}

/// Memory holding one group: ours keeps its space alive, Linux's is unmapped
/// when dropped.
enum Region {
    Ours(Box<Ours>),
    Linux { at: usize, len: usize },
}

impl Region {
    fn new(bytes: u64, place: Place) -> Result<Region, VmError> {
        let bytes = bytes.max(1).next_multiple_of(place.page());
        let advice = match place {
            Place::Ours(backing) => {
                let mut ours = Ours::new(bytes, backing)?;
                ours.map()?;
                return Ok(Region::Ours(Box::new(ours)));
            }
            Place::ThpOff => Some(libc::MADV_NOHUGEPAGE),
            Place::ThpOn => Some(libc::MADV_HUGEPAGE),
            Place::Hugetlb => None,
        };
        place.available(bytes).map_err(VmError::Unsupported)?;
        let huge = if advice.is_none() {
            // MAP_HUGE_SHIFT is 26: the page size's log2 above it.
            libc::MAP_HUGETLB | (21 << 26)
        } else {
            0
        };
        let len = bytes as usize;
        // SAFETY: a fresh private anonymous mapping where the kernel chooses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | huge,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(VmError::os("mmap"));
        }
        let region = Region::Linux {
            at: p as usize,
            len,
        };
        if let Some(advice) = advice {
            // SAFETY: advice on the mapping just made; contents unchanged.
            if unsafe { libc::madvise(p, len, advice) } != 0 {
                return Err(VmError::os("madvise"));
            }
        }
        Ok(region)
    }

    fn base(&self) -> usize {
        match self {
            Region::Ours(o) => o.vm.base(),
            Region::Linux { at, .. } => *at,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Region::Linux { at, len } = *self {
            // SAFETY: the mapping made in `new`; the arrays in it are gone.
            unsafe { libc::munmap(at as *mut libc::c_void, len) };
        }
    }
}

/// Hands out consecutive, aligned slices of a region.
struct Carver {
    next: usize,
}

impl Carver {
    /// `n` elements of `T` from the region, zeroed or copied from `from`.
    ///
    /// The caller keeps the region alive while the slice is used.
    fn take<T: Copy>(&mut self, n: usize) -> &'static mut [T] {
        let at = self
            .next
            .next_multiple_of(std::mem::align_of::<T>().max(64));
        self.next = at + n * std::mem::size_of::<T>();
        // SAFETY: the region is mapped read-write and large enough for every
        // slice carved from it (sized by `Graph::bytes` plus alignment
        // slack); slices never overlap, and none outlives the region
        // (`Placed` drops them with it).
        unsafe { std::slice::from_raw_parts_mut(at as *mut T, n) }
    }
}

/// The graph's arrays in their places.
struct Placed {
    offsets: &'static mut [u32],
    sources: &'static mut [u32],
    out_degree: &'static mut [u32],
    contrib: &'static mut [f64],
    rank: &'static mut [f64],
    /// Last: the slices above point into these.
    _regions: Vec<Region>,
}

/// Slack for aligning the vertex group's four arrays.
const SLACK: u64 = 4 * 64;

impl Placed {
    /// A copy of `g` with its edges on `edges` and its vertex arrays on
    /// `vertices` (one region when the two are the same place).
    fn new(g: &Graph, edges: Place, vertices: Place) -> Result<Placed, VmError> {
        let (eb, vb) = g.bytes();
        let mut regions = Vec::new();
        let (mut ec, mut vc) = if edges == vertices {
            regions.push(Region::new(eb + vb + SLACK, edges)?);
            let c = regions[0].base();
            (Carver { next: c }, None)
        } else {
            regions.push(Region::new(eb + SLACK, edges)?);
            regions.push(Region::new(vb + SLACK, vertices)?);
            let v = regions[1].base();
            (
                Carver {
                    next: regions[0].base(),
                },
                Some(Carver { next: v }),
            )
        };
        let n = g.vertices();
        let sources = ec.take::<u32>(g.sources.len());
        let vc = vc.as_mut().unwrap_or(&mut ec);
        let p = Placed {
            offsets: vc.take(n + 1),
            out_degree: vc.take(n),
            contrib: vc.take(n),
            rank: vc.take(n),
            sources,
            _regions: regions,
        };
        p.sources.copy_from_slice(&g.sources);
        p.offsets.copy_from_slice(&g.offsets);
        p.out_degree.copy_from_slice(&g.out_degree);
        Ok(p)
    }

    /// `iterations` of pull-based PageRank from the uniform vector; the
    /// ranks (summing to 1: dangling vertices' rank is spread evenly).
    fn pagerank(&mut self, iterations: u32) -> &[f64] {
        let n = self.rank.len();
        let teleport = (1.0 - DAMPING) / n as f64;
        self.rank.fill(1.0 / n as f64);
        for _ in 0..iterations {
            let mut dangling = 0.0;
            for v in 0..n {
                let d = self.out_degree[v];
                if d == 0 {
                    dangling += self.rank[v];
                    self.contrib[v] = 0.0;
                } else {
                    self.contrib[v] = self.rank[v] / d as f64;
                }
            }
            let base = teleport + DAMPING * dangling / n as f64;
            for v in 0..n {
                let (a, b) = (self.offsets[v] as usize, self.offsets[v + 1] as usize);
                let sum: f64 = self.sources[a..b]
                    .iter()
                    .map(|&s| self.contrib[s as usize])
                    .sum();
                self.rank[v] = base + DAMPING * sum;
            }
        }
        &*self.rank
    }
}

/// One run: seconds of `iterations` and the ranks' checksum (the sum of
/// rank × (vertex + 1), the same in every place if every array held).
pub fn run(
    g: &Graph,
    edges: Place,
    vertices: Place,
    iterations: u32,
) -> Result<(f64, f64), VmError> {
    let mut p = Placed::new(g, edges, vertices)?;
    let t = Instant::now();
    let rank = p.pagerank(iterations);
    let secs = t.elapsed().as_secs_f64();
    let sum: f64 = rank.iter().sum();
    assert!(
        (sum - 1.0).abs() < 1e-6,
        "PageRank: the ranks sum to {sum}, not 1"
    );
    let check: f64 = rank
        .iter()
        .enumerate()
        .map(|(v, r)| r * (v + 1) as f64)
        .sum();
    Ok((secs, check))
}

/// Where the edge and the vertex arrays lie, in that order.
pub type Placement = (Place, Place);

/// The rows of our Table 3.3: a page-size choice, as (edges, vertices) on
/// each side: ours, Linux with THP, Linux with hugetlbfs (none for 4 KiB).
pub const CHOICES: [(&str, [Option<Placement>; 3]); 3] = [
    (
        "4 KiB",
        [
            Some((Place::Ours(Backing::Small), Place::Ours(Backing::Small))),
            Some((Place::ThpOff, Place::ThpOff)),
            None,
        ],
    ),
    (
        "2 MiB",
        [
            Some((Place::Ours(Backing::Huge2M), Place::Ours(Backing::Huge2M))),
            Some((Place::ThpOn, Place::ThpOn)),
            Some((Place::Hugetlb, Place::Hugetlb)),
        ],
    ),
    (
        "mixed",
        [
            Some((Place::Ours(Backing::Small), Place::Ours(Backing::Huge2M))),
            Some((Place::ThpOff, Place::ThpOn)),
            Some((Place::ThpOff, Place::Hugetlb)),
        ],
    ),
];

/// One page-size choice: median seconds on each side (ours, Linux THP,
/// Linux hugetlbfs), or why the side could not run.
#[derive(Clone, Debug, PartialEq)]
pub struct PagerankRow {
    pub pages: &'static str,
    pub scale: u32,
    pub edges: u64,
    pub iterations: u32,
    pub seconds: [Result<f64, String>; 3],
}

impl PagerankRow {
    /// One JSON object (the keys are the interface); a side that could not
    /// run is null, with its reason under `<side>_unavailable`.
    pub fn json(&self) -> String {
        let mut cells = Vec::new();
        for (key, s) in ["seconds", "linux_thp_seconds", "linux_hugetlb_seconds"]
            .iter()
            .zip(&self.seconds)
        {
            match s {
                Ok(v) => cells.push(format!("\"{key}\":{v:.6}")),
                Err(why) => {
                    cells.push(format!("\"{key}\":null"));
                    let why = serde_json::Value::String(why.clone());
                    cells.push(format!("\"{key}_unavailable\":{why}"));
                }
            }
        }
        format!(
            "{{\"bench\":\"pagerank\",\"pages\":\"{}\",\"scale\":{},\"edges\":{},\"iterations\":{},{}}}",
            self.pages,
            self.scale,
            self.edges,
            self.iterations,
            cells.join(",")
        )
    }
}

/// Our Table 3.3 on `g`: every choice, each side alternated `reps` times,
/// medians. Every run's ranks must agree with the first's.
pub fn table(
    g: &Graph,
    scale: u32,
    iterations: u32,
    reps: u32,
) -> Result<Vec<PagerankRow>, VmError> {
    let (eb, vb) = g.bytes();
    let mut check: Option<f64> = None;
    let mut rows = Vec::new();
    for (pages, sides) in CHOICES {
        let mut runs: [Vec<f64>; 3] = Default::default();
        let mut why: [Option<String>; 3] = Default::default();
        for (k, side) in sides.iter().enumerate() {
            why[k] = match side {
                None => Some("no such choice on this side".into()),
                Some((e, v)) if e == v => e.available(eb + vb + SLACK).err(),
                Some((e, v)) => e.available(eb + SLACK).and(v.available(vb + SLACK)).err(),
            };
        }
        for _ in 0..reps {
            for (k, side) in sides.iter().enumerate() {
                let (Some((e, v)), None) = (side, &why[k]) else {
                    continue;
                };
                let (secs, c) = run(g, *e, *v, iterations)?;
                let first = *check.get_or_insert(c);
                if c != first {
                    return Err(VmError::Unsupported(format!(
                        "PageRank on {pages} pages ({e:?}, {v:?}) gave other ranks ({c} against {first})"
                    )));
                }
                runs[k].push(secs);
            }
        }
        let seconds = std::array::from_fn(|k| match why[k].take() {
            Some(w) => Err(w),
            None => Ok(super::median(&mut runs[k])),
        });
        rows.push(PagerankRow {
            pages,
            scale,
            edges: g.sources.len() as u64,
            iterations,
            seconds,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same PageRank by the book: power iteration over the edge list.
    fn reference(g: &Graph, iterations: u32) -> Vec<f64> {
        let n = g.vertices();
        let mut rank = vec![1.0 / n as f64; n];
        for _ in 0..iterations {
            let dangling: f64 = (0..n)
                .filter(|&v| g.out_degree[v] == 0)
                .map(|v| rank[v])
                .sum();
            let mut next = vec![(1.0 - DAMPING) / n as f64 + DAMPING * dangling / n as f64; n];
            for (d, into) in next.iter_mut().enumerate() {
                for e in g.offsets[d]..g.offsets[d + 1] {
                    let s = g.sources[e as usize] as usize;
                    *into += DAMPING * rank[s] / g.out_degree[s] as f64;
                }
            }
            rank = next;
        }
        rank
    }

    #[test]
    fn the_graph_has_every_edge_once_by_destination() {
        let g = Graph::rmat(10);
        let m = (1 << 10) * EDGE_FACTOR as usize;
        assert_eq!(g.sources.len(), m);
        assert_eq!(*g.offsets.last().unwrap() as usize, m);
        assert!(g.offsets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(g.out_degree.iter().map(|&d| d as usize).sum::<usize>(), m);
        // R-MAT is skewed: the busiest vertex has far more than the mean.
        let max = g.offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(max > 10 * EDGE_FACTOR as u32, "max in-degree {max}");
        // Fixed seed: the same graph again.
        assert_eq!(Graph::rmat(10).sources, g.sources);
    }

    #[test]
    fn placed_pagerank_is_the_books_on_every_place_that_runs() {
        let g = Graph::rmat(9);
        let want = reference(&g, 7);
        let places = [
            (Place::Ours(Backing::Small), Place::Ours(Backing::Small)),
            (Place::ThpOff, Place::ThpOn),
            (Place::Ours(Backing::Small), Place::ThpOff),
            (Place::Ours(Backing::Huge2M), Place::Ours(Backing::Huge2M)),
            (Place::ThpOff, Place::Hugetlb),
        ];
        for (e, v) in places {
            let (eb, vb) = g.bytes();
            if let Err(why) = e.available(eb + SLACK).and(v.available(vb + SLACK)) {
                eprintln!("skipped {e:?}/{v:?}: {why}");
                continue;
            }
            let mut p = Placed::new(&g, e, v).unwrap();
            let got = p.pagerank(7);
            for (x, y) in got.iter().zip(&want) {
                assert!((x - y).abs() < 1e-12, "{e:?}/{v:?}: {x} against {y}");
            }
        }
    }

    #[test]
    fn a_table_has_every_choice_and_says_why_a_side_is_missing() {
        let g = Graph::rmat(8);
        let rows = table(&g, 8, 2, 1).unwrap();
        let names: Vec<_> = rows.iter().map(|r| r.pages).collect();
        assert_eq!(names, ["4 KiB", "2 MiB", "mixed"]);
        assert!(rows[0].seconds[0].is_ok() && rows[0].seconds[1].is_ok());
        assert!(rows[0].seconds[2].is_err());
        let free = Backing::Huge2M.available(2 << 20).is_ok();
        assert_eq!(rows[1].seconds[2].is_ok(), free, "{:?}", rows[1]);
        let j: serde_json::Value = serde_json::from_str(&rows[0].json()).unwrap();
        assert_eq!(j["linux_hugetlb_seconds"], serde_json::Value::Null);
        assert!(j["seconds"].as_f64().unwrap() > 0.0);
    }
}
