//! One result row per allocator, thread count and block size: what
//! `retype study tlm --json` prints and the report reads back.

use serde::{Deserialize, Serialize};

use super::calls::Descheduled;
use super::space::Space;
use super::syscalls::Syscalls;
use super::times::Times;
use super::workload::{Plan, Worker};

/// One worker's times over its whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadRow {
    /// The worker's number, from 0.
    pub thread: u32,
    #[serde(flatten)]
    pub times: Times,
}

/// The workers' times from their start to the end of a round, the mean
/// over the workers (the seed's panels, one point per round).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRow {
    /// 0 is the start; `rounds + steady_rounds` the last.
    pub round: u32,
    /// The blocks each worker allocated and freed in this round.
    pub blocks: u64,
    pub lifetime_ns: f64,
    pub user_ns: f64,
    pub kernel_ns: f64,
    pub wait_ns: f64,
    pub minor_faults: f64,
}

/// The latency percentiles of the steady rounds' calls, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
}

impl Latency {
    /// The percentiles of `v` by the nearest-rank method (the smallest
    /// sample that at least p % of the samples do not exceed, the rank
    /// computed in whole numbers); all 0 for no samples.
    pub fn of(v: &mut [u64]) -> Latency {
        if v.is_empty() {
            return Latency::default();
        }
        v.sort_unstable();
        let n = v.len() as u64;
        // p in hundredths of a per cent.
        let at = |p: u64| v[((p * n).div_ceil(10_000).max(1) - 1) as usize];
        Latency {
            p50_ns: at(5_000),
            p99_ns: at(9_900),
            p999_ns: at(9_990),
            p9999_ns: at(9_999),
            max_ns: at(10_000),
        }
    }
}

/// Everything measured for one allocator, thread count and block size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub allocator: String,
    pub threads: u32,
    /// Bytes per block.
    pub size: u64,
    pub rounds: u32,
    pub steady_rounds: u32,
    pub blocks_per_round: u32,
    /// Plain runs (and as many recorded runs).
    pub runs: u32,
    /// The plain run, from 0, whose times `per_thread` and `by_round` give:
    /// the one with the median mean lifetime of its workers.
    pub median_run: u32,
    pub per_thread: Vec<ThreadRow>,
    pub by_round: Vec<RoundRow>,
    /// Kernel over user time of every worker of every plain run; `None` if
    /// no user time was measured.
    pub kernel_user_ratio: Option<f64>,
    /// The same over the steady rounds only.
    pub steady_kernel_user_ratio: Option<f64>,
    /// The workload's mallocs in one run (as many frees).
    pub mallocs: u64,
    /// The workers' calls the recorder saw in each recorded run, every one
    /// as the plan says (a run that differs stops the study).
    pub recorded_calls: u64,
    /// The calls of the steady rounds of all recorded runs whose latencies
    /// the percentiles are taken over.
    pub steady_calls: u64,
    #[serde(flatten)]
    pub latency: Latency,
    /// Of the steady calls, those during which the worker was descheduled
    /// (preempted or blocked), and the longest of the others: the allocator's
    /// own worst case. `None` when the recorder could not tell (no rseq).
    pub descheduled_calls: Option<u64>,
    pub max_running_ns: Option<u64>,
    /// Calls that map or return memory, from one run under strace; `None`
    /// when not counted.
    pub syscalls: Option<Syscalls>,
    /// Switches from user to kernel mode per worker that the allocator
    /// caused, counted exactly: its page faults (the median run's mean) and
    /// its share of the memory system calls under strace (the workload's own
    /// timer reads and the timer's interrupts are not counted); `None`
    /// without the system calls.
    #[serde(default)]
    pub mode_switches: Option<f64>,
    /// The same per ms of the worker's CPU time (user + kernel): the
    /// frequency that seed 003 names as one of its two headline metrics.
    #[serde(default)]
    pub mode_switches_per_cpu_ms: Option<f64>,
    /// The allocator's address space at the peak, from one more run;
    /// `None` in rows written before it was measured.
    #[serde(default)]
    pub space: Option<Space>,
}

/// What the runs of one allocator, thread count and size gave.
#[derive(Default)]
pub struct Runs {
    pub plain: Vec<Vec<Worker>>,
    pub recorded_calls: Vec<u64>,
    pub latencies: Vec<u64>,
    /// Each recorded run's descheduled calls (`None`: not told).
    pub descheduled: Vec<Option<Descheduled>>,
    pub syscalls: Option<Syscalls>,
    pub space: Option<Space>,
}

