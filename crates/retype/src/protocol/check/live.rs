//! Livelock: a cycle of steps, fair to every channel, in which some
//! operation stays running forever.
//!
//! The search records the graph of classes ([`Graph`]). A task (an
//! operation) runs forever in a run that ends in a cycle exactly when the
//! cycle lies in its *task graph*: the pairs (class, task running there),
//! with the steps that keep that task running. The cycle is fair (weak
//! fairness of delivery) when every channel that holds a message in every
//! state of the cycle has a message delivered in it; starting operations
//! needs no fairness.
//!
//! A strongly connected component of the task graph holds a fair cycle
//! exactly when each channel is empty in one of its states or delivered by
//! one of its steps: a closed walk through every state and step of the
//! component is then fair, and a channel busy in all its states and never
//! delivered inside it is busy and undelivered on every cycle in it. So
//! Tarjan's algorithm over the task graph, one component at a time, finds a
//! livelock if there is one.

use std::collections::{HashMap, VecDeque};

use super::search::{Graph, GONE, NO_CHANNEL};

/// The components of the task graph that hold a fair cycle: each node of
/// one with the component's number.
pub struct Livelock<'g> {
    tasks: Tasks<'g>,
    members: HashMap<u32, u32>,
}

/// A fair cycle from and back to (class, task `name`), as steps of the
/// graph (indices into its steps).
pub struct Cycle {
    pub name: u8,
    pub steps: Vec<usize>,
}

/// The task graph: node `p` is (class `class[p]`, the `k`-th running task
/// of that class), numbered from `first[class]`.
struct Tasks<'g> {
    g: &'g Graph,
    first: Vec<u32>,
    class: Vec<u32>,
}

impl<'g> Tasks<'g> {
    fn new(g: &'g Graph) -> Tasks<'g> {
        let mut first = Vec::with_capacity(g.classes() + 1);
        let mut class = Vec::new();
        for (c, &r) in g.running.iter().enumerate() {
            first.push(class.len() as u32);
            class.extend(std::iter::repeat_n(c as u32, r.count_ones() as usize));
        }
        first.push(class.len() as u32);
        Tasks { g, first, class }
    }

    fn len(&self) -> usize {
        self.class.len()
    }

    /// The node of task `name` in class `c`.
    fn node(&self, c: u32, name: u8) -> u32 {
        let below = self.g.running[c as usize] & ((1u16 << name) - 1) as u8;
        self.first[c as usize] + below.count_ones()
    }

    /// The name of the task of node `p`.
    fn name(&self, p: u32) -> u8 {
        let c = self.class[p as usize];
        let mut bits = self.g.running[c as usize];
        for _ in 0..p - self.first[c as usize] {
            bits &= bits - 1;
        }
        bits.trailing_zeros() as u8
    }

    /// Where step `i` out of node `p`'s class takes its task, if it keeps
    /// it running.
    fn succ(&self, p: u32, i: usize) -> Option<u32> {
        let r = (self.g.keep[i] >> (4 * self.name(p) as u32)) & GONE;
        (r != GONE).then(|| self.node(self.g.to[i], r as u8))
    }
}

/// Tarjan's algorithm over the task graph, without recursion.
struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on: Vec<bool>,
    /// Nodes met whose component is not complete yet.
    stack: Vec<u32>,
    /// The depth-first path: each node with its next step to try.
    calls: Vec<(u32, usize)>,
    next: u32,
}

const UNSEEN: u32 = u32::MAX;

impl Tarjan {
    fn enter(&mut self, t: &Tasks, p: u32) {
        (self.index[p as usize], self.low[p as usize]) = (self.next, self.next);
        self.next += 1;
        self.on[p as usize] = true;
        self.stack.push(p);
        self.calls.push((p, t.g.steps(t.class[p as usize]).start));
    }
}

