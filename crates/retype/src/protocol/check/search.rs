//! The search: every state reachable from the model's start, depth first,
//! on several threads, keeping of each class of states seen only its
//! 64-bit key; and, for the check of livelock, the graph of those classes.
//!
//! Why not stateright's own checkers: its depth-first one keeps every
//! generated state that waits its turn together with the whole path to it
//! (a vector of action indices); our paths are thousands of steps deep, so
//! each waiting state costs tens of kilobytes and the thesis's
//! configuration ran out of 20 GB. Its breadth-first one keeps the whole
//! frontier. Here a thread keeps only the states on its own path, each
//! with the actions from it not yet taken; the path to a broken state is
//! that stack. The model is still a stateright `Model`, and the tests hold
//! this search to stateright's breadth-first checker.
//!
//! Threads share the map of keys seen (each with the class's number) and a
//! pool of states to start from. A thread that runs dry waits at the pool;
//! a busy one that sees a waiter hands over its unexplored successor
//! nearest the start (the largest subtree), with the path to it. Every
//! state whose key is in the map is explored by the thread that put it
//! there, so the search is complete when every thread waits and the pool is
//! empty.
//!
//! States with one key are one class: the same state, or states a
//! symmetry maps onto each other ([`Explore::canon`]); only the first one
//! met is explored. Every thread also logs each class it numbers (its
//! first parent, the tasks running, the busy channels) and each step
//! between classes that keeps a task running; [`Graph`] is what the logs
//! make, searched for livelock in `live`.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use nohash_hasher::NoHashHasher;
use stateright::{Expectation, Model, Property};

/// Most tasks (operation ids) a state names.
pub const TASKS: usize = 8;

/// A state's class: its key, and the name (rank) of each task id in it,
/// the same for every state of the class. Without a symmetry a task's
/// name is its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Canon {
    pub key: u64,
    pub rank: [u8; TASKS],
}

/// What the search asks of a model besides stateright's `Model`.
pub trait Explore: Model {
    /// The class of `s`.
    fn canon(&self, s: &Self::State) -> Canon;
    /// The ids of the tasks running in `s`, one bit each.
    fn running(&self, s: &Self::State) -> u8;
    /// The channels holding a message in `s`, one bit each.
    fn busy(&self, s: &Self::State) -> u64;
    /// The channel whose head message `a` delivers, if it delivers one.
    fn channel(&self, a: &Self::Action) -> Option<u8>;
}

/// A broken property and the actions that lead to a state that breaks it.
pub type Broken<A> = (&'static str, Vec<A>);

/// What a search found.
pub struct Found<A> {
    /// States generated, with repeats.
    pub states: usize,
    pub distinct: usize,
    /// The deepest state on a search path (depth first: longer than the
    /// shortest way there).
    pub depth: usize,
    /// The first property seen broken.
    pub broken: Option<Broken<A>>,
    /// The graph of classes, if no property is broken.
    pub graph: Option<Graph>,
}

/// A class met for the first time.
struct ClassLog {
    id: u32,
    key: u64,
    parent: u32,
    /// The names of its running tasks, one bit each.
    running: u8,
    busy: u64,
}

/// A step between classes that keeps a task running.
struct StepLog {
    from: u32,
    to: u32,
    keep: u32,
    channel: u8,
}

/// No channel: the step starts an operation.
pub const NO_CHANNEL: u8 = u8::MAX;
/// In a step's `keep`: the task is not running after it.
pub const GONE: u32 = 0xf;

/// What one thread logged.
#[derive(Default)]
struct Log {
    classes: Vec<ClassLog>,
    steps: Vec<StepLog>,
}

/// The graph of classes: class 0 is the start; each class has its key,
/// the class it was first met from, the names of its running tasks and
/// its busy channels (one bit each). Step `i` of class `c`,
/// `offsets[c] <= i < offsets[c + 1]`, goes to class `to[i]`; a task
/// named `r` before it is named `keep[i] >> 4r & 0xf` after it ([`GONE`]:
/// finished); it delivers a message of `channel[i]` ([`NO_CHANNEL`]: it
/// starts an operation). Steps that finish every running task are left
/// out, and so are starts refused on the spot, which change nothing.
pub struct Graph {
    pub key: Vec<u64>,
    pub parent: Vec<u32>,
    pub running: Vec<u8>,
    pub busy: Vec<u64>,
    pub offsets: Vec<usize>,
    pub to: Vec<u32>,
    pub keep: Vec<u32>,
    pub channel: Vec<u8>,
}

/// A state to explore from, and the actions that lead to it.
struct Task<M: Model> {
    state: M::State,
    class: Class,
    path: Vec<M::Action>,
}

/// What a frame remembers of its state's class.
#[derive(Clone, Copy)]
struct Class {
    id: u32,
    canon: Canon,
    running: u8,
}

/// A state on a thread's path, the action that led there, and the actions
/// from it not yet taken.
struct Frame<M: Model> {
    state: M::State,
    class: Class,
    action: Option<M::Action>,
    actions: Vec<M::Action>,
}

type Seen = DashMap<u64, u32, BuildHasherDefault<NoHashHasher<u64>>>;

struct Shared<'m, M: Model> {
    model: &'m M,
    properties: Vec<Property<M>>,
    seen: Seen,
    classes: AtomicU32,
    pool: Mutex<Pool<M>>,
    wake: Condvar,
    /// The search is over (for the progress reports).
    over: Condvar,
    /// Threads waiting at the pool that no busy thread has served yet.
    hungry: AtomicUsize,
    states: AtomicUsize,
    depth: AtomicUsize,
    stop: AtomicBool,
    broken: Mutex<Option<Broken<M::Action>>>,
}

