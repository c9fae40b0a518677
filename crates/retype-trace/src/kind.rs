//! Which kind of recording a trace is, from its `recording` meta record:
//! **full** (every call an event), **aggregate** (`retype record
//! --aggregate`: per-stack counters and snapshots, no events) or
//! **sampled** (`retype record --sample-bytes N`: the events of the
//! allocations a Poisson process over the bytes picked, mean gap N, and the
//! frees of those blocks).
//!
//! A sampled allocation stands for all the calls it was drawn from: a block
//! of `s` bytes is picked with probability `p = 1 - e^(-s/N)` (jemalloc's and
//! tcmalloc's sampling), so counting it as `1/p` calls and `s/p` bytes
//! ([`Kind::weigh`]) makes every sum an unbiased estimate of the full
//! recording's.

use std::fmt;

use crate::trace::Trace;

/// The kind of a recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Every call, as an event (also every import of another tool's trace).
    #[default]
    Full,
    /// Per-stack counters and snapshots of live bytes; no events.
    Aggregate,
    /// The events of allocations sampled every `mean_bytes` bytes on average.
    Sampled { mean_bytes: u64 },
}

impl Kind {
    /// The kind `trace`'s meta records name (`recording`, `sample_bytes`);
    /// a trace that names none is a full recording.
    pub fn of(trace: &Trace) -> Kind {
        match trace.meta_value("recording") {
            Some("aggregate") => Kind::Aggregate,
            Some("sampled") => trace
                .meta_value("sample_bytes")
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .map_or(Kind::Full, |mean_bytes| Kind::Sampled { mean_bytes }),
            _ => Kind::Full,
        }
    }

    /// The name the `recording` meta record and JSON outputs use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Aggregate => "aggregate",
            Kind::Sampled { .. } => "sampled",
        }
    }

    /// The mean bytes between samples of a sampled recording.
    pub fn sample_bytes(self) -> Option<u64> {
        match self {
            Kind::Sampled { mean_bytes } => Some(mean_bytes),
            _ => None,
        }
    }

    /// What an allocation of `size` bytes recorded in a trace of this kind
    /// stands for: `(calls, bytes)`, `(1, size)` unless sampled.
    pub fn weigh(self, size: u64) -> Weight {
        let Kind::Sampled { mean_bytes } = self else {
            return Weight {
                calls: 1,
                bytes: size,
            };
        };
        if size == 0 {
            // Never sampled: a recorded one is the full recording's own.
            return Weight { calls: 1, bytes: 0 };
        }
        let p = -(-(size as f64) / mean_bytes as f64).exp_m1();
        Weight {
            calls: (1.0 / p).round().max(1.0) as u64,
            bytes: (size as f64 / p).round() as u64,
        }
    }
}

/// The calls and bytes one recorded allocation stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    pub calls: u64,
    pub bytes: u64,
}

impl fmt::Display for Kind {
    /// One line that says what the trace holds, for text outputs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Full => write!(f, "full (every call)"),
            Kind::Aggregate => write!(
                f,
                "aggregate (per-stack counters and snapshots of live bytes, no events)"
            ),
            Kind::Sampled { mean_bytes } => write!(
                f,
                "sampled (one allocation per {mean_bytes} bytes on average; calls and bytes are estimates)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_recording_weighs_each_call_once() {
        assert_eq!(
            Kind::Full.weigh(100),
            Weight {
                calls: 1,
                bytes: 100
            }
        );
        assert_eq!(Kind::Aggregate.weigh(7), Weight { calls: 1, bytes: 7 });
    }

    #[test]
    fn a_sampled_block_stands_for_the_calls_it_was_drawn_from() {
        let k = Kind::Sampled {
            mean_bytes: 1 << 20,
        };
        // Far above the mean: almost surely sampled, stands for itself.
        assert_eq!(
            k.weigh(1 << 30),
            Weight {
                calls: 1,
                bytes: 1 << 30
            }
        );
        // Far below: about mean/size calls of about mean bytes in all.
        let w = k.weigh(64);
        assert!((16383..=16385).contains(&w.calls), "{w:?}");
        assert!(w.bytes.abs_diff(1 << 20) < 64, "{w:?}");
    }
}