impl Row {
    pub fn of(allocator: &str, plan: &Plan, mut runs: Runs) -> Row {
        // Told only if every recorded run told.
        let descheduled = runs
            .descheduled
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()
            .map(|v| {
                v.into_iter()
                    .fold(Descheduled::default(), Descheduled::merge)
            });
        let last = (plan.rounds + plan.steady) as usize;
        let whole = |w: &Worker| Times::between(&w.samples[0], &w.samples[last]);
        let mean_lifetime = |run: &Vec<Worker>| {
            run.iter().map(|w| whole(w).lifetime_ns as f64).sum::<f64>() / run.len() as f64
        };
        let mut order: Vec<usize> = (0..runs.plain.len()).collect();
        order.sort_by(|&a, &b| {
            mean_lifetime(&runs.plain[a]).total_cmp(&mean_lifetime(&runs.plain[b]))
        });
        let median = order[(order.len() - 1) / 2];
        let run = &runs.plain[median];
        let per_thread = run
            .iter()
            .enumerate()
            .map(|(i, w)| ThreadRow {
                thread: i as u32,
                times: whole(w),
            })
            .collect();
        let by_round = (0..=last)
            .map(|k| {
                let t: Vec<Times> = run
                    .iter()
                    .map(|w| Times::between(&w.samples[0], &w.samples[k]))
                    .collect();
                let mean = |f: fn(&Times) -> u64| {
                    t.iter().map(|x| f(x) as f64).sum::<f64>() / t.len() as f64
                };
                RoundRow {
                    round: k as u32,
                    blocks: run[0].samples[k].blocks,
                    lifetime_ns: mean(|x| x.lifetime_ns),
                    user_ns: mean(|x| x.user_ns),
                    kernel_ns: mean(|x| x.kernel_ns),
                    wait_ns: mean(|x| x.wait_ns),
                    minor_faults: mean(|x| x.minor_faults),
                }
            })
            .collect();
        let ratio = |from: usize| {
            let (mut kernel, mut user) = (0u64, 0u64);
            for w in runs.plain.iter().flatten() {
                let t = Times::between(&w.samples[from], &w.samples[last]);
                kernel += t.kernel_ns;
                user += t.user_ns;
            }
            (user > 0).then(|| kernel as f64 / user as f64)
        };
        let recorded_calls = runs.recorded_calls.iter().copied().min().unwrap_or(0);
        let workers = run.len() as f64;
        let per_worker =
            |f: fn(&Times) -> u64| run.iter().map(|w| f(&whole(w)) as f64).sum::<f64>() / workers;
        let mode_switches = runs.syscalls.as_ref().map(|s| {
            per_worker(|t| t.minor_faults) + s.rounds.total as f64 / f64::from(plan.threads)
        });
        let cpu_ms = per_worker(|t| t.user_ns + t.kernel_ns) / 1e6;
        Row {
            allocator: allocator.to_string(),
            threads: plan.threads,
            size: plan.size,
            rounds: plan.rounds,
            steady_rounds: plan.steady,
            blocks_per_round: plan.blocks,
            runs: runs.plain.len() as u32,
            median_run: median as u32,
            per_thread,
            by_round,
            kernel_user_ratio: ratio(0),
            steady_kernel_user_ratio: ratio(plan.rounds as usize),
            mallocs: plan.mallocs_per_thread() * u64::from(plan.threads),
            recorded_calls,
            steady_calls: runs.latencies.len() as u64,
            latency: Latency::of(&mut runs.latencies),
            descheduled_calls: descheduled.map(|d| d.calls),
            max_running_ns: descheduled.map(|d| d.max_running_ns),
            syscalls: runs.syscalls,
            mode_switches,
            mode_switches_per_cpu_ms: mode_switches.filter(|_| cpu_ms > 0.0).map(|m| m / cpu_ms),
            space: runs.space,
        }
    }

    /// The mean over the workers of their times over the whole run.
    pub fn mean(&self, f: fn(&Times) -> u64) -> f64 {
        self.per_thread
            .iter()
            .map(|t| f(&t.times) as f64)
            .sum::<f64>()
            / self.per_thread.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank_and_none_for_no_calls() {
        let mut v: Vec<u64> = (1..=10_000).rev().collect();
        let l = Latency::of(&mut v);
        assert_eq!(
            (l.p50_ns, l.p99_ns, l.p999_ns, l.p9999_ns, l.max_ns),
            (5_000, 9_900, 9_990, 9_999, 10_000)
        );
        assert_eq!(Latency::of(&mut []), Latency::default());
        let one = Latency::of(&mut [7]);
        assert_eq!((one.p50_ns, one.max_ns), (7, 7));
    }
}
