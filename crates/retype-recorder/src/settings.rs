//! The recorder's settings: every environment variable it reads, read once at
//! start (from the library constructor, or from the first malloc-family call
//! if another library's constructor calls first) into one [`Settings`] that
//! the rest reads.
//!
//! `RETYPE_TRACE_FILE` names the trace (unset or empty: no recording);
//! `RETYPE_ALLOCATOR` is copied into the trace's metadata; `RETYPE_STACK_DEPTH`
//! is the most frames a call stack keeps (unset or not a number: 32; at most
//! [`MAX_STACK_DEPTH`]; 0: no stacks, the cheapest recording);
//! `RETYPE_PAUSED` (`1`) opens the trace without recording until the toggle
//! signal starts it; `RETYPE_TOGGLE_SIGNAL` is that signal's number (unset: no
//! signal toggles, so a program run with the library but not through `retype
//! record` keeps its signals as they were). `RETYPE_AGGREGATE` (`1`) keeps
//! per-stack counters instead of events, with a snapshot of live bytes every
//! `RETYPE_SNAPSHOT_MS` ms (default [`DEFAULT_SNAPSHOT_MS`]; 0: none);
//! `RETYPE_SAMPLE_BYTES` (a number above 0) records only the allocations a
//! Poisson process over the bytes picks, that many bytes apart on average,
//! and `RETYPE_SAMPLE_SEED` seeds it (unset: from the clock). `RETYPE_RSS_MS` is the interval
//! between RSS samples in ms (unset or not a number: 10; 0: no samples).
//! `RETYPE_LATENCY_EVERY` is how many calls apart, on average, a full
//! recording measures a call's latency (unset, 0 or not a number:
//! [`DEFAULT_LATENCY_EVERY`]; 1: every call). The values are
//! copied into fixed storage: reading them allocates nothing, and what the
//! program later does to its environment changes nothing.
//!
//! A recorder loaded into a running process (`retype record --pid`) has no
//! such environment: the same variables come in one text, `NAME=VALUE` lines,
//! given to [`set`] before the recording starts.

use std::ffi::CStr;
use std::sync::OnceLock;

use crate::sys::{parse_num, StackStr};

/// The most frames one stack keeps, whatever `RETYPE_STACK_DEPTH` asks.
pub const MAX_STACK_DEPTH: usize = 128;
/// The frames a stack keeps when `RETYPE_STACK_DEPTH` does not say.
const DEFAULT_STACK_DEPTH: usize = 32;
/// The ms between RSS samples when `RETYPE_RSS_MS` does not say.
const DEFAULT_RSS_MS: u64 = 10;

const TRACE_FILE: &CStr = c"RETYPE_TRACE_FILE";
const ALLOCATOR: &CStr = c"RETYPE_ALLOCATOR";
const STACK_DEPTH: &CStr = c"RETYPE_STACK_DEPTH";
const PAUSED: &CStr = c"RETYPE_PAUSED";
const TOGGLE_SIGNAL: &CStr = c"RETYPE_TOGGLE_SIGNAL";
const AGGREGATE: &CStr = c"RETYPE_AGGREGATE";
const SNAPSHOT_MS: &CStr = c"RETYPE_SNAPSHOT_MS";
const SAMPLE_BYTES: &CStr = c"RETYPE_SAMPLE_BYTES";
const SAMPLE_SEED: &CStr = c"RETYPE_SAMPLE_SEED";

/// The interval between an aggregate recording's snapshots when
/// `RETYPE_SNAPSHOT_MS` does not say.
pub const DEFAULT_SNAPSHOT_MS: u64 = 100;

/// What the recorder keeps of the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every call, as an event.
    Full,
    /// Per-stack counters, and a snapshot of live bytes every `snapshot_ms` (0: none).
    Aggregate { snapshot_ms: u64 },
    /// The events of the allocations sampled every `mean_bytes` on average
    /// (and the frees of those blocks); `seed` seeds the gaps (0: the clock).
    Sampled { mean_bytes: u64, seed: u64 },
}
const RSS_MS: &CStr = c"RETYPE_RSS_MS";
const LATENCY_EVERY: &CStr = c"RETYPE_LATENCY_EVERY";

