//! Seed 004's capability half (`retype study cheri`): what exact bounds cost
//! the requests of real and benchmark workloads in each CHERI format, what
//! the seed's huge-page design does with them, and what retype-malloc's
//! layout would pad on Morello.
//!
//! - [`workload`]: the requests: malloc-lab traces, recordings, seed 004's
//!   benchmark patterns;
//! - [`huge_pages`]: the seed's bump allocator over huge-page region
//!   capabilities;
//! - [`size_classes`]: retype-malloc's classes and large blocks in CHERI terms.
//!
//! Exactness per request and by size range is
//! [`retype_core::heap::cheri::Padding`], the same count the heaps' CHERI
//! mode keeps.

pub mod huge_pages;
pub mod size_classes;
pub mod workload;

use retype_core::cheri::Format;
use retype_core::heap::cheri::{exact_bounds, Padding};

use huge_pages::{HugePages, PageFigures};
use size_classes::{ClassFigures, LargeFigures};
use workload::{Run, Workload};

/// The huge pages of seed 004's design: 2 MiB, and the 1 GiB superpage
/// its bump allocator maps.
pub const PAGES: [u64; 2] = [2 << 20, 1 << 30];

/// The smallest alignment malloc gives on a 64-bit CHERI machine, a
/// capability's 16 bytes: every request is aligned so at least.
const MALLOC_ALIGN: u64 = 16;

/// One workload in one format.
pub struct FormatFigures {
    pub format: Format,
    pub padding: Padding,
    /// Requests larger than the format's address space.
    pub unaddressable: u64,
    /// Seed 004's design, per page size of [`PAGES`].
    pub pages: Vec<PageFigures>,
}

/// One workload in every format.
pub struct WorkloadFigures {
    pub name: String,
    pub source: String,
    pub requests: u64,
    pub formats: Vec<FormatFigures>,
}

/// Everything the study prints.
pub struct Results {
    pub workloads: Vec<WorkloadFigures>,
    /// retype-malloc's classes, per format.
    pub classes: Vec<(Format, Vec<ClassFigures>)>,
    /// retype-malloc's large blocks on Morello.
    pub large: Vec<LargeFigures>,
}

/// Sizes every workload in every format.
pub fn run(workloads: &[Workload]) -> anyhow::Result<Results> {
    let mut out = Vec::new();
    for w in workloads {
        let runs: Vec<Run> = w
            .runs
            .iter()
            .map(|r| Run {
                align: r.align.max(MALLOC_ALIGN),
                ..*r
            })
            .collect();
        let mut formats = Vec::new();
        for &format in Format::ALL {
            let mut padding = Padding::default();
            let mut unaddressable = 0;
            for r in &runs {
                match exact_bounds(format, r.size) {
                    Some(b) => padding.record(r.size, r.align, &b, r.count),
                    None => unaddressable += r.count,
                }
            }
            let mut pages = Vec::new();
            for page in PAGES {
                let mut h = HugePages::new(format, page)?;
                for r in &runs {
                    h.allocate(r)?;
                }
                pages.push(h.finish());
            }
            formats.push(FormatFigures {
                format,
                padding,
                unaddressable,
                pages,
            });
        }
        out.push(WorkloadFigures {
            name: w.name.clone(),
            source: w.source.clone(),
            requests: w.requests(),
            formats,
        });
    }
    let classes = Format::ALL
        .iter()
        .map(|&f| {
            let classes = size_classes::block_sizes()
                .into_iter()
                .map(|b| size_classes::class(f, b))
                .collect();
            (f, classes)
        })
        .collect();
    let large = size_classes::LARGE_SIZES
        .iter()
        .filter_map(|&s| size_classes::large(Format::Morello, s))
        .collect();
    Ok(Results {
        workloads: out,
        classes,
        large,
    })
}
