//! `retype replay`: replays malloc-lab traces on our heaps and scores them as
//! the CS:APP malloc-lab driver (mdriver) does.
//!
//! For each trace and heap: utilization is the peak of live requested bytes
//! divided by the heap's high-water mark (mdriver's `max_total_size /
//! mem_heapsize()`); fragmentation #4 is (high-water − peak live) ÷ peak live
//! (Johnstone & Wilson); throughput is ops over the fastest of several timed
//! runs, each a fresh heap plus every request, on an arena whose pages are
//! already touched (mdriver's `mem_reset_brk`); the performance index is
//! 100 × (0.6 × utilization + 0.4 × min(1, Kops/s ÷ 600)).
//!
//! Before timing, one run validates the heap as mdriver does: every block is
//! aligned, overlaps no other, and keeps its bytes until realloc or free (the
//! first and last 64 KiB of a larger block);
//! `--check` also walks the heap's free structure after every request.
//!
//! Besides `.rep` files it replays any trace `retype trace` reads (a recording
//! from `retype record`, CSV, wee_alloc, valgrind output): threads serialized by
//! timestamp, as requests numbered from 1 in error messages. For those it also
//! reports what seed 003's TLM measures of placement: the holes (gaps between
//! live blocks) when the live bytes peak, and how many reallocs moved.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use clap::Args;
use retype_core::heap::{self, Arena, Heap};
use retype_trace::malloclab::{self, Op};
use retype_trace::summary::Log2Histogram;

/// mdriver's weight of utilization in the performance index.
const UTIL_WEIGHT: f64 = 0.60;
/// mdriver's `AVG_LIBC_THRUPUT`: throughput credit is capped at 600 Kops/s.
const LIBC_KOPS: f64 = 600.0;
/// Virtual size of the arena a replay runs in; untouched pages cost nothing.
const ARENA: usize = 4 << 30;

#[derive(Args)]
pub struct ReplayArgs {
    /// malloc-lab `.rep` trace files.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Heaps to replay on: names separated by commas, or `all`.
    #[arg(long, value_name = "P[,P...]|all", default_value = "all")]
    heap: String,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Check every invariant of the heap after every request (slow).
    #[arg(long)]
    check: bool,
    /// Time each trace on each heap for at least this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    min_time_ms: u64,
    /// Time at least this many runs of each trace on each heap (the fastest counts).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Also write a self-contained HTML report: utilization, heap maps at the
    /// peak, size and lifetime histograms, live bytes and threads of recordings.
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
}

/// One request with ids turned into dense slots, ready to run.
#[derive(Clone, Copy)]
enum Step {
    Alloc {
        slot: usize,
        size: usize,
        align: usize,
    },
    Realloc {
        slot: usize,
        size: usize,
    },
    Free {
        slot: usize,
    },
}

use crate::report::replay::{HeapRun, ThreadTimes, TraceFigures};

/// A trace compiled for replay.
struct Program {
    name: String,
    path: String,
    steps: Vec<Step>,
    lines: Vec<usize>,
    slots: usize,
    /// mdriver's `max_total_size`.
    peak_live: u64,
    /// Read from a recorded trace rather than a `.rep` file.
    recorded: bool,
}

/// Any trace other than `.rep` as requests (see the module doc).
fn recorded_requests(path: &Path) -> Result<malloclab::Trace> {
    let t = retype_trace::format::load(path, None)?;
    let (ops, _) = retype_trace::rep::to_malloclab(&t);
    Ok(malloclab::Trace {
        lines: (1..=ops.len()).collect(),
        ops,
        ..malloclab::Trace::default()
    })
}

