//! The short run of every fuzz target that `scripts/test` makes, on stable
//! Rust and without libFuzzer: each target's corpus (`fuzz/corpus/TARGET/`)
//! replayed, then random mutations of it: by default the same 200 per target
//! on every run (`RETYPE_FUZZ_MUTATIONS`, seed `RETYPE_FUZZ_SEED`, default 1),
//! so that a test run passes or fails alike on any machine; with
//! `RETYPE_FUZZ_SECONDS` set, as many as fit in that time, seeded by the clock
//! unless `RETYPE_FUZZ_SEED` is given. The mutations are not coverage-guided as
//! libFuzzer's are (`scripts/fuzz` runs those). The seed is printed before the
//! first mutation, so that a run can be replayed. An input that makes a
//! target panic, or runs longer than `RETYPE_FUZZ_HANG_SECONDS` (60), is
//! written to `fuzz/artifacts/TARGET/`, where `scripts/fuzz` and libFuzzer
//! read it too, and named in the failure.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use retype_core::rng::SplitMix64;
use retype_fuzz::{Target, TARGETS};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir`, by name (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.expect("a readable directory").path()).collect())
        .unwrap_or_default();
    out.retain(|p| p.is_file());
    out.sort();
    out
}

#[test]
fn every_target_has_a_binary_and_a_corpus() {
    let mut binaries: Vec<String> = files(&root().join("fuzz_targets"))
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    binaries.sort();
    let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(
        binaries, names,
        "fuzz_targets/ and TARGETS name other targets"
    );
    for t in TARGETS {
        let corpus = files(&root().join("corpus").join(t.name));
        assert!(
            !corpus.is_empty(),
            "{}: no seeds in fuzz/corpus/{0}",
            t.name
        );
    }
}

/// The project's seeded generator, so that a seed replays a run; `below` takes any `n`.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.below(n.max(1) as u64) as usize
    }
}

/// Bytes and words that parsers treat specially.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\0",
    b",",
    b" ",
    b":",
    b"=",
    b"-",
    b"0x",
    b"0",
    b"1",
    b"-1",
    b"255",
    b"4294967295",
    b"4294967296",
    b"18446744073709551615",
    b"99999999999999999999999",
    b"\xff",
    b"\x80",
    b"\xc3",
];

/// One to four random changes of `input`: bit flips, tokens written or
/// inserted, ranges deleted or repeated, a cut, a piece of another seed.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = rng.next() as u8;
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at..end);
            }
            4 => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                let piece = v[at..end].to_vec();
                v.splice(at..at, piece);
            }
            5 => v.truncate(at),
            _ if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(256)).min(other.len());
                v.splice(at..at, other[from..end].iter().copied());
            }
            _ => {}
        }
    }
    v
}

/// How long one input may run before the run counts as hung
/// (`RETYPE_FUZZ_HANG_SECONDS`, 60 by default: libFuzzer's 1 s is for a quiet
/// machine, and this test also runs on loaded ones).
fn hang_limit() -> Duration {
    let seconds: f64 = std::env::var("RETYPE_FUZZ_HANG_SECONDS").map_or(60.0, |s| {
        s.parse()
            .expect("RETYPE_FUZZ_HANG_SECONDS is a number of seconds")
    });
    Duration::from_secs_f64(seconds)
}

/// The input now running, for the watchdog: its target, bytes, name and start.
type Running = Option<(&'static str, Vec<u8>, String, Instant)>;
static RUNNING: Mutex<Running> = Mutex::new(None);

/// Watches [`RUNNING`]: an input running past [`hang_limit`] is kept in
/// `fuzz/artifacts/TARGET/` and the whole test process exits naming it, since
/// a hung target cannot be unwound.
fn watchdog() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let limit = hang_limit();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(250));
            let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((name, input, what, start)) = running.as_ref() {
                if start.elapsed() > limit {
                    let path = keep(name, "slow", input);
                    // Past the test harness's capture, which exit would discard.
                    let _ = writeln!(
                        std::io::stderr(),
                        "{name}: {what} runs over {} s; the input is {}",
                        limit.as_secs_f64(),
                        path.display()
                    );
                    std::process::exit(1);
                }
            }
        });
    });
}

/// Writes `input` to `fuzz/artifacts/TARGET/KIND-HASH`, where libFuzzer and
/// `scripts/fuzz` read it too.
fn keep(name: &str, kind: &str, input: &[u8]) -> PathBuf {
    let dir = root().join("artifacts").join(name);
    std::fs::create_dir_all(&dir).expect("fuzz/artifacts is writable");
    let path = dir.join(format!("{kind}-{:016x}", fnv(input)));
    std::fs::write(&path, input).expect("fuzz/artifacts is writable");
    path
}

/// Runs `target` on `input`; on a panic or a hang, keeps the input and fails
/// naming it.
fn check(target: &Target, input: &[u8], what: &str) {
    watchdog();
    let set = |r: Running| *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = r;
    set(Some((
        target.name,
        input.to_vec(),
        what.to_string(),
        Instant::now(),
    )));
    let ok = catch_unwind(AssertUnwindSafe(|| (target.run)(input))).is_ok();
    set(None);
    if ok {
        return;
    }
    let path = keep(target.name, "crash", input);
    panic!(
        "{}: {what} panics (above); the input is {}",
        target.name,
        path.display()
    );
}

/// FNV-1a, to name a crashing input by its bytes.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn run(name: &str) {
    let target = TARGETS.iter().find(|t| t.name == name).expect("a target");
    let seeds: Vec<(PathBuf, Vec<u8>)> = files(&root().join("corpus").join(name))
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("a readable seed");
            (p, bytes)
        })
        .collect();
    for (path, bytes) in &seeds {
        check(target, bytes, &format!("seed {}", path.display()));
    }
    let var = |k: &str| std::env::var(k).ok();
    let seconds: Option<f64> = var("RETYPE_FUZZ_SECONDS").map(|s| {
        s.parse()
            .expect("RETYPE_FUZZ_SECONDS is a number of seconds")
    });
    let mutations: u64 = var("RETYPE_FUZZ_MUTATIONS").map_or(200, |s| {
        s.parse().expect("RETYPE_FUZZ_MUTATIONS is a whole number")
    });
    let seed = match (var("RETYPE_FUZZ_SEED"), seconds) {
        (Some(s), _) => s.parse().expect("RETYPE_FUZZ_SEED is a whole number"),
        (None, Some(_)) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        }
        (None, None) => 1,
    };
    eprintln!("{name}: mutations from RETYPE_FUZZ_SEED={seed}");
    let mut rng = Rng(SplitMix64::new(seed));
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut tried = 0u64;
    while deadline.map_or(tried < mutations, |d| Instant::now() < d) {
        let (_, input) = &seeds[rng.below(seeds.len())];
        let (_, other) = &seeds[rng.below(seeds.len())];
        let mutant = mutate(&mut rng, input, other);
        check(
            target,
            &mutant,
            &format!("mutation {tried} of RETYPE_FUZZ_SEED={seed}"),
        );
        tried += 1;
    }
    println!(
        "{name}: {} seeds, {tried} mutations (RETYPE_FUZZ_SEED={seed})",
        seeds.len()
    );
}

macro_rules! targets {
    ($($name:ident)*) => {$(
        #[test]
        fn $name() {
            run(stringify!($name));
        }
    )*};
}

targets!(rtr rtr_cut rep valgrind wee_alloc csv cantrip_log script grid_cell symbolize cheri_decode);
