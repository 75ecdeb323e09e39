//! What a worker keeps, bounded: a top-N heap, a Pareto set, the fastest plan per device
//! count, counts, the reasons plans were refused, and the layer cache of the fast path.
//! Workers merge their accumulators at the end; the result does not depend on the split.

use super::results::{Counts, PlanKey};
use perfcast_engine::training::LayerCache;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

/// A scored plan.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub(super) objective: f64,
    pub(super) time: f64,
    pub(super) memory: f64,
    pub(super) key: PlanKey,
}

impl PartialEq for Scored {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    fn cmp(&self, o: &Self) -> Ordering {
        self.objective
            .total_cmp(&o.objective)
            .then_with(|| self.key.cmp(&o.key))
    }
}

/// Non-dominated (time, memory) points, sorted by memory ascending (time strictly
/// descending). Ties (same time and memory) keep the smallest key.
#[derive(Debug, Clone, Default)]
pub(super) struct Pareto {
    pub(super) pts: Vec<Scored>,
}

impl Pareto {
    /// Some point has time < `t` and memory <= `m`.
    pub(super) fn dominates_bound(&self, t: f64, m: f64) -> bool {
        // Points with memory <= m are a prefix; the last one has the least time.
        let n = self.pts.partition_point(|p| p.memory <= m);
        n > 0 && self.pts[n - 1].time < t
    }
    pub(super) fn insert(&mut self, s: Scored) {
        let dominated = |a: &Scored, b: &Scored| {
            // a dominates b (or equals it with a smaller key)
            a.time <= b.time
                && a.memory <= b.memory
                && (a.time < b.time || a.memory < b.memory || a.key < b.key)
        };
        if self.pts.iter().any(|p| dominated(p, &s)) {
            return;
        }
        self.pts.retain(|p| !dominated(&s, p));
        let at = self.pts.partition_point(|p| {
            p.memory
                .total_cmp(&s.memory)
                .then(p.key.cmp(&s.key))
                .is_lt()
        });
        self.pts.insert(at, s);
    }
    fn merge(mut self, o: Pareto) -> Pareto {
        for p in o.pts {
            self.insert(p);
        }
        self
    }
}

/// What a worker keeps: bounded.
pub(super) struct Acc {
    pub(super) top: BinaryHeap<Scored>,
    pub(super) pareto: Pareto,
    pub(super) counts: Counts,
    /// Why plans were refused: the first message per key, and how many.
    pub(super) invalid: BTreeMap<perfcast_core::Key, (u64, String)>,
    /// Smallest peak memory seen (bytes), fitting or not.
    pub(super) min_memory: f64,
    /// Fastest plan per device count (the front of time vs GPU count).
    pub(super) fastest: BTreeMap<u32, Scored>,
    pub(super) cache: LayerCache,
    /// Plans visited (enumerated before the partial counts beyond a stage are dropped).
    pub(super) visited: u64,
    /// Outer tuples (index into the walked list) the deadline cut short, with how many of
    /// their plans were left.
    pub(super) unvisited: Vec<(usize, u64)>,
}

impl Acc {
    pub(super) fn new() -> Self {
        Acc {
            top: BinaryHeap::new(),
            pareto: Pareto::default(),
            counts: Counts::default(),
            invalid: BTreeMap::new(),
            min_memory: f64::INFINITY,
            fastest: BTreeMap::new(),
            cache: LayerCache::new(),
            visited: 0,
            unvisited: Vec::new(),
        }
    }
    pub(super) fn merge(mut self, o: Acc, n: usize) -> Acc {
        for s in o.top {
            push_top(&mut self.top, s, n);
        }
        self.pareto = self.pareto.merge(o.pareto);
        self.counts.add(&o.counts);
        for (k, (c, m)) in o.invalid {
            let e = self.invalid.entry(k).or_insert((0, m));
            e.0 += c;
        }
        self.min_memory = self.min_memory.min(o.min_memory);
        self.visited += o.visited;
        self.unvisited.extend(o.unvisited);
        for (_, s) in o.fastest {
            self.offer_fastest(s);
        }
        self
    }
    pub(super) fn offer_fastest(&mut self, s: Scored) {
        let e = self.fastest.entry(s.key.devices).or_insert(s);
        if (s.time, s.key) < (e.time, e.key) {
            *e = s;
        }
    }
    pub(super) fn refuse(&mut self, e: &perfcast_core::ModelError, plans: u64) {
        self.counts.pruned_invalid += plans;
        self.counts.pruned += plans;
        const OTHER: perfcast_core::Key = perfcast_core::Key::other("model");
        let key = match e {
            perfcast_core::ModelError::Invalid { key, .. } => key,
            _ => &OTHER,
        };
        match self.invalid.get_mut(key) {
            Some(entry) => entry.0 += plans,
            None => {
                self.invalid.insert(key.clone(), (plans, e.to_string()));
            }
        }
    }
}

/// Keep `s` if it is among the `n` best of `top` (a max-heap: its top is the worst kept).
pub(super) fn push_top(top: &mut BinaryHeap<Scored>, s: Scored, n: usize) {
    if top.len() < n {
        top.push(s);
    } else if let Some(worst) = top.peek() {
        if s < *worst {
            top.pop();
            top.push(s);
        }
    }
}