fn compile(path: &Path) -> Result<Program> {
    let recorded = path.extension().is_none_or(|e| e != "rep");
    let trace = if recorded {
        recorded_requests(path)?
    } else {
        malloclab::read(path)?
    };
    let file = path.display().to_string();
    let mut slot_of: HashMap<u32, usize> = HashMap::new();
    let mut live: Vec<u64> = Vec::new();
    let (mut total, mut peak) = (0u64, 0u64);
    let mut steps = Vec::with_capacity(trace.ops.len());
    for (op, &line) in trace.ops.iter().zip(&trace.lines) {
        let fit = |n: u64| {
            usize::try_from(n)
                .map_err(|_| anyhow!("{file}:{line}: size {n} does not fit this machine"))
        };
        let id = match *op {
            Op::Alloc { id, .. } | Op::Realloc { id, .. } | Op::Free { id } => id,
        };
        let next = slot_of.len();
        let slot = *slot_of.entry(id).or_insert(next);
        if slot == live.len() {
            live.push(0);
        }
        steps.push(match *op {
            Op::Alloc { size, align, .. } => {
                total += size;
                live[slot] = size;
                Step::Alloc {
                    slot,
                    size: fit(size)?,
                    align: align as usize,
                }
            }
            Op::Realloc { size, .. } => {
                total = total - live[slot] + size;
                live[slot] = size;
                Step::Realloc {
                    slot,
                    size: fit(size)?,
                }
            }
            Op::Free { .. } => {
                total -= live[slot];
                Step::Free { slot }
            }
        });
        peak = peak.max(total);
    }
    Ok(Program {
        name: path
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned()),
        path: file,
        steps,
        lines: trace.lines,
        slots: live.len(),
        peak_live: peak,
        recorded,
    })
}

/// Watches a replay; the timed runs use [`Quiet`].
trait Observer {
    /// A block of `size` bytes aligned to `align` now lives at `ptr`; the first
    /// `kept` bytes came from the block's previous place.
    fn placed(
        &mut self,
        _h: &dyn Heap,
        _ptr: NonNull<u8>,
        _size: usize,
        _align: usize,
        _kept: usize,
    ) -> Result<(), String> {
        Ok(())
    }
    /// The block at `ptr` of `size` bytes is about to be freed or moved.
    fn leaving(&mut self, _ptr: NonNull<u8>, _size: usize) -> Result<(), String> {
        Ok(())
    }
    /// A request has completed.
    fn after(&mut self, _h: &dyn Heap) -> Result<(), String> {
        Ok(())
    }
    /// A realloc has completed; `moved`: the block changed address.
    fn reallocated(&mut self, _moved: bool) {}
}

struct Quiet;
impl Observer for Quiet {}

/// mdriver's validity checks, and with `walk` the heap's own check.
#[derive(Default)]
struct Validator {
    /// Live blocks by address: (end, fill byte).
    blocks: BTreeMap<usize, (usize, u8)>,
    /// The fill byte and size of the block a realloc is moving.
    moving: u8,
    moving_size: usize,
    walk: bool,
    placement: Placement,
}

/// Placement as seed 003's TLM measures it.
#[derive(Clone, Default)]
struct Placement {
    /// Live requested bytes now, and at the trace's peak.
    live: u64,
    peak: u64,
    /// Holes between consecutive live blocks when `live` first reached `peak`.
    holes: Option<Log2Histogram>,
    hole_bytes: u64,
    largest_hole: u64,
    reallocs_moved: u64,
    reallocs_in_place: u64,
    /// Live blocks at the peak as `[start, end)` offsets from the lowest, with
    /// blocks closer than [`MIN_HOLE`] merged (for the report's heap map).
    map: Vec<(u64, u64)>,
}

/// Gaps between live blocks smaller than this are the heap's bookkeeping (the
/// next block's header, alignment padding), not room another block could use.
const MIN_HOLE: u64 = 32;