/// Every component of the task graph holding a fair cycle, in which a
/// task runs throughout, if the graph has one.
pub fn find(g: &Graph) -> Option<Livelock<'_>> {
    let t = Tasks::new(g);
    let n = t.len();
    let mut tj = Tarjan {
        index: vec![UNSEEN; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        calls: Vec::new(),
        next: 0,
    };
    let mut members = HashMap::new();
    let mut components = 0;
    for root in 0..n as u32 {
        if tj.index[root as usize] != UNSEEN {
            continue;
        }
        tj.enter(&t, root);
        while let Some(&(v, step)) = tj.calls.last() {
            let vi = v as usize;
            if step < g.steps(t.class[vi]).end {
                tj.calls.last_mut().expect("not empty").1 += 1;
                let Some(w) = t.succ(v, step) else { continue };
                if tj.index[w as usize] == UNSEEN {
                    tj.enter(&t, w);
                } else if tj.on[w as usize] {
                    tj.low[vi] = tj.low[vi].min(tj.index[w as usize]);
                }
                continue;
            }
            tj.calls.pop();
            if let Some(&(u, _)) = tj.calls.last() {
                tj.low[u as usize] = tj.low[u as usize].min(tj.low[vi]);
            }
            if tj.low[vi] != tj.index[vi] {
                continue;
            }
            // v is the root of a component: the stack from v up.
            let at = tj
                .stack
                .iter()
                .rposition(|&p| p == v)
                .expect("on the stack");
            let (on, index) = (&tj.on, &tj.index);
            let inside = |w: u32| on[w as usize] && index[w as usize] >= index[vi];
            if fair(&t, &tj.stack[at..], &inside) {
                members.extend(tj.stack[at..].iter().map(|&p| (p, components)));
                components += 1;
            }
            for p in tj.stack.drain(at..) {
                tj.on[p as usize] = false;
            }
        }
    }
    (components > 0).then_some(Livelock { tasks: t, members })
}

/// Whether the component `members` (`inside` tells its nodes) holds a
/// fair cycle.
fn fair(t: &Tasks, members: &[u32], inside: &dyn Fn(u32) -> bool) -> bool {
    let g = t.g;
    let mut always_busy = u64::MAX;
    let (mut delivered, mut cyclic) = (0u64, members.len() > 1);
    for &p in members {
        let c = t.class[p as usize];
        always_busy &= g.busy[c as usize];
        for i in g.steps(c) {
            if let Some(w) = t.succ(p, i).filter(|&w| inside(w)) {
                cyclic |= w == p;
                if g.channel[i] != NO_CHANNEL {
                    delivered |= 1 << g.channel[i];
                }
            }
        }
    }
    cyclic && always_busy & !delivered == 0
}

impl Livelock<'_> {
    /// The classes of the components.
    pub fn classes(&self) -> impl Iterator<Item = u32> + '_ {
        self.members.keys().map(|&p| self.tasks.class[p as usize])
    }

    /// The classes from the start to `c`, by the first way the search met
    /// each.
    pub fn path_to(&self, c: u32) -> Vec<u32> {
        let mut path = vec![c];
        while *path.last().unwrap() != 0 {
            path.push(self.tasks.g.parent[*path.last().unwrap() as usize]);
        }
        path.reverse();
        path
    }

    /// A fair cycle from and back to class `c` of a component: for each
    /// channel in turn not yet empty somewhere on the walk or delivered by
    /// it, the shortest way to a state where it is empty or to a step that
    /// delivers it; then the shortest way back, unless the walk is back.
    pub fn cycle(&self, c: u32) -> Cycle {
        let t = &self.tasks;
        let g = t.g;
        let (&v0, &k) = (self.members.iter())
            .find(|(&p, _)| t.class[p as usize] == c)
            .expect("a class of a component");
        let inside = |p: u32| self.members.get(&p) == Some(&k);
        let channels = 64 - g.busy.iter().fold(0u64, |a, &b| a | b).leading_zeros();
        let (mut at, mut steps) = (v0, Vec::new());
        let mut met = !g.busy[c as usize];
        for ch in 0..channels {
            if met & 1 << ch != 0 {
                continue;
            }
            let target = |p: u32, step: Option<usize>| {
                step.is_some_and(|i| g.channel[i] == ch as u8)
                    || g.busy[t.class[p as usize] as usize] & 1 << ch == 0
            };
            for i in shortest(t, at, &inside, &target) {
                (at, met) = walk(t, at, i, met);
                steps.push(i);
            }
        }
        if at != v0 || steps.is_empty() {
            let back = |p: u32, step: Option<usize>| step.is_some() && p == v0;
            for i in shortest(t, at, &inside, &back) {
                (at, _) = walk(t, at, i, met);
                steps.push(i);
            }
        }
        debug_assert_eq!(at, v0);
        Cycle {
            name: t.name(v0),
            steps,
        }
    }
}

