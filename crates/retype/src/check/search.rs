//! The search: every state reachable from the model's start, depth first,
//! on several threads, keeping of each state seen only its 64-bit
//! fingerprint.
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
//! Threads share the set of fingerprints seen and a pool of states to
//! start from. A thread that runs dry waits at the pool; a busy one that
//! sees a waiter hands over its unexplored successor nearest the start
//! (the largest subtree), with the path to it. Every state whose
//! fingerprint is in the set is explored by the thread that put it there,
//! so the search is complete when every thread waits and the pool is empty.

use std::hash::{BuildHasherDefault, Hash};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use dashmap::DashSet;
use nohash_hasher::NoHashHasher;
use stateright::{Expectation, Model, Property};

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
}

/// A state to explore from, and the actions that lead to it.
struct Task<M: Model> {
    state: M::State,
    path: Vec<M::Action>,
}

/// A state on a thread's path, the action that led there, and the actions
/// from it not yet taken.
struct Frame<M: Model> {
    state: M::State,
    action: Option<M::Action>,
    actions: Vec<M::Action>,
}

type Seen = DashSet<u64, BuildHasherDefault<NoHashHasher<u64>>>;

struct Shared<'m, M: Model> {
    model: &'m M,
    properties: Vec<Property<M>>,
    /// States with the same key are the same state.
    key: &'m (dyn Fn(&M::State) -> u64 + Sync),
    seen: Seen,
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

/// Explores every state of `model` reachable from its start states on
/// `threads` threads, up to the first state that breaks one of its
/// properties (all must be `always`). Two states are the same when their
/// `key`s are: a fingerprint of the state, or of a representative of its
/// class under a sound symmetry. `progress` is told how far it has come
/// about every second.
pub fn search<M>(
    model: &M,
    threads: usize,
    key: &(dyn Fn(&M::State) -> u64 + Sync),
    progress: &Progress<'_>,
) -> Found<M::Action>
where
    M: Model + Sync,
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
        key,
        seen: Seen::default(),
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
    for state in model.init_states() {
        sh.states.fetch_add(1, Relaxed);
        if sh.seen.insert((sh.key)(&state)) {
            let task = Task {
                state,
                path: Vec::new(),
            };
            if sh.check(&task.state, Vec::new) {
                sh.pool.lock().unwrap().tasks.push(task);
            }
        }
    }
    let threads = threads.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| sh.work(threads));
        }
        s.spawn(|| sh.watch(progress));
    });
    Found {
        states: sh.states.into_inner(),
        distinct: sh.seen.len(),
        depth: sh.depth.into_inner(),
        broken: sh.broken.into_inner().unwrap(),
    }
}

impl<M> Shared<'_, M>
where
    M: Model,
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
    /// every thread waits with nothing left.
    fn work(&self, threads: usize) {
        while let Some(task) = self.take(threads) {
            self.explore(task);
        }
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
    fn explore(&self, task: Task<M>) {
        let mut stack = vec![self.frame(task.state, None)];
        while !self.stop.load(Relaxed) {
            let Some(top) = stack.last_mut() else {
                return;
            };
            let Some(a) = top.actions.pop() else {
                stack.pop();
                continue;
            };
            let from = &stack[stack.len() - 1].state;
            let Some(s) = self.visit(from, &a, || path(&task.path, &stack)) else {
                continue;
            };
            stack.push(self.frame(s, Some(a)));
            self.depth
                .fetch_max(task.path.len() + stack.len() - 1, Relaxed);
            if self.hungry.load(Relaxed) > 0 {
                self.share(&task.path, &mut stack);
            }
        }
    }

    fn frame(&self, state: M::State, action: Option<M::Action>) -> Frame<M> {
        let mut actions = Vec::new();
        self.model.actions(&state, &mut actions);
        Frame {
            state,
            action,
            actions,
        }
    }

    /// The successor of `from` by `a`, if it is new: counted, remembered
    /// and checked (`to_from` is the path to `from`, asked for only if a
    /// property is broken).
    fn visit(
        &self,
        from: &M::State,
        a: &M::Action,
        to_from: impl FnOnce() -> Vec<M::Action>,
    ) -> Option<M::State> {
        let s = self.model.next_state(from, a.clone())?;
        self.states.fetch_add(1, Relaxed);
        if !self.seen.insert((self.key)(&s)) {
            return None;
        }
        let path = || {
            let mut p = to_from();
            p.push(a.clone());
            p
        };
        self.check(&s, path).then_some(s)
    }

    /// Hands a new successor of the state nearest the start that has
    /// actions left (the largest subtree) to a waiting thread.
    fn share(&self, prefix: &[M::Action], stack: &mut [Frame<M>]) {
        if (self.hungry)
            .fetch_update(Relaxed, Relaxed, |h| h.checked_sub(1))
            .is_err()
        {
            return;
        }
        while let Some(i) = stack.iter().position(|f| !f.actions.is_empty()) {
            let a = stack[i].actions.remove(0);
            let mut path = path(prefix, &stack[..=i]);
            if let Some(state) = self.visit(&stack[i].state, &a, || path.clone()) {
                path.push(a);
                self.pool.lock().unwrap().tasks.push(Task { state, path });
                self.wake.notify_one();
                return;
            }
        }
        self.hungry.fetch_add(1, Relaxed);
    }
}

/// A state's 64-bit fingerprint: a fixed-seed hash, the same on every run.
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(value)
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