impl Placement {
    /// Measures the holes between the live `blocks` of `heap` at the peak: a
    /// hole is a gap of at least [`MIN_HOLE`] bytes from the end of one block's
    /// usable bytes to the start of the next block.
    fn at_peak(&mut self, heap: &dyn Heap, blocks: &BTreeMap<usize, (usize, u8)>) {
        if self.holes.is_some() || self.live != self.peak {
            return;
        }
        let mut h = Log2Histogram::default();
        // SAFETY: every address in `blocks` is a live block of `heap`.
        let usable_end =
            |a: usize| a + unsafe { heap.usable_size(NonNull::new_unchecked(a as *mut u8)) };
        let base = blocks.keys().next().copied().unwrap_or(0);
        for &a in blocks.keys() {
            let (start, end) = ((a - base) as u64, (usable_end(a) - base) as u64);
            match self.map.last_mut() {
                Some(last) if start < last.1 + MIN_HOLE => last.1 = last.1.max(end),
                _ => self.map.push((start, end)),
            }
        }
        let ends = blocks.keys().map(|&a| usable_end(a));
        for (end, &start) in ends.zip(blocks.keys().skip(1)) {
            let gap = start.saturating_sub(end) as u64;
            if gap >= MIN_HOLE {
                h.add(gap);
                self.hole_bytes += gap;
                self.largest_hole = self.largest_hole.max(gap);
            }
        }
        self.holes = Some(h);
    }
}

/// Bytes of a block that validation fills and checks: all of a block up to
/// 128 KiB, the first and last 64 KiB of a larger one (so that a huge request
/// does not make the check touch gigabytes).
fn windows(size: usize) -> [std::ops::Range<usize>; 2] {
    const W: usize = 64 << 10;
    let head = size.min(W);
    [0..head, head.max(size.saturating_sub(W))..size]
}

impl Observer for Validator {
    fn placed(
        &mut self,
        h: &dyn Heap,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
        kept: usize,
    ) -> Result<(), String> {
        let a = ptr.as_ptr() as usize;
        if !a.is_multiple_of(align) {
            return Err(format!("block {a:#x} is not aligned to {align}"));
        }
        // SAFETY: `ptr` is live in `h`.
        if unsafe { h.usable_size(ptr) } < size {
            return Err(format!(
                "block {a:#x} has fewer than the {size} bytes requested"
            ));
        }
        let end = a + size.max(1);
        if let Some((&s, &(e, _))) = self.blocks.range(..end).next_back() {
            if e > a {
                return Err(format!(
                    "block [{a:#x}, {end:#x}) overlaps [{s:#x}, {e:#x})"
                ));
            }
        }
        let fill = self.moving.wrapping_add(0x5b) | 1;
        // SAFETY: the block has at least `size` usable bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
        for w in windows(self.moving_size) {
            let w = w.start.min(kept)..w.end.min(kept);
            if let Some(i) = bytes[w.clone()].iter().position(|&b| b != self.moving) {
                return Err(format!(
                    "realloc lost byte {} of the block now at {a:#x}",
                    w.start + i
                ));
            }
        }
        for w in windows(size) {
            bytes[w].fill(fill);
        }
        self.blocks.insert(a, (end, fill));
        self.placement.live += size as u64;
        Ok(())
    }

    fn leaving(&mut self, ptr: NonNull<u8>, size: usize) -> Result<(), String> {
        let a = ptr.as_ptr() as usize;
        let (_, fill) = self
            .blocks
            .remove(&a)
            .ok_or_else(|| format!("block {a:#x} is unknown"))?;
        // SAFETY: the block is still live with `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), size) };
        for w in windows(size) {
            if let Some(i) = bytes[w.clone()].iter().position(|&b| b != fill) {
                return Err(format!(
                    "byte {} of the block at {a:#x} changed while it was live",
                    w.start + i
                ));
            }
        }
        (self.moving, self.moving_size) = (fill, size);
        self.placement.live -= size as u64;
        Ok(())
    }

    fn reallocated(&mut self, moved: bool) {
        if moved {
            self.placement.reallocs_moved += 1;
        } else {
            self.placement.reallocs_in_place += 1;
        }
    }

    fn after(&mut self, h: &dyn Heap) -> Result<(), String> {
        self.placement.at_peak(h, &self.blocks);
        if self.walk {
            h.check().map_err(|e| format!("heap check failed: {e}"))?;
        }
        Ok(())
    }
}