/// Takes step `i` from node `p`: the node after it, and the channels met
/// (empty in a state passed, or delivered) with it.
fn walk(t: &Tasks, p: u32, i: usize, met: u64) -> (u32, u64) {
    let g = t.g;
    let w = t.succ(p, i).expect("a step of the task graph");
    let mut met = met | !g.busy[t.class[w as usize] as usize];
    if g.channel[i] != NO_CHANNEL {
        met |= 1 << g.channel[i];
    }
    (w, met)
}

/// The fewest steps inside the component from `from` to a node reached by
/// a step for which `target(node, Some(step))` holds, or `from` itself if
/// `target(from, None)` does.
fn shortest(
    t: &Tasks,
    from: u32,
    inside: &dyn Fn(u32) -> bool,
    target: &dyn Fn(u32, Option<usize>) -> bool,
) -> Vec<usize> {
    if target(from, None) {
        return Vec::new();
    }
    let mut came: HashMap<u32, (u32, usize)> = HashMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(p) = queue.pop_front() {
        for i in t.g.steps(t.class[p as usize]) {
            let Some(w) = t.succ(p, i).filter(|&w| inside(w)) else {
                continue;
            };
            if target(w, Some(i)) {
                let mut path = vec![i];
                let mut at = p;
                while at != from {
                    let (prev, step) = came[&at];
                    path.push(step);
                    at = prev;
                }
                path.reverse();
                return path;
            }
            if w != from && !came.contains_key(&w) {
                came.insert(w, (p, i));
                queue.push_back(w);
            }
        }
    }
    unreachable!("a component reaches each of its nodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph of `busy.len()` classes, each running task 0 (name 0), with
    /// `steps` (from, to, channel) that keep it running.
    fn graph(busy: &[u64], steps: &[(u32, u32, u8)]) -> Graph {
        let n = busy.len();
        let mut offsets = vec![0; n + 1];
        for &(from, _, _) in steps {
            offsets[from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut sorted = steps.to_vec();
        sorted.sort_by_key(|s| s.0);
        Graph {
            key: (0..n as u64).collect(),
            parent: vec![0; n],
            running: vec![1; n],
            busy: busy.to_vec(),
            offsets,
            to: sorted.iter().map(|s| s.1).collect(),
            keep: vec![!GONE; sorted.len()],
            channel: sorted.iter().map(|s| s.2).collect(),
        }
    }

    #[test]
    fn a_cycle_is_a_livelock_only_if_fair_to_every_channel() {
        const START: u8 = NO_CHANNEL;
        // 0 -> 1 -> 2 -> 1: channel 0 busy in 1 and 2, delivered 2 -> 1.
        let fair = graph(&[0, 1, 1], &[(0, 1, START), (1, 2, 1), (2, 1, 0)]);
        let l = find(&fair).expect("a fair cycle");
        let c = l.classes().min().unwrap();
        assert_eq!(c, 1);
        let cycle = l.cycle(c);
        assert_eq!(cycle.steps.len(), 2);
        // The same cycle without delivering channel 0, busy throughout.
        let unfair = graph(&[0, 1, 1], &[(0, 1, START), (1, 2, 1), (2, 1, START)]);
        assert!(find(&unfair).is_none());
        // Channel 0 empty in class 2: fair without delivering it.
        let empty = graph(&[0, 1, 0], &[(0, 1, START), (1, 2, 1), (2, 1, START)]);
        assert!(find(&empty).is_some());
        // No cycle at all; a step into class 1 alone is no cycle either.
        assert!(find(&graph(&[0, 0, 0], &[(0, 1, 0), (1, 2, 0)])).is_none());
        // A step onto itself that delivers the only busy channel.
        assert!(find(&graph(&[0, 1], &[(0, 1, START), (1, 1, 0)])).is_some());
    }

    #[test]
    fn a_task_that_finishes_on_the_cycle_is_no_livelock() {
        let mut g = graph(&[0, 0], &[(0, 1, 0), (1, 0, 0)]);
        assert!(find(&g).is_some());
        // The step 1 -> 0 finishes the task: it runs on no cycle.
        let back = g.steps(1).start;
        g.keep[back] = u32::MAX;
        assert!(find(&g).is_none());
        // It finishes, and another task (name 1) runs on: that one's cycle.
        g.running = vec![0b11, 0b11];
        g.keep = vec![0xffff_ff10, 0xffff_ff1f];
        let l = find(&g).expect("task 1 runs throughout");
        assert_eq!(l.cycle(0).name, 1);
    }
}
