//! A thread's times as TLM defines them (seed 003 §3): lifetime, user and
//! kernel time, and wait = lifetime − (user + kernel), from its samples.
//!
//! The CPU time is the thread's CPU clock, exact to the nanosecond; Linux
//! splits it into user and kernel time by sampling at each timer tick
//! (tick-based accounting), so the split of a short interval is coarse while
//! the total is exact. Kernel time is the kernel's system time, never more
//! than the CPU time; user time is the rest. The program reads its clocks so
//! that the CPU time since its start cannot exceed the lifetime; should the
//! two clocks drift apart by a few nanoseconds, the CPU time is capped at the
//! lifetime, so that no time is negative and wait = lifetime − user − kernel
//! holds exactly.

use serde::{Deserialize, Serialize};

use super::workload::Sample;

/// A thread's times from its start to a sample, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    pub lifetime_ns: u64,
    pub user_ns: u64,
    pub kernel_ns: u64,
    pub wait_ns: u64,
    pub minor_faults: u64,
}

impl Times {
    /// The times between samples `from` and `to` of one thread.
    pub fn between(from: &Sample, to: &Sample) -> Times {
        let lifetime = to.mono_ns.saturating_sub(from.mono_ns);
        let cpu = to.cpu_ns.saturating_sub(from.cpu_ns).min(lifetime);
        let kernel = (to.sys_us.saturating_sub(from.sys_us) * 1000).min(cpu);
        Times {
            lifetime_ns: lifetime,
            user_ns: cpu - kernel,
            kernel_ns: kernel,
            wait_ns: lifetime - cpu,
            minor_faults: to.minor_faults.saturating_sub(from.minor_faults),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(mono_ns: u64, cpu_ns: u64, sys_us: u64) -> Sample {
        Sample {
            round: 0,
            blocks: 0,
            mono_ns,
            cpu_ns,
            user_us: 0,
            sys_us,
            minor_faults: mono_ns / 100,
        }
    }

    #[test]
    fn wait_is_the_lifetime_not_spent_on_the_cpu() {
        let t = Times::between(&at(1_000, 500, 0), &at(11_000, 6_500, 2));
        assert_eq!(
            t,
            Times {
                lifetime_ns: 10_000,
                user_ns: 4_000,
                kernel_ns: 2_000,
                wait_ns: 4_000,
                minor_faults: 100,
            }
        );
    }

    #[test]
    fn no_time_is_negative_when_the_clocks_disagree() {
        // CPU clock ahead of the lifetime, system time ahead of the CPU time.
        let t = Times::between(&at(0, 0, 0), &at(1_000, 1_200, 5));
        assert_eq!(
            (t.lifetime_ns, t.kernel_ns, t.user_ns, t.wait_ns),
            (1_000, 1_000, 0, 0)
        );
        let t = Times::between(&at(5, 5, 3), &at(4, 4, 2));
        assert_eq!(t, Times::default());
    }
}