/// Runs every step of `prog` on `h`; on failure, the step and why.
fn run(h: &mut dyn Heap, prog: &Program, obs: &mut impl Observer) -> Result<(), (usize, String)> {
    let mut blocks: Vec<(Option<NonNull<u8>>, usize, usize)> = vec![(None, 0, 0); prog.slots];
    for (i, step) in prog.steps.iter().enumerate() {
        let at = |msg: String| (i, msg);
        match *step {
            Step::Alloc { slot, size, align } => {
                let p = h.allocate(size, align).ok_or_else(|| {
                    at(format!(
                        "malloc({size}) failed with the heap at {} bytes",
                        h.heap_size()
                    ))
                })?;
                obs.placed(h, p, size, align, 0).map_err(at)?;
                blocks[slot] = (Some(p), size, align);
            }
            Step::Realloc { slot, size } => {
                let (Some(old), old_size, align) = blocks[slot] else {
                    unreachable!("the reader only emits realloc of live ids")
                };
                obs.leaving(old, old_size).map_err(at)?;
                // SAFETY: `old` is live in `h` with this alignment.
                let p = unsafe { h.reallocate(old, size, align) }.ok_or_else(|| {
                    at(format!(
                        "realloc to {size} failed with the heap at {} bytes",
                        h.heap_size()
                    ))
                })?;
                obs.placed(h, p, size, align, old_size.min(size))
                    .map_err(at)?;
                obs.reallocated(p != old);
                blocks[slot] = (Some(p), size, align);
            }
            Step::Free { slot } => {
                let (Some(p), size, _) = blocks[slot] else {
                    unreachable!("the reader only emits free of live ids")
                };
                obs.leaving(p, size).map_err(at)?;
                // SAFETY: `p` is live in `h`.
                unsafe { h.free(p) };
                blocks[slot].0 = None;
            }
        }
        obs.after(h).map_err(at)?;
    }
    Ok(())
}

/// The score of one trace on one heap.
struct Score {
    ops: usize,
    util: f64,
    frag4: f64,
    secs: f64,
    heap_size: usize,
    placement: Placement,
}

impl Score {
    fn kops(&self) -> f64 {
        self.ops as f64 / self.secs / 1000.0
    }
}

/// mdriver's performance index from an average utilization and a throughput.
fn perf_index(util: f64, kops: f64) -> f64 {
    100.0 * (UTIL_WEIGHT * util + (1.0 - UTIL_WEIGHT) * (kops / LIBC_KOPS).min(1.0))
}

fn score(arena: &mut Arena, name: &str, prog: &Program, args: &ReplayArgs) -> Result<Score> {
    let fail =
        |(i, msg): (usize, String)| anyhow!("{}:{}: {name}: {msg}", prog.path, prog.lines[i]);
    arena.reset();
    let mut h = heap::by_name(name, &mut *arena)
        .ok_or_else(|| anyhow!("heap {name}: the arena is too small"))?;
    let mut validator = Validator {
        walk: args.check,
        placement: Placement {
            peak: prog.peak_live,
            ..Placement::default()
        },
        ..Validator::default()
    };
    run(&mut *h, prog, &mut validator).map_err(fail)?;
    let heap_size = h.heap_size();
    drop(h);
    let (mut best, mut spent, mut runs) = (Duration::MAX, Duration::ZERO, 0);
    let min_time = Duration::from_millis(args.min_time_ms);
    while runs < args.runs || (spent < min_time && runs < 1000) {
        arena.reset();
        let start = Instant::now();
        let mut h = heap::by_name(name, &mut *arena)
            .ok_or_else(|| anyhow!("heap {name}: the arena is too small"))?;
        run(&mut *h, prog, &mut Quiet).map_err(fail)?;
        drop(h);
        let t = start.elapsed();
        best = best.min(t);
        spent += t;
        runs += 1;
    }
    let peak = prog.peak_live as f64;
    Ok(Score {
        ops: prog.steps.len(),
        util: if heap_size == 0 {
            0.0
        } else {
            peak / heap_size as f64
        },
        frag4: (heap_size as f64 - peak) / peak,
        secs: best.as_secs_f64().max(1e-9),
        heap_size,
        placement: validator.placement,
    })
}