/// The calls apart, on average, whose latency a full recording measures
/// when `RETYPE_LATENCY_EVERY` does not say: about 1.5 % of the calls,
/// enough for a latency histogram of any program worth recording.
pub const DEFAULT_LATENCY_EVERY: u64 = 64;

/// A variable's value, up to 4096 bytes (what a path or a meta record's text
/// holds in the trace; the rest is cut off).
type Value = StackStr<4097>;

/// What the environment asks of the recorder.
pub struct Settings {
    trace_file: Option<Value>,
    allocator: Option<Value>,
    stack_depth: usize,
    paused: bool,
    toggle_signal: Option<i32>,
    mode: Mode,
    rss_ms: u64,
    /// At least 1.
    latency_every: u64,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The settings, read from the environment on the first call (which the
/// recorder's start makes).
#[inline(always)]
pub fn get() -> &'static Settings {
    SETTINGS.get_or_init(|| Settings::parse(getenv))
}

/// The settings, without [`get`]'s check that they were read.
///
/// # Safety
/// They were read, and this thread has seen that (recording is on: the
/// process's start reads them before it switches recording on, see
/// [`crate::recording::state`]).
#[inline(always)]
pub unsafe fn read() -> &'static Settings {
    // SAFETY: read, the caller says.
    unsafe { SETTINGS.get().unwrap_unchecked() }
}

/// Takes the settings from `text` (`NAME=VALUE` lines) instead of the
/// environment; false if they were read already.
pub fn set(text: &[u8]) -> bool {
    SETTINGS.set(Settings::from_text(text)).is_ok()
}

