//! The recorded run: every worker's calls, as the recorder saw them, checked
//! against the plan call for call, and the latencies of its steady rounds.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use retype_trace::{Event, Op, Reader, Record};

use super::workload::Plan;

/// What one recording holds.
pub struct Recorded {
    /// The workers' calls, each as the plan says (mallocs and frees).
    pub calls: u64,
    /// The latency of every call of the steady rounds, in ns.
    pub steady_latencies: Vec<u64>,
    /// The steady rounds' calls during which the worker was descheduled, and the longest
    /// of the others; `None` when the recorder could not tell (meta `descheduling`).
    pub descheduled: Option<Descheduled>,
}

/// The steady rounds' calls during which the worker was switched out (preempted or
/// blocked), and the longest call whose worker ran throughout: the allocator's own worst
/// case, apart from interrupts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Descheduled {
    pub calls: u64,
    pub max_running_ns: u64,
}

impl Descheduled {
    fn add(&mut self, e: &Event) {
        if e.descheduled {
            self.calls += 1;
        } else {
            self.max_running_ns = self.max_running_ns.max(e.latency_ns);
        }
    }

    /// Both runs' together.
    pub fn merge(self, o: Descheduled) -> Descheduled {
        Descheduled {
            calls: self.calls + o.calls,
            max_running_ns: self.max_running_ns.max(o.max_running_ns),
        }
    }
}

/// Where one worker is in its plan.
struct Follow {
    tid: u32,
    round: u32,
    /// Calls made in this round: its mallocs, then its frees.
    made: u64,
    /// The blocks of this round not yet freed, in allocation order.
    live: VecDeque<u64>,
    calls: u64,
}

impl Follow {
    fn done(&self, plan: &Plan) -> bool {
        self.round > plan.rounds + plan.steady
    }

    /// Checks the worker's next call against the plan. After its last round
    /// a thread may only free NULL (glibc does, twice, as the thread exits).
    fn next(&mut self, plan: &Plan, e: &Event, steady: &mut Steady) -> Result<()> {
        if self.done(plan) {
            ensure!(
                e.op == Op::Free && e.ptr == 0,
                "thread {} made a call after its last round: {:?} of size {} at {:#x}",
                self.tid,
                e.op,
                e.size,
                e.ptr
            );
            return Ok(());
        }
        let n = plan.blocks_in(self.round);
        let ok = if self.made < n {
            let ok = e.op == Op::Malloc && e.size == plan.size && e.ret != 0;
            self.live.push_back(e.ret);
            ok
        } else {
            e.op == Op::Free && self.live.pop_front() == Some(e.ptr)
        };
        if !ok {
            let want = if self.made < n {
                format!("malloc({})", plan.size)
            } else {
                "the free of the round's oldest live block".into()
            };
            bail!(
                "thread {}, call {} (round {}): the plan says {want}, the recorder saw {:?} of size {} at {:#x} returning {:#x}",
                self.tid,
                self.calls + 1,
                self.round,
                e.op,
                e.size,
                e.ptr,
                e.ret
            );
        }
        if plan.is_steady(self.round) {
            steady.latencies.push(e.latency_ns);
            steady.descheduled.add(e);
        }
        self.calls += 1;
        self.made += 1;
        if self.made == 2 * n {
            self.round += 1;
            self.made = 0;
        }
        Ok(())
    }
}

/// What the steady rounds' calls gave.
#[derive(Default)]
struct Steady {
    latencies: Vec<u64>,
    descheduled: Descheduled,
}

/// Reads the trace at `path` of a run of `plan` whose workers are the
/// threads `tids`; fails unless every worker made exactly the plan's calls.
/// Other threads' calls (the main thread's) are not the workload's.
pub fn check(path: &Path, plan: &Plan, tids: &[u32]) -> Result<Recorded> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut follow: HashMap<u32, Follow> = tids
        .iter()
        .map(|&tid| {
            let f = Follow {
                tid,
                round: 1,
                made: 0,
                live: VecDeque::new(),
                calls: 0,
            };
            (tid, f)
        })
        .collect();
    let mut steady = Steady::default();
    let mut told = false;
    let reader = Reader::new(std::io::BufReader::new(file))
        .with_context(|| format!("{}", path.display()))?;
    for r in reader {
        match r.with_context(|| format!("{}", path.display()))? {
            Record::Event(e) => {
                if let Some(f) = follow.get_mut(&e.thread) {
                    f.next(plan, &e, &mut steady)?;
                }
            }
            Record::Meta(k, v) if k == "descheduling" => told = v == "rseq",
            _ => {}
        }
    }
    let mut calls = 0;
    for &tid in tids {
        let f = &follow[&tid];
        ensure!(
            f.done(plan),
            "the recording of thread {tid} stops in round {} after {} calls of {}",
            f.round,
            f.calls,
            2 * plan.mallocs_per_thread()
        );
        calls += f.calls;
    }
    Ok(Recorded {
        calls,
        steady_latencies: steady.latencies,
        descheduled: told.then_some(steady.descheduled),
    })
}