fn heaps(spec: &str) -> Result<Vec<&'static str>> {
    if spec == "all" {
        return Ok(heap::NAMES.to_vec());
    }
    spec.split(',')
        .map(|p| {
            heap::NAMES
                .iter()
                .find(|n| **n == p.trim())
                .copied()
                .ok_or_else(|| {
                    anyhow!(
                        "unknown heap `{p}`; known: {}, or all",
                        heap::NAMES.join(", ")
                    )
                })
        })
        .collect()
}

fn number(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

pub fn run_cmd(args: ReplayArgs) -> Result<()> {
    let report = args.report.clone();
    match replay(args, &mut std::io::stdout().lock()) {
        Ok(figures) => {
            if let Some(path) = report {
                let intro = "Heap replays: utilization per trace and heap, each heap's map at the trace's peak, request sizes and lifetimes; for recorded programs, live bytes over time and each thread's CPU and wait time.";
                let html = crate::report::html(
                    "retype replay",
                    intro,
                    &crate::report::replay::sections(&figures),
                );
                std::fs::write(&path, html)
                    .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
            }
            Ok(())
        }
        // A reader that stops early (`| head`) is not an error.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The report sections of `retype replay ARGS…`, printing nothing.
pub fn report_sections(argv: &[&str]) -> Result<Vec<crate::report::Section>> {
    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        args: ReplayArgs,
    }
    let args = <Cmd as clap::Parser>::try_parse_from(
        std::iter::once("replay").chain(argv.iter().copied()),
    )?
    .args;
    Ok(crate::report::replay::sections(&replay(
        args,
        &mut std::io::sink(),
    )?))
}

/// Replays every trace on every heap, writing the table (or JSON) to `out`;
/// returns what a report shows of each trace.
fn replay(args: ReplayArgs, out: &mut impl Write) -> Result<Vec<TraceFigures>> {
    let names = heaps(&args.heap)?;
    let programs = args
        .traces
        .iter()
        .map(|p| compile(p))
        .collect::<Result<Vec<_>>>()?;
    let mut arena =
        Arena::new(ARENA).ok_or_else(|| anyhow!("cannot reserve a {ARENA}-byte arena"))?;
    if !args.json {
        writeln!(
            out,
            "{:<22} {:<18} {:>7} {:>6} {:>8} {:>10} {:>8}",
            "trace", "heap", "ops", "util", "frag4", "kops", "perfidx"
        )?;
    }
    let mut placements = Vec::new();
    let mut figures: Vec<TraceFigures> =
        programs.iter().map(trace_figures).collect::<Result<_>>()?;
    let mut progress =
        crate::progress::Progress::new((names.len() * programs.len()) as u64, "replay");
    for name in &names {
        let (mut util_sum, mut ops, mut secs) = (0.0, 0usize, 0.0);
        for prog in &programs {
            progress.step(&format!("{} on {name}", prog.name));
            let s = score(&mut arena, name, prog, &args)?;
            if let Some(f) = figures.iter_mut().find(|f| f.name == prog.name) {
                f.heaps.push(HeapRun {
                    heap: name.to_string(),
                    util: s.util,
                    map: s.placement.map.clone(),
                });
            }
            if prog.recorded {
                placements.push((prog.name.clone(), *name, s.placement.clone()));
            }
            util_sum += s.util;
            ops += s.ops;
            secs += s.secs;
            if args.json {
                let p = &s.placement;
                let holes: Vec<_> = p
                    .holes
                    .iter()
                    .flat_map(|h| h.nonempty())
                    .map(|(le, count)| serde_json::json!({"le": le as u64, "count": count}))
                    .collect();
                let row = serde_json::json!({
                    "trace": prog.path, "heap": name, "ops": s.ops, "util": number(s.util),
                    "frag4": number(s.frag4), "kops": number(s.kops()), "perfidx": number(perf_index(s.util, s.kops())),
                    "peak_live": prog.peak_live, "heap_size": s.heap_size, "secs": s.secs,
                    "holes_at_peak": p.holes.as_ref().map_or(0, |h| h.total()), "hole_bytes_at_peak": p.hole_bytes,
                    "largest_hole_at_peak": p.largest_hole, "hole_histogram": holes,
                    "reallocs_moved": p.reallocs_moved, "reallocs_in_place": p.reallocs_in_place,
                });
                writeln!(out, "{row}")?;
            } else {
                writeln!(
                    out,
                    "{:<22} {:<18} {:>7} {:>6.3} {:>8.3} {:>10.1} {:>8.1}",
                    prog.name,
                    name,
                    s.ops,
                    s.util,
                    s.frag4,
                    s.kops(),
                    perf_index(s.util, s.kops())
                )?;
            }
        }
        if programs.len() > 1 {
            let (util, kops) = (util_sum / programs.len() as f64, ops as f64 / secs / 1000.0);
            if args.json {
                let row = serde_json::json!({
                    "trace": "TOTAL", "heap": name, "traces": programs.len(), "ops": ops, "util": number(util),
                    "kops": number(kops), "perfidx": number(perf_index(util, kops)),
                });
                writeln!(out, "{row}")?;
            } else {
                writeln!(
                    out,
                    "{:<22} {:<18} {:>7} {:>6.3} {:>8} {:>10.1} {:>8.1}",
                    format!("TOTAL ({} traces)", programs.len()),
                    name,
                    ops,
                    util,
                    "",
                    kops,
                    perf_index(util, kops)
                )?;
            }
        }
    }
    if !args.json && !placements.is_empty() {
        print_placements(&placements);
    }
    Ok(figures)
}

/// What the report shows of a trace apart from the heaps: its request sizes,
/// lifetimes (in requests), and for a recording its live bytes over time and
/// its threads.
fn trace_figures(prog: &Program) -> Result<TraceFigures> {
    let mut born = vec![0usize; prog.slots];
    let (mut sizes, mut lifetimes) = (Vec::new(), Vec::new());
    for (i, step) in prog.steps.iter().enumerate() {
        match *step {
            Step::Alloc { slot, size, .. } | Step::Realloc { slot, size } => {
                sizes.push(size as u64);
                if matches!(step, Step::Alloc { .. }) {
                    born[slot] = i;
                }
            }
            Step::Free { slot } => lifetimes.push((i - born[slot]) as u64),
        }
    }
    let (mut live_over_time, mut threads) = (None, Vec::new());
    if prog.recorded {
        let t = retype_trace::format::load(Path::new(&prog.path), None)?;
        let events = t.serialized();
        let t0 = events.first().map_or(0, |e| e.time_ns);
        let mut live: HashMap<u64, u64> = HashMap::new();
        let mut total = 0u64;
        let mut points = Vec::new();
        for e in &events {
            if e.op.has_ptr() {
                total -= live.remove(&e.ptr).unwrap_or(0);
            }
            if e.op.allocates() && e.ret != 0 {
                total += e.size;
                live.insert(e.ret, e.size);
            }
            points.push(((e.time_ns - t0) as f64 / 1e6, total as f64 / 1024.0));
        }
        live_over_time = Some(points);
        threads = t
            .threads
            .iter()
            .map(|th| ThreadTimes {
                thread: th.thread,
                user: th.user_ns,
                system: th.system_ns,
                wait: th.wait_ns(),
            })
            .collect();
    }
    Ok(TraceFigures {
        name: prog.name.clone(),
        sizes,
        lifetimes,
        heaps: Vec::new(),
        live_over_time,
        threads,
    })
}

/// The placement table of recorded traces: holes between live blocks at the
/// peak, and reallocs that moved or grew in place.
fn print_placements(rows: &[(String, &str, Placement)]) {
    println!();
    println!(
        "{:<22} {:<18} {:>9} {:>12} {:>12} {:>9} {:>9}",
        "trace", "heap", "holes", "hole bytes", "largest", "moved", "in place"
    );
    for (trace, heap, p) in rows {
        println!(
            "{:<22} {:<18} {:>9} {:>12} {:>12} {:>9} {:>9}",
            trace,
            heap,
            p.holes.as_ref().map_or(0, |h| h.total()),
            p.hole_bytes,
            p.largest_hole,
            p.reallocs_moved,
            p.reallocs_in_place
        );
    }
}