struct Pool<M: Model> {
    tasks: Vec<Task<M>>,
    waiting: usize,
    done: bool,
}

/// How far a search has come: states generated, distinct, deepest path.
pub type Progress<'a> = dyn Fn(usize, usize, usize) + Sync + 'a;

/// Explores every state of `model` reachable from its start state on
/// `threads` threads, up to the first state that breaks one of its
/// properties (all must be `always`); if none is broken, also makes the
/// graph of classes. `progress` is told how far it has come about every second.
pub fn search<M>(model: &M, threads: usize, progress: &Progress<'_>) -> Found<M::Action>
where
    M: Explore + Sync,
    M::State: Hash + Send + Sync,
    M::Action: Clone + Send + Sync,
{
    let properties = model.properties();
    assert!(
        properties
            .iter()
            .all(|p| p.expectation == Expectation::Always),
        "the search checks `always` properties only"
    );
    let sh = Shared {
        model,
        properties,
        seen: Seen::default(),
        classes: AtomicU32::new(0),
        pool: Mutex::new(Pool {
            tasks: Vec::new(),
            waiting: 0,
            done: false,
        }),
        wake: Condvar::new(),
        over: Condvar::new(),
        hungry: AtomicUsize::new(0),
        states: AtomicUsize::new(0),
        depth: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        broken: Mutex::new(None),
    };
    let mut logs = vec![Log::default()];
    let [state] = <[_; 1]>::try_from(model.init_states()).unwrap_or_else(|_| {
        panic!("the search starts from one state");
    });
    sh.states.fetch_add(1, Relaxed);
    let (class, _) = sh.class(&state, 0, &mut logs[0]);
    if sh.check(&state, Vec::new) {
        let path = Vec::new();
        sh.pool
            .lock()
            .unwrap()
            .tasks
            .push(Task { state, class, path });
    }
    let threads = threads.max(1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads).map(|_| s.spawn(|| sh.work(threads))).collect();
        s.spawn(|| sh.watch(progress));
        logs.extend(workers.into_iter().map(|w| w.join().unwrap()));
    });
    let broken = sh.broken.into_inner().unwrap();
    let distinct = sh.seen.len();
    drop(sh.seen);
    let graph = broken.is_none().then(|| Graph::new(logs, distinct));
    Found {
        states: sh.states.into_inner(),
        distinct,
        depth: sh.depth.into_inner(),
        broken,
        graph,
    }
}

