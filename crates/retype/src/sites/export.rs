//! A recording's stacks for the tools people already use: flame graphs
//! drawn by inferno, collapsed stacks (`a;b;c 123`, which inferno,
//! speedscope and Brendan Gregg's flamegraph.pl read), and pprof's gzipped
//! profile (pprof and its web UI, speedscope).

use std::collections::HashMap;
use std::io::Write;

use anyhow::Context;
use clap::ValueEnum;
use flate2::write::GzEncoder;
use prost::Message;
use retype_trace::sites::SiteStats;
use retype_trace::Trace;

use super::symbols::Symbolizer;
use super::{pprof, Analysis, NO_STACK};

/// What a flame graph's widths (or a collapsed stack's counts) measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, strum::Display)]
#[strum(serialize_all = "lowercase")]
pub enum Weight {
    /// Bytes allocated from each stack
    Allocated,
    /// Bytes live at the trace's peak
    Peak,
    /// Bytes never freed
    Leaked,
    /// Allocations freed before their thread allocated anything else (heaptrack's temporaries)
    Temporary,
}

impl Weight {
    /// A stack's or a site's figure under this weight.
    pub fn of(self, s: &SiteStats) -> u64 {
        match self {
            Weight::Allocated => s.bytes,
            Weight::Peak => s.peak_bytes,
            Weight::Leaked => s.leaked_bytes,
            Weight::Temporary => s.temporary,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Weight::Allocated => "bytes allocated",
            Weight::Peak => "bytes live at the peak",
            Weight::Leaked => "bytes leaked at exit",
            Weight::Temporary => "temporary allocations",
        }
    }

    /// What it counts: bytes, or allocations.
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Temporary => "allocations",
            _ => "bytes",
        }
    }
}

/// The stacks as collapsed lines, outermost frame first, one per stack
/// with a non-zero weight, sorted.
pub fn collapsed(a: &Analysis, weight: Weight) -> Vec<String> {
    let mut lines: Vec<String> = a
        .stacks
        .iter()
        .filter(|r| weight.of(&r.stats) > 0)
        .map(|r| {
            let names: Vec<String> = if r.frames.is_empty() {
                vec![NO_STACK.into()]
            } else {
                // `;` separates frames and the last space the count.
                r.frames
                    .iter()
                    .rev()
                    .map(|f| f.function.replace(';', ":"))
                    .collect()
            };
            format!("{} {}", names.join(";"), weight.of(&r.stats))
        })
        .collect();
    lines.sort();
    lines
}

/// The flame graph of `a` weighted by `weight`, as SVG.
pub fn flamegraph(name: &str, a: &Analysis, weight: Weight, out: impl Write) -> anyhow::Result<()> {
    let lines = collapsed(a, weight);
    if lines.is_empty() {
        anyhow::bail!("{name}: no {} to draw", weight.title());
    }
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = format!("{name}: {}", weight.title());
    opt.count_name = weight.unit().into();
    opt.colors = inferno::flamegraph::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    opt.deterministic = true;
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), out)
        .context("cannot draw the flame graph")
}

/// Sample types of the pprof profile, in value order.
const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("peak_objects", "count"),
    ("peak_space", "bytes"),
    ("leaked_objects", "count"),
    ("leaked_space", "bytes"),
];

/// Strings of a profile, each stored once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if self.table.is_empty() {
            self.table.push(String::new());
            self.index.insert(String::new(), 0);
        }
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.table.push(s.to_string());
        let i = self.table.len() as i64 - 1;
        self.index.insert(s.to_string(), i);
        i
    }
}

/// pprof's gzipped profile of `trace`: a sample per stack with its six
/// figures, a location per return address with its functions and lines
/// (inlined ones expanded), a mapping per loaded object.
pub fn pprof(trace: &Trace, a: &Analysis, default: Weight) -> anyhow::Result<Vec<u8>> {
    let mut strings = Strings::default();
    let mut p = pprof::Profile {
        sample_type: SAMPLE_TYPES
            .iter()
            .map(|(t, u)| pprof::ValueType {
                r#type: strings.id(t),
                unit: strings.id(u),
            })
            .collect(),
        ..Default::default()
    };
    p.default_sample_type = strings.id(match default {
        Weight::Allocated => "alloc_space",
        Weight::Peak => "peak_space",
        Weight::Leaked => "leaked_space",
        Weight::Temporary => anyhow::bail!(
            "pprof's profile holds allocated, peak and leaked figures, not temporaries; export --weight temporary as collapsed stacks"
        ),
    });
    for (i, m) in trace.modules.iter().enumerate() {
        p.mapping.push(pprof::Mapping {
            id: i as u64 + 1,
            memory_start: m.start,
            memory_limit: m.end,
            filename: strings.id(&m.path),
            build_id: strings.id(&m.build_id_hex()),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
            ..Default::default()
        });
    }
    let mut sym = Symbolizer::new(trace);
    let mut locations: HashMap<(u32, u64), u64> = HashMap::new();
    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    for (k, r) in a.stacks.iter().enumerate().skip(1) {
        if r.stats == SiteStats::default() {
            continue;
        }
        let stack = &trace.stacks[k - 1];
        let mut ids = Vec::with_capacity(stack.frames.len());
        for &ret in &stack.frames {
            let next = locations.len() as u64 + 1;
            let id = *locations.entry((stack.segment, ret)).or_insert(next);
            if id == next {
                let frames = sym.frames(stack.segment, ret);
                let mapping_id = trace
                    .modules
                    .iter()
                    .rposition(|m| m.segment == stack.segment && m.contains(ret))
                    .map_or(0, |i| i as u64 + 1);
                let line = frames
                    .iter()
                    .map(|f| {
                        let next = functions.len() as u64 + 1;
                        let function_id = *functions
                            .entry((f.function.clone(), f.file.clone()))
                            .or_insert(next);
                        if function_id == next {
                            let name = strings.id(&f.function);
                            p.function.push(pprof::Function {
                                id: function_id,
                                name,
                                system_name: name,
                                filename: strings.id(f.file.as_deref().unwrap_or("")),
                            });
                        }
                        pprof::Line {
                            function_id,
                            line: f.line.map_or(0, i64::from),
                        }
                    })
                    .collect();
                p.location.push(pprof::Location {
                    id,
                    mapping_id,
                    address: ret,
                    line,
                });
            }
            ids.push(id);
        }
        let s = &r.stats;
        p.sample.push(pprof::Sample {
            location_id: ids,
            value: [
                s.calls,
                s.bytes,
                s.peak_blocks,
                s.peak_bytes,
                s.leaked_blocks,
                s.leaked_bytes,
            ]
            .map(|v| v as i64)
            .to_vec(),
        });
    }
    let comment = format!(
        "retype recording of {}",
        trace.meta_value("cmdline").unwrap_or("?")
    );
    p.comment = vec![strings.id(&comment)];
    p.string_table = strings.table;
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())
        .expect("writing to memory does not fail");
    Ok(gz.finish().expect("writing to memory does not fail"))
}