/// The value of environment variable `name`, if it is set.
fn getenv(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv neither allocates nor keeps it.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: getenv returns a NUL-terminated string or null; it is copied
    // before the program can change its environment.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

impl Settings {
    /// The settings the variables give, `var(name)` being the value of
    /// variable `name` if it is set.
    fn parse<'a>(var: impl Fn(&CStr) -> Option<&'a [u8]>) -> Settings {
        let value = |name| {
            var(name).map(|v| {
                let mut s = Value::new();
                s.push(v);
                s
            })
        };
        Settings {
            trace_file: value(TRACE_FILE).filter(|v| !v.as_bytes().is_empty()),
            allocator: value(ALLOCATOR),
            // Stacks are taken on x86-64 only.
            stack_depth: if cfg!(target_arch = "x86_64") {
                var(STACK_DEPTH)
                    .and_then(parse_num)
                    .map_or(DEFAULT_STACK_DEPTH, |d| {
                        d.min(MAX_STACK_DEPTH as u64) as usize
                    })
            } else {
                0
            },
            paused: var(PAUSED) == Some(b"1"),
            toggle_signal: var(TOGGLE_SIGNAL)
                .and_then(parse_num)
                .filter(|&n| n > 0 && n < 65)
                .map(|n| n as i32),
            mode: if var(AGGREGATE) == Some(b"1") {
                Mode::Aggregate {
                    snapshot_ms: var(SNAPSHOT_MS)
                        .and_then(parse_num)
                        .unwrap_or(DEFAULT_SNAPSHOT_MS),
                }
            } else {
                match var(SAMPLE_BYTES).and_then(parse_num).filter(|&n| n > 0) {
                    Some(mean_bytes) => Mode::Sampled {
                        mean_bytes,
                        seed: var(SAMPLE_SEED).and_then(parse_num).unwrap_or(0),
                    },
                    None => Mode::Full,
                }
            },
            rss_ms: var(RSS_MS).and_then(parse_num).unwrap_or(DEFAULT_RSS_MS),
            latency_every: var(LATENCY_EVERY)
                .and_then(parse_num)
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_LATENCY_EVERY),
        }
    }

    /// The settings `text` (`NAME=VALUE` lines) gives.
    fn from_text(text: &[u8]) -> Settings {
        Settings::parse(|name| {
            text.split(|&c| c == b'\n').find_map(|line| {
                line.strip_prefix(name.to_bytes())
                    .and_then(|rest| rest.strip_prefix(b"="))
            })
        })
    }

    /// Whether the trace opens paused (`RETYPE_PAUSED=1`).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The signal that starts and stops recording (`RETYPE_TOGGLE_SIGNAL`), if any.
    pub fn toggle_signal(&self) -> Option<i32> {
        self.toggle_signal
    }

    /// The trace's path (`RETYPE_TRACE_FILE`); `None`: this process records nothing.
    pub fn trace_file(&self) -> Option<&[u8]> {
        self.trace_file.as_ref().map(Value::as_bytes)
    }

    /// The allocator's name for the trace's metadata (`RETYPE_ALLOCATOR`, if set).
    pub fn allocator(&self) -> Option<&[u8]> {
        self.allocator.as_ref().map(Value::as_bytes)
    }

    /// The most frames a stack keeps (`RETYPE_STACK_DEPTH`); 0: stacks are not recorded.
    #[inline(always)]
    pub fn stack_depth(&self) -> usize {
        self.stack_depth
    }

    /// What is kept of the calls: all, counters, or samples.
    #[inline(always)]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The ms between RSS samples (`RETYPE_RSS_MS`); 0: RSS is not sampled.
    pub fn rss_ms(&self) -> u64 {
        self.rss_ms
    }

    /// The calls apart, on average, whose latency a full recording
    /// measures (`RETYPE_LATENCY_EVERY`); 1: every call.
    #[inline(always)]
    pub fn latency_every(&self) -> u64 {
        self.latency_every
    }

    /// Whether call stacks are recorded.
    #[inline(always)]
    pub fn records_stacks(&self) -> bool {
        self.stack_depth != 0
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use proptest::prelude::*;

    use super::{
        Mode, Settings, DEFAULT_LATENCY_EVERY, DEFAULT_RSS_MS, DEFAULT_STACK_DEPTH, MAX_STACK_DEPTH,
    };

    /// The settings of an environment that holds just `vars`.
    fn parse(vars: &[(&CStr, &[u8])]) -> Settings {
        Settings::parse(|name| vars.iter().find(|(n, _)| *n == name).map(|&(_, v)| v))
    }

    fn depth(value: &[u8]) -> usize {
        parse(&[(c"RETYPE_STACK_DEPTH", value)]).stack_depth()
    }

    #[test]
    fn an_empty_environment_records_nothing_with_the_default_depth() {
        let s = parse(&[]);
        assert_eq!(s.trace_file(), None);
        assert_eq!(s.allocator(), None);
        assert_eq!(s.stack_depth(), 32);
        assert!(s.records_stacks());
    }

    #[test]
    fn each_variable_gives_its_setting() {
        let s = parse(&[
            (c"RETYPE_TRACE_FILE", b"/tmp/t.rtr"),
            (c"RETYPE_ALLOCATOR", b"mimalloc"),
            (c"RETYPE_STACK_DEPTH", b"7"),
            (c"RETYPE_OTHER", b"1"),
        ]);
        assert_eq!(s.trace_file(), Some(&b"/tmp/t.rtr"[..]));
        assert_eq!(s.allocator(), Some(&b"mimalloc"[..]));
        assert_eq!(s.stack_depth(), 7);
    }

    #[test]
    fn an_empty_trace_file_records_nothing_but_an_empty_allocator_is_kept() {
        let s = parse(&[(c"RETYPE_TRACE_FILE", b""), (c"RETYPE_ALLOCATOR", b"")]);
        assert_eq!(s.trace_file(), None);
        assert_eq!(s.allocator(), Some(&b""[..]));
    }

    #[test]
    fn paused_and_the_toggle_signal_are_read() {
        let s = parse(&[(c"RETYPE_PAUSED", b"1"), (c"RETYPE_TOGGLE_SIGNAL", b"12")]);
        assert!(s.paused());
        assert_eq!(s.toggle_signal(), Some(12));
        let s = parse(&[(c"RETYPE_PAUSED", b"0"), (c"RETYPE_TOGGLE_SIGNAL", b"99")]);
        assert!(!s.paused());
        assert_eq!(s.toggle_signal(), None);
        let s = parse(&[]);
        assert!(!s.paused());
        assert_eq!(s.toggle_signal(), None);
    }

    #[test]
    fn the_rss_interval_is_read_zero_turns_it_off() {
        assert_eq!(parse(&[]).rss_ms(), DEFAULT_RSS_MS);
        assert_eq!(parse(&[(c"RETYPE_RSS_MS", b"250")]).rss_ms(), 250);
        assert_eq!(parse(&[(c"RETYPE_RSS_MS", b"0")]).rss_ms(), 0);
        assert_eq!(
            parse(&[(c"RETYPE_RSS_MS", b"soon")]).rss_ms(),
            DEFAULT_RSS_MS
        );
        assert_eq!(Settings::from_text(b"RETYPE_RSS_MS=3\n").rss_ms(), 3);
    }

    #[test]
    fn a_text_of_lines_gives_the_same_settings() {
        let s = Settings::from_text(
            b"RETYPE_TRACE_FILE=/tmp/a b.rtr\nRETYPE_STACK_DEPTH=5\nRETYPE_PAUSED=1\n",
        );
        assert_eq!(s.trace_file(), Some(&b"/tmp/a b.rtr"[..]));
        assert_eq!(s.stack_depth(), 5);
        assert!(s.paused());
        assert_eq!(s.allocator(), None);
        // A name is matched whole: RETYPE_PAUSED_X is another variable.
        assert!(!Settings::from_text(b"RETYPE_PAUSED_X=1").paused());
    }

    #[test]
    fn aggregate_and_sampling_are_read() {
        assert_eq!(parse(&[]).mode(), Mode::Full);
        let s = parse(&[(c"RETYPE_AGGREGATE", b"1")]);
        assert_eq!(s.mode(), Mode::Aggregate { snapshot_ms: 100 });
        let s = parse(&[(c"RETYPE_AGGREGATE", b"1"), (c"RETYPE_SNAPSHOT_MS", b"0")]);
        assert_eq!(s.mode(), Mode::Aggregate { snapshot_ms: 0 });
        let s = parse(&[
            (c"RETYPE_SAMPLE_BYTES", b"4096"),
            (c"RETYPE_SAMPLE_SEED", b"7"),
        ]);
        assert_eq!(
            s.mode(),
            Mode::Sampled {
                mean_bytes: 4096,
                seed: 7
            }
        );
        // 0 bytes or not a number: every call.
        for bad in [&b"0"[..], b"many"] {
            assert_eq!(parse(&[(c"RETYPE_SAMPLE_BYTES", bad)]).mode(), Mode::Full);
        }
    }

    #[test]
    fn the_latency_sample_is_read_zero_or_junk_gives_the_default() {
        assert_eq!(parse(&[]).latency_every(), DEFAULT_LATENCY_EVERY);
        assert_eq!(parse(&[(c"RETYPE_LATENCY_EVERY", b"1")]).latency_every(), 1);
        assert_eq!(
            parse(&[(c"RETYPE_LATENCY_EVERY", b"500")]).latency_every(),
            500
        );
        for bad in [&b"0"[..], b"often", b""] {
            let s = parse(&[(c"RETYPE_LATENCY_EVERY", bad)]);
            assert_eq!(s.latency_every(), DEFAULT_LATENCY_EVERY);
        }
    }

    #[test]
    fn depth_zero_turns_stacks_off() {
        assert_eq!(depth(b"0"), 0);
        assert!(!parse(&[(c"RETYPE_STACK_DEPTH", b"0")]).records_stacks());
    }

    #[test]
    fn bad_depths_read_as_the_default() {
        for bad in [&b""[..], b"deep", b"-1", b" 8", b"99999999999999999999999"] {
            assert_eq!(depth(bad), DEFAULT_STACK_DEPTH, "{:?}", bad.escape_ascii());
        }
        // A number followed by anything reads as the number.
        assert_eq!(depth(b"12 frames"), 12);
    }

    #[test]
    fn long_values_are_cut_at_4096_bytes() {
        let long = [b'a'; 5000];
        let s = parse(&[(c"RETYPE_TRACE_FILE", &long), (c"RETYPE_ALLOCATOR", &long)]);
        assert_eq!(s.trace_file(), Some(&long[..4096]));
        assert_eq!(s.allocator(), Some(&long[..4096]));
    }

    proptest! {
        #[test]
        fn a_depth_is_kept_up_to_the_maximum(d in prop_oneof![0..=300u64, any::<u64>()]) {
            let expect = if d <= MAX_STACK_DEPTH as u64 { d as usize } else { MAX_STACK_DEPTH };
            prop_assert_eq!(depth(d.to_string().as_bytes()), expect);
        }
    }
}