impl<M> Shared<'_, M>
where
    M: Explore,
    M::Action: Clone,
{
    /// Whether `s` keeps every property; if not, records the first broken
    /// one with the path `path()` and stops the search.
    fn check(&self, s: &M::State, path: impl FnOnce() -> Vec<M::Action>) -> bool {
        let Some(p) = self
            .properties
            .iter()
            .find(|p| !(p.condition)(self.model, s))
        else {
            return true;
        };
        let mut b = self.broken.lock().unwrap();
        if b.is_none() {
            *b = Some((p.name, path()));
        }
        self.stop.store(true, Relaxed);
        false
    }

    /// The class of `s`, met from class `parent`, and whether it is new
    /// (then numbered and logged).
    fn class(&self, s: &M::State, parent: u32, log: &mut Log) -> (Class, bool) {
        let canon = self.model.canon(s);
        let running = self.model.running(s);
        let (id, new) = match self.seen.entry(canon.key) {
            Entry::Occupied(e) => (*e.get(), false),
            Entry::Vacant(e) => {
                let id = self.classes.fetch_add(1, Relaxed);
                assert!(id < u32::MAX, "more classes than the graph can number");
                e.insert(id);
                (id, true)
            }
        };
        if new {
            log.classes.push(ClassLog {
                id,
                key: canon.key,
                parent,
                running: names(running, &canon),
                busy: self.model.busy(s),
            });
        }
        let class = Class { id, canon, running };
        (class, new)
    }

    /// Tells `progress` how far the search is, until it is over.
    fn watch(&self, progress: &Progress<'_>) {
        let mut pool = self.pool.lock().unwrap();
        while !pool.done {
            let (p, _) = self
                .over
                .wait_timeout(pool, Duration::from_secs(1))
                .unwrap();
            pool = p;
            let (states, distinct) = (self.states.load(Relaxed), self.seen.len());
            progress(states, distinct, self.depth.load(Relaxed));
        }
    }

    /// One thread: take a task from the pool, explore all below it, until
    /// every thread waits with nothing left. Returns what it logged.
    fn work(&self, threads: usize) -> Log {
        let mut log = Log::default();
        while let Some(task) = self.take(threads) {
            self.explore(task, &mut log);
        }
        log
    }

    /// The next task, or `None` when the search is over: stopped, or every
    /// thread waiting with the pool empty.
    fn take(&self, threads: usize) -> Option<Task<M>> {
        let mut pool = self.pool.lock().unwrap();
        while !self.stop.load(Relaxed) && !pool.done {
            if let Some(t) = pool.tasks.pop() {
                return Some(t);
            }
            if pool.waiting + 1 == threads {
                break;
            }
            pool.waiting += 1;
            self.hungry.fetch_add(1, Relaxed);
            pool = self.wake.wait(pool).unwrap();
            pool.waiting -= 1;
        }
        pool.done = true;
        self.wake.notify_all();
        self.over.notify_all();
        None
    }

    /// Depth first below `task`.
    fn explore(&self, task: Task<M>, log: &mut Log) {
        let mut stack = vec![self.frame(task.state, task.class, None)];
        while !self.stop.load(Relaxed) {
            let Some(top) = stack.last_mut() else {
                return;
            };
            let Some(a) = top.actions.pop() else {
                stack.pop();
                continue;
            };
            let from = &stack[stack.len() - 1];
            let Some((s, class)) = self.visit(from, &a, || path(&task.path, &stack), log) else {
                continue;
            };
            stack.push(self.frame(s, class, Some(a)));
            self.depth
                .fetch_max(task.path.len() + stack.len() - 1, Relaxed);
            if self.hungry.load(Relaxed) > 0 {
                self.share(&task.path, &mut stack, log);
            }
        }
    }

    fn frame(&self, state: M::State, class: Class, action: Option<M::Action>) -> Frame<M> {
        let mut actions = Vec::new();
        self.model.actions(&state, &mut actions);
        Frame {
            state,
            class,
            action,
            actions,
        }
    }

    /// The successor of `from` by `a`, if its class is new: counted,
    /// numbered and checked (`to_from` is the path to `from`, asked for only
    /// if a property is broken). The step is logged either way.
    fn visit(
        &self,
        from: &Frame<M>,
        a: &M::Action,
        to_from: impl FnOnce() -> Vec<M::Action>,
        log: &mut Log,
    ) -> Option<(M::State, Class)> {
        let s = self.model.next_state(&from.state, a.clone())?;
        self.states.fetch_add(1, Relaxed);
        let (class, new) = self.class(&s, from.class.id, log);
        self.log_step(&from.class, &class, self.model.channel(a), log);
        if !new {
            return None;
        }
        let path = || {
            let mut p = to_from();
            p.push(a.clone());
            p
        };
        self.check(&s, path).then_some((s, class))
    }

    /// Logs the step from class `from` to class `to` if a task runs on
    /// through it; not a start refused on the spot (the same state again).
    fn log_step(&self, from: &Class, to: &Class, channel: Option<u8>, log: &mut Log) {
        let mut keep = u32::MAX;
        for t in (0..TASKS).filter(|&t| from.running & to.running & 1 << t != 0) {
            let r = from.canon.rank[t] as u32 * 4;
            keep = (keep & !(GONE << r)) | ((to.canon.rank[t] as u32) << r);
        }
        let refused = channel.is_none() && from.id == to.id;
        if keep != u32::MAX && !refused {
            log.steps.push(StepLog {
                from: from.id,
                to: to.id,
                keep,
                channel: channel.unwrap_or(NO_CHANNEL),
            });
        }
    }

    /// Hands a new successor of the state nearest the start that has
    /// actions left (the largest subtree) to a waiting thread.
    fn share(&self, prefix: &[M::Action], stack: &mut [Frame<M>], log: &mut Log) {
        if (self.hungry)
            .fetch_update(Relaxed, Relaxed, |h| h.checked_sub(1))
            .is_err()
        {
            return;
        }
        while let Some(i) = stack.iter().position(|f| !f.actions.is_empty()) {
            let a = stack[i].actions.remove(0);
            let mut path = path(prefix, &stack[..=i]);
            if let Some((state, class)) = self.visit(&stack[i], &a, || path.clone(), log) {
                path.push(a);
                let task = Task { state, class, path };
                self.pool.lock().unwrap().tasks.push(task);
                self.wake.notify_one();
                return;
            }
        }
        self.hungry.fetch_add(1, Relaxed);
    }
}

/// The names of the tasks in `ids` (one bit each), one bit each.
fn names(ids: u8, canon: &Canon) -> u8 {
    (0..TASKS)
        .filter(|&t| ids & 1 << t != 0)
        .fold(0, |m, t| m | 1 << canon.rank[t])
}

impl Graph {
    /// The graph the threads' logs make, of `n` classes; each log is
    /// freed as soon as it is read.
    fn new(logs: Vec<Log>, n: usize) -> Graph {
        let mut g = Graph {
            key: vec![0; n],
            parent: vec![0; n],
            running: vec![0; n],
            busy: vec![0; n],
            offsets: vec![0; n + 1],
            to: Vec::new(),
            keep: Vec::new(),
            channel: Vec::new(),
        };
        let mut stepped = Vec::with_capacity(logs.len());
        for log in logs {
            for c in log.classes {
                let i = c.id as usize;
                (g.key[i], g.parent[i]) = (c.key, c.parent);
                (g.running[i], g.busy[i]) = (c.running, c.busy);
            }
            for s in &log.steps {
                g.offsets[s.from as usize + 1] += 1;
            }
            stepped.push(log.steps);
        }
        for i in 0..n {
            g.offsets[i + 1] += g.offsets[i];
        }
        let mut next = g.offsets.clone();
        let steps = g.offsets[n];
        (g.to, g.keep, g.channel) = (vec![0; steps], vec![0; steps], vec![0; steps]);
        for log in stepped {
            for s in log {
                let i = &mut next[s.from as usize];
                (g.to[*i], g.keep[*i], g.channel[*i]) = (s.to, s.keep, s.channel);
                *i += 1;
            }
        }
        g
    }

    pub fn classes(&self) -> usize {
        self.running.len()
    }

    /// The steps out of class `c`.
    pub fn steps(&self, c: u32) -> std::ops::Range<usize> {
        self.offsets[c as usize]..self.offsets[c as usize + 1]
    }
}

/// The fewest actions from the start to a state for which `target` holds,
/// breadth first over classes (a class's first state stands for it, as in
/// the search), if one is met among the first `limit` classes. Used after
/// the depth-first search has found something, whose path there is
/// usually far longer.
pub fn shortest<M>(
    model: &M,
    target: impl Fn(&M::State) -> bool,
    limit: usize,
) -> Option<Vec<M::Action>>
where
    M: Explore,
    M::Action: Clone,
{
    let [init] = <[_; 1]>::try_from(model.init_states()).ok()?;
    let start = model.canon(&init).key;
    // Each class met: the class it was met from, and the action.
    let mut came: HashMap<u64, Option<(u64, M::Action)>> = HashMap::from([(start, None)]);
    let mut queue = VecDeque::from([(start, init)]);
    let mut actions = Vec::new();
    while let Some((key, s)) = queue.pop_front() {
        if target(&s) {
            let mut path = Vec::new();
            let mut at = key;
            while let Some((from, a)) = came[&at].clone() {
                path.push(a);
                at = from;
            }
            path.reverse();
            return Some(path);
        }
        actions.clear();
        model.actions(&s, &mut actions);
        for a in actions.drain(..) {
            let Some(t) = model.next_state(&s, a.clone()) else {
                continue;
            };
            let k = model.canon(&t).key;
            if came.len() < limit && !came.contains_key(&k) {
                came.insert(k, Some((key, a)));
                queue.push_back((k, t));
            }
        }
    }
    None
}

/// A state's 64-bit fingerprint: a fixed-seed hash, the same on every run.
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    hasher().hash_one(value)
}

/// The fixed-seed hasher of fingerprints.
pub fn hasher() -> ahash::RandomState {
    ahash::RandomState::with_seeds(1, 2, 3, 4)
}

/// The actions from the start to the top of `stack`, below a task that
/// began at `prefix`.
fn path<M: Model>(prefix: &[M::Action], stack: &[Frame<M>]) -> Vec<M::Action>
where
    M::Action: Clone,
{
    let mut p = prefix.to_vec();
    p.extend(stack.iter().filter_map(|f| f.action.clone()));
    p
}
