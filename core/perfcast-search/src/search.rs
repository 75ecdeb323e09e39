//! The search: enumerate plan groups (every dimension but recompute and schedule), walk them
//! in parallel, evaluate each group's variants on the engine's fast path, keep a bounded
//! top-N heap and a Pareto set per worker, merge, and run the full `evaluate` for the
//! finalists only.

use crate::space::{Constraints, Objective, SearchSpace};
use crate::SearchError;
use perfcast_core::parallel::interleaving_degrees;
use perfcast_core::{DType, Engine};
use perfcast_engine::training::{
    LayerCache, Placement, PlanGroup, Training, TrainingPlan, TrainingReport,
};
use rayon::prelude::*;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Instant;

/// A plan in compact form (indices into the space's lists); its derived order is the
/// tie-break of equal objectives, so output order never depends on thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PlanKey {
    pub devices: u32,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub vpp: u32,
    pub micro_batch: u32,
    pub sp: bool,
    pub zero_stage: u8,
    pub precision: u8,
    pub tp_comm_overlap: bool,
    pub overlap_grad_reduce: bool,
    pub overlap_param_gather: bool,
    /// Index into the training's recompute policies.
    pub recompute: u8,
    /// Partial full recompute: layers per stage (0 = policy default).
    pub recompute_layers: u32,
    /// Index into the training's schedules.
    pub schedule: u8,
    /// Index into `Placement::all()` (0: Megatron's TP, CP, PP, DP).
    pub placement: u8,
}

/// Most plans one search reports (each is fully evaluated and printed).
const MAX_TOP: usize = 10_000;

/// Distinct pipeline schedules one search may walk.
const MAX_SCHEDULES: usize = 16;

const PRECISIONS: [DType; 3] = [DType::Bf16, DType::Fp16, DType::Fp8];

fn precision_code(d: DType) -> Option<u8> {
    PRECISIONS.iter().position(|p| *p == d).map(|i| i as u8)
}

/// A scored plan.
#[derive(Debug, Clone, Copy)]
struct Scored {
    objective: f64,
    time: f64,
    memory: f64,
    key: PlanKey,
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
struct Pareto {
    pts: Vec<Scored>,
}

impl Pareto {
    /// Some point has time < `t` and memory <= `m`.
    fn dominates_bound(&self, t: f64, m: f64) -> bool {
        // Points with memory <= m are a prefix; the last one has the least time.
        let n = self.pts.partition_point(|p| p.memory <= m);
        n > 0 && self.pts[n - 1].time < t
    }
    fn insert(&mut self, s: Scored) {
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

/// Counts of a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Plans generated from the space (tp x pp x dp x cp = devices, redundant switches folded).
    pub enumerated: u64,
    /// Discarded before timing: `pruned_invalid + pruned_memory + pruned_bound`.
    pub pruned: u64,
    /// Refused by the engine's checks (divisibility, schedule rules).
    pub pruned_invalid: u64,
    /// Over the memory limit.
    pub pruned_memory: u64,
    /// A lower bound on their time proved they cannot enter the top N nor the Pareto front.
    pub pruned_bound: u64,
    /// Timed on the fast path.
    pub evaluated: u64,
    /// Plan groups (plans sharing everything but recompute and schedule).
    pub groups: u64,
    /// Distinct layer shapes whose op programs were timed.
    pub layer_programs: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.enumerated += o.enumerated;
        self.pruned += o.pruned;
        self.pruned_invalid += o.pruned_invalid;
        self.pruned_memory += o.pruned_memory;
        self.pruned_bound += o.pruned_bound;
        self.evaluated += o.evaluated;
        self.groups += o.groups;
        self.layer_programs += o.layer_programs;
    }
}

/// What a worker keeps: bounded.
struct Acc {
    top: BinaryHeap<Scored>,
    pareto: Pareto,
    counts: Counts,
    /// Why plans were refused: the first message per key, and how many.
    invalid: BTreeMap<perfcast_core::Key, (u64, String)>,
    /// Smallest peak memory seen (bytes), fitting or not.
    min_memory: f64,
    /// Fastest plan per device count (the front of time vs GPU count).
    fastest: BTreeMap<u32, Scored>,
    cache: LayerCache,
}

impl Acc {
    fn new() -> Self {
        Acc {
            top: BinaryHeap::new(),
            pareto: Pareto::default(),
            counts: Counts::default(),
            invalid: BTreeMap::new(),
            min_memory: f64::INFINITY,
            fastest: BTreeMap::new(),
            cache: LayerCache::new(),
        }
    }
    fn merge(mut self, o: Acc, n: usize) -> Acc {
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
        for (_, s) in o.fastest {
            self.offer_fastest(s);
        }
        self
    }
    fn offer_fastest(&mut self, s: Scored) {
        let e = self.fastest.entry(s.key.devices).or_insert(s);
        if (s.time, s.key) < (e.time, e.key) {
            *e = s;
        }
    }
    fn refuse(&mut self, e: &perfcast_core::ModelError, plans: u64) {
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

fn push_top(top: &mut BinaryHeap<Scored>, s: Scored, n: usize) {
    if top.len() < n {
        top.push(s);
    } else if let Some(worst) = top.peek() {
        if s < *worst {
            top.pop();
            top.push(s);
        }
    }
}

/// One plan of the result, with its full report.
#[derive(Debug, Clone, Serialize)]
pub struct RankedPlan {
    pub rank: usize,
    pub objective: f64,
    pub plan: TrainingPlan,
    /// Order of the mesh axes on the devices, innermost first (`tp-cp-pp-dp`).
    pub placement: String,
    pub report: TrainingReport,
}

/// One point of a Pareto front.
#[derive(Debug, Clone, Serialize)]
pub struct ParetoPoint {
    pub devices: u32,
    pub time_s: f64,
    pub memory_gib: f64,
    pub plan: TrainingPlan,
    pub placement: String,
}

/// Counts and time of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub enumerated: u64,
    pub pruned: u64,
    pub evaluated: u64,
    pub seconds: f64,
    pub pruned_invalid: u64,
    pub pruned_memory: u64,
    pub pruned_bound: u64,
    pub groups: u64,
    pub layer_programs: u64,
    /// Plans enumerated per second (`enumerated / seconds`).
    pub plans_per_s: f64,
    /// Plans timed on the fast path per second.
    pub evaluations_per_s: f64,
    pub objective: Objective,
    pub threads: usize,
}

/// What a search returns.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// The top N by the objective (ties by plan key), each fully evaluated.
    pub plans: Vec<RankedPlan>,
    /// Non-dominated plans by (step time, peak memory per device), memory ascending.
    pub pareto: Vec<ParetoPoint>,
    /// With several device counts: the fastest plan per count, kept when no smaller count is
    /// as fast (the front of time vs GPU count).
    pub pareto_devices: Vec<ParetoPoint>,
    /// The fastest plan of every device count searched.
    pub fastest: Vec<ParetoPoint>,
    pub summary: Summary,
}

/// The outer tuple a worker takes: everything but the switches walked inside.
#[derive(Debug, Clone, Copy)]
struct Outer {
    t: usize,
    devices: u32,
    tp: u32,
    pp: u32,
    dp: u32,
    cp: u32,
}

/// The resolved lists of a space for one training.
struct Lists {
    vpp: Option<Vec<u32>>,
    micro_batch: Option<Vec<u32>>,
    sp: Vec<bool>,
    recompute: Vec<u8>,
    full: Option<u8>,
    partial: bool,
    zero: Vec<u8>,
    /// (schedule index, interleaved)
    schedules: Vec<(u8, bool)>,
    precision: Vec<DType>,
    tpo: Vec<bool>,
    ogr: Vec<bool>,
    opg: Vec<bool>,
    /// Indices into `Placement::all()`.
    placements: Vec<u8>,
}

fn divisors(n: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=n)
        .take_while(|d| d * d <= n)
        .filter(|d| n.is_multiple_of(*d))
        .flat_map(|d| [d, n / d])
        .filter_map(|d| u32::try_from(d).ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn resolve_lists(training: &Training, space: &SearchSpace) -> Result<Lists, SearchError> {
    let rnames = training.recompute_names();
    let snames = training.schedule_names();
    let pick = |names: &[&str], list: &[String], key: &str| -> Result<Vec<u8>, SearchError> {
        list.iter()
            .map(|n| {
                names
                    .iter()
                    .position(|x| x == n)
                    .map(|i| i as u8)
                    .ok_or_else(|| SearchError::Invalid {
                        key: key.into(),
                        message: format!(
                            "`{n}` is not registered; registered: {}",
                            names.join(", ")
                        ),
                    })
            })
            .collect()
    };
    let recompute = match &space.recompute {
        Some(l) => pick(&rnames, l, "search.recompute")?,
        None => (0..rnames.len() as u8).collect(),
    };
    let full = rnames.iter().position(|n| *n == "full").map(|i| i as u8);
    let default_sched = vec!["1f1b".to_string(), "interleaved-1f1b".to_string()];
    let slist = space.schedule.as_ref().unwrap_or(&default_sched);
    let mut sidx = pick(&snames, slist, "search.schedule")?;
    sidx.sort_unstable();
    sidx.dedup();
    if sidx.len() > MAX_SCHEDULES {
        return Err(SearchError::Invalid {
            key: "search.schedule".into(),
            message: format!("at most {MAX_SCHEDULES} schedules per search"),
        });
    }
    let schedules = sidx
        .into_iter()
        .map(|i| (i, snames[i as usize].contains("interleaved")))
        .collect();
    let unit = training.system().compute.as_ref();
    let precision = match &space.precision {
        Some(l) => {
            for d in l {
                if precision_code(*d).is_none() {
                    return Err(SearchError::Invalid {
                        key: "search.precision".into(),
                        message: format!(
                            "`{}` is not a training precision; allowed: bf16, fp16, fp8",
                            d.name()
                        ),
                    });
                }
            }
            l.clone()
        }
        None => [DType::Bf16, DType::Fp8]
            .into_iter()
            .filter(|d| unit.peak(Engine::Matrix, *d).is_some())
            .collect(),
    };
    let all = Placement::all();
    let placements = match &space.placement {
        None => (0..all.len() as u8).collect(),
        Some(list) => {
            let mut v = Vec::with_capacity(list.len());
            for name in list {
                let p = Placement::parse(name).map_err(|e| SearchError::Invalid {
                    key: "search.placement".into(),
                    message: e.to_string(),
                })?;
                let i = all.iter().position(|a| *a == p).unwrap_or(0) as u8;
                if !v.contains(&i) {
                    v.push(i);
                }
            }
            v
        }
    };
    if let Some(z) = space
        .zero_stage
        .as_ref()
        .and_then(|z| z.iter().find(|s| **s > 3))
    {
        return Err(SearchError::Invalid {
            key: "search.zero_stage".into(),
            message: format!("{z} is not a ZeRO stage; allowed: 0, 1, 2, 3"),
        });
    }
    Ok(Lists {
        vpp: space.vpp.clone(),
        micro_batch: space.micro_batch.clone(),
        sp: space.sp.clone().unwrap_or(vec![false, true]),
        recompute,
        full,
        partial: space.partial_recompute.unwrap_or(true),
        zero: space.zero_stage.clone().unwrap_or(vec![0, 1, 2, 3]),
        schedules,
        precision,
        tpo: space.tp_comm_overlap.clone().unwrap_or(vec![false, true]),
        ogr: space.overlap_grad_reduce.clone().unwrap_or(vec![true]),
        opg: space.overlap_param_gather.clone().unwrap_or(vec![true]),
        placements,
    })
}

fn check_list(key: &str, list: &Option<Vec<u32>>) -> Result<(), SearchError> {
    if let Some(l) = list {
        if l.contains(&0) {
            return Err(SearchError::Invalid {
                key: key.into(),
                message: "values must be positive integers".into(),
            });
        }
    }
    Ok(())
}

/// Shared, read-only state of one search.
struct Ctx<'a> {
    trainings: &'a [Training],
    lists: Vec<Lists>,
    template: &'a TrainingPlan,
    constraints: &'a Constraints,
    objective: Objective,
    top_n: usize,
    /// f64 bits of the best known N-th objective (an upper bound on the final N-th best).
    threshold: AtomicU64,
}

impl Ctx<'_> {
    fn threshold(&self) -> f64 {
        f64::from_bits(self.threshold.load(AtomicOrdering::Relaxed))
    }
    fn offer_threshold(&self, v: f64) {
        let mut cur = self.threshold.load(AtomicOrdering::Relaxed);
        while v < f64::from_bits(cur) {
            match self.threshold.compare_exchange_weak(
                cur,
                v.to_bits(),
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
    }
}

/// Variants of one group: (recompute index, layers, schedule index).
fn variants(l: &Lists, pp: u32, vpp: u32, max_stage_layers: u64, out: &mut Vec<(u8, u32, u8)>) {
    out.clear();
    let scheds: Vec<u8> = if pp == 1 {
        // The schedule does not matter on one stage: the first non-interleaved one.
        l.schedules
            .iter()
            .find(|s| !s.1)
            .or(l.schedules.first())
            .map(|s| vec![s.0])
            .unwrap_or_default()
    } else {
        l.schedules
            .iter()
            .filter(|s| s.1 == (vpp > 1))
            .map(|s| s.0)
            .collect()
    };
    for &s in &scheds {
        for &r in &l.recompute {
            out.push((r, 0, s));
            if l.partial && Some(r) == l.full {
                let n = max_stage_layers.min(u32::MAX as u64) as u32;
                for k in 1..n {
                    out.push((r, k, s));
                }
            }
        }
    }
}

fn placement_of(k: &PlanKey) -> Placement {
    Placement::all()
        .get(k.placement as usize)
        .copied()
        .unwrap_or_default()
}

fn plan_of(template: &TrainingPlan, training: &Training, k: &PlanKey) -> TrainingPlan {
    let rnames = training.recompute_names();
    let snames = training.schedule_names();
    TrainingPlan {
        tp: k.tp,
        pp: k.pp,
        dp: k.dp,
        cp: k.cp,
        vpp: k.vpp,
        sp: k.sp,
        zero_stage: k.zero_stage,
        micro_batch: k.micro_batch,
        recompute: rnames[k.recompute as usize].to_string(),
        recompute_layers: (k.recompute_layers > 0).then_some(k.recompute_layers),
        schedule: Some(snames[k.schedule as usize].to_string()),
        precision: PRECISIONS[k.precision as usize],
        tp_comm_overlap: k.tp_comm_overlap,
        overlap_grad_reduce: k.overlap_grad_reduce,
        overlap_param_gather: k.overlap_param_gather,
        ..template.clone()
    }
}

impl Ctx<'_> {
    fn objective_of(&self, time: f64, memory: f64, devices: u32) -> f64 {
        match self.objective {
            Objective::Time => time,
            Objective::Memory => memory,
            Objective::Cost => time * devices as f64,
        }
    }

    /// Walk every group of one outer tuple.
    fn walk(&self, o: Outer, acc: &mut Acc) {
        let training = &self.trainings[o.t];
        let l = &self.lists[o.t];
        let m = training.model();
        let gb = self.constraints.global_batch;
        let limit = training.capacity().0 * (1.0 - self.constraints.memory_headroom);
        let vpps: Vec<u32> = match &l.vpp {
            Some(v) => v.iter().copied().filter(|v| o.pp > 1 || *v == 1).collect(),
            None => interleaving_degrees(m.layers, o.pp),
        };
        let mbs: Vec<u32> = match &l.micro_batch {
            Some(v) => v.clone(),
            None => {
                if gb.is_multiple_of(o.dp) {
                    divisors((gb / o.dp) as u64)
                        .into_iter()
                        .filter(|b| *b <= self.constraints.max_micro_batch)
                        .collect()
                } else {
                    vec![1]
                }
            }
        };
        let sps: &[bool] = if o.tp > 1 { &l.sp } else { &[false] };
        let tpos: &[bool] = if o.tp > 1 { &l.tpo } else { &[false] };
        let zeros: &[u8] = if o.dp * o.cp > 1 { &l.zero } else { &[0] };
        let mut var = Vec::with_capacity(128);
        // Placements that place this mesh differently (same order of the non-trivial axes
        // = same placement of every group).
        let all = Placement::all();
        let mut places: Vec<u8> = Vec::with_capacity(l.placements.len());
        let mut seen = Vec::with_capacity(l.placements.len());
        for &i in &l.placements {
            let e = all[i as usize].effective(o.tp, o.cp, o.pp, o.dp);
            if !seen.contains(&e) {
                seen.push(e);
                places.push(i);
            }
        }
        let mut plan = TrainingPlan {
            tp: o.tp,
            pp: o.pp,
            dp: o.dp,
            cp: o.cp,
            global_batch: gb,
            ..self.template.clone()
        };
        for &vpp in &vpps {
            // Layers of the busiest stage (for the partial-recompute counts), even if the
            // split turns out invalid.
            let chunks = o.pp as u64 * vpp as u64;
            let stage_n = vpp as u64 * m.layers.div_ceil(chunks.max(1));
            variants(l, o.pp, vpp, stage_n, &mut var);
            if var.is_empty() {
                continue; // no schedule listed for this interleaving: no plan
            }
            let nv = var.len() as u64;
            for &mb in &mbs {
                for &sp in sps {
                    for &zero in zeros {
                        for &prec in &l.precision {
                            for &tpo in tpos {
                                let ogrs: &[bool] = if o.dp * o.cp > 1 {
                                    &l.ogr
                                } else {
                                    std::slice::from_ref(&self.template.overlap_grad_reduce)
                                };
                                let opgs: &[bool] = if o.dp * o.cp > 1 && (1..=2).contains(&zero) {
                                    &l.opg
                                } else {
                                    std::slice::from_ref(&self.template.overlap_param_gather)
                                };
                                for &ogr in ogrs {
                                    for &opg in opgs {
                                        acc.counts.enumerated += nv * places.len() as u64;
                                        acc.counts.groups += 1;
                                        plan.vpp = vpp;
                                        plan.micro_batch = mb;
                                        plan.sp = sp;
                                        plan.zero_stage = zero;
                                        plan.precision = prec;
                                        plan.tp_comm_overlap = tpo;
                                        plan.overlap_grad_reduce = ogr;
                                        plan.overlap_param_gather = opg;
                                        let key = PlanKey {
                                            devices: o.devices,
                                            tp: o.tp,
                                            pp: o.pp,
                                            dp: o.dp,
                                            cp: o.cp,
                                            vpp,
                                            micro_batch: mb,
                                            sp,
                                            zero_stage: zero,
                                            precision: precision_code(prec).unwrap_or(0),
                                            tp_comm_overlap: tpo,
                                            overlap_grad_reduce: ogr,
                                            overlap_param_gather: opg,
                                            recompute: 0,
                                            recompute_layers: 0,
                                            schedule: 0,
                                            placement: 0,
                                        };
                                        self.group(training, &plan, key, &var, &places, limit, acc);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Evaluate the variants of one group: refuse, prune by memory, prune by the lower
    /// bound (a variant that cannot enter the top N, cannot be the fastest of its device count
    /// and would be dominated on the Pareto front), time the rest.
    #[allow(clippy::too_many_arguments)]
    fn group(
        &self,
        training: &Training,
        plan: &TrainingPlan,
        key: PlanKey,
        var: &[(u8, u32, u8)],
        places: &[u8],
        limit: f64,
        acc: &mut Acc,
    ) {
        let np = places.len() as u64;
        let nv = var.len() as u64 * np;
        let before = acc.cache.timed;
        let mut g: PlanGroup = match training.plan_group(plan, &mut acc.cache) {
            Ok(g) => g,
            Err(e) => return acc.refuse(&e, nv),
        };
        acc.counts.layer_programs += acc.cache.timed - before;
        // The partial counts beyond this group's real stage size are not plans of it.
        let (n1, n2, n3) = g.stage_layers();
        let busiest = n1.max(n2).max(n3) as u32;
        // Per schedule of the variants: refused (with how many plans), or its time bound.
        let mut scheds: [(u8, Option<f64>); MAX_SCHEDULES] = [(u8::MAX, None); MAX_SCHEDULES];
        let mut ns = 0;
        for &(_, _, s) in var {
            if ns < scheds.len() && !scheds[..ns].iter().any(|x| x.0 == s) {
                let bound = match g.check_schedule(s as usize) {
                    Err(e) => {
                        let n = var
                            .iter()
                            .filter(|v| v.2 == s && (v.1 == 0 || v.1 < busiest))
                            .count() as u64;
                        acc.refuse(&e, n * np);
                        None
                    }
                    Ok(()) if self.objective == Objective::Memory => Some(0.0),
                    Ok(()) => Some(g.time_lower_bound(s as usize).unwrap_or(0.0)),
                };
                scheds[ns] = (s, bound);
                ns += 1;
            }
        }
        let local = if acc.top.len() == self.top_n {
            acc.top.peek().map(|w| w.objective).unwrap_or(f64::INFINITY)
        } else {
            f64::INFINITY
        };
        let mut thr = local.min(self.threshold());
        let all = Placement::all();
        for &pi in places {
            g.set_placement(all[pi as usize]);
            self.variants_of(
                &mut g,
                key,
                pi,
                var,
                busiest,
                &scheds[..ns],
                limit,
                &mut thr,
                acc,
            );
        }
    }

    /// The variants of one group at one placement.
    #[allow(clippy::too_many_arguments)]
    fn variants_of(
        &self,
        g: &mut PlanGroup,
        key: PlanKey,
        placement: u8,
        var: &[(u8, u32, u8)],
        busiest: u32,
        scheds: &[(u8, Option<f64>)],
        limit: f64,
        thr: &mut f64,
        acc: &mut Acc,
    ) {
        for &(r, k, s) in var {
            if k >= busiest && k > 0 {
                acc.counts.enumerated -= 1;
                continue;
            }
            let Some(lb) = scheds.iter().find(|x| x.0 == s).and_then(|x| x.1) else {
                continue; // refused with its schedule above
            };
            if let Err(e) = g.set_variant(r as usize, (k > 0).then_some(k), s as usize) {
                acc.refuse(&e, 1);
                continue;
            }
            let mem = match g.memory_peak() {
                Ok(m) => m,
                Err(e) => {
                    acc.refuse(&e, 1);
                    continue;
                }
            };
            acc.min_memory = acc.min_memory.min(mem);
            if mem > limit {
                acc.counts.pruned_memory += 1;
                acc.counts.pruned += 1;
                continue;
            }
            if self.objective != Objective::Memory
                && self.objective_of(lb, mem, key.devices) > *thr
                && acc.fastest.get(&key.devices).is_some_and(|f| f.time < lb)
                && acc.pareto.dominates_bound(lb, mem)
            {
                acc.counts.pruned_bound += 1;
                acc.counts.pruned += 1;
                continue;
            }
            let time = match g.time() {
                Ok(t) => t,
                Err(e) => {
                    acc.refuse(&e, 1);
                    continue;
                }
            };
            acc.counts.evaluated += 1;
            let key = PlanKey {
                recompute: r,
                recompute_layers: k,
                schedule: s,
                placement,
                ..key
            };
            let sc = Scored {
                objective: self.objective_of(time, mem, key.devices),
                time,
                memory: mem,
                key,
            };
            push_top(&mut acc.top, sc, self.top_n);
            if acc.top.len() == self.top_n {
                if let Some(w) = acc.top.peek() {
                    self.offer_threshold(w.objective);
                    *thr = thr.min(w.objective);
                }
            }
            acc.pareto.insert(sc);
            acc.offer_fastest(sc);
        }
    }
}

/// Search `trainings` (one per device count, each with its system's `devices`) for the best
/// `top_n` plans. `template` gives every plan field the space does not walk (global batch,
/// attention kernel, dropout, overlap switches...).
pub fn search(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    template: &TrainingPlan,
    objective: Objective,
    top_n: usize,
) -> Result<SearchResult, SearchError> {
    let start = Instant::now();
    if top_n == 0 || top_n > MAX_TOP {
        return Err(SearchError::Invalid {
            key: "top".into(),
            message: format!("{top_n} is not allowed: must be 1 to {MAX_TOP}"),
        });
    }
    if trainings.is_empty() {
        return Err(SearchError::Invalid {
            key: "search.devices".into(),
            message: "no device count to search".into(),
        });
    }
    if !(constraints.memory_headroom.is_finite()
        && (0.0..1.0).contains(&constraints.memory_headroom))
    {
        return Err(SearchError::Invalid {
            key: "search.memory_headroom".into(),
            message: format!(
                "{} is not allowed: a fraction in [0, 1)",
                constraints.memory_headroom
            ),
        });
    }
    if constraints.global_batch == 0 {
        return Err(SearchError::Invalid {
            key: "search.global_batch".into(),
            message: "must be a positive integer".into(),
        });
    }
    for (k, l) in [
        ("search.tp", &space.tp),
        ("search.pp", &space.pp),
        ("search.dp", &space.dp),
        ("search.cp", &space.cp),
        ("search.vpp", &space.vpp),
        ("search.micro_batch", &space.micro_batch),
    ] {
        check_list(k, l)?;
    }
    let template = &TrainingPlan {
        global_batch: constraints.global_batch,
        ..template.clone()
    };
    let mut lists = Vec::with_capacity(trainings.len());
    for t in trainings {
        lists.push(resolve_lists(t, space)?);
    }
    // Outer tuples.
    let mut outers = Vec::new();
    let mut why_empty: Vec<String> = Vec::new();
    for (ti, t) in trainings.iter().enumerate() {
        let n = t.system().devices;
        let domain = t
            .system()
            .network
            .first()
            .map(|l| l.domain_size())
            .unwrap_or(1);
        let max_tp = constraints.max_tp.unwrap_or(domain);
        let divs = divisors(n as u64);
        let allowed =
            |list: &Option<Vec<u32>>, v: u32| list.as_ref().is_none_or(|l| l.contains(&v));
        let tps: Vec<u32> = divs
            .iter()
            .copied()
            .filter(|v| *v <= max_tp && allowed(&space.tp, *v))
            .collect();
        if tps.is_empty() {
            why_empty.push(format!(
                "{n} devices: no tensor-parallel degree in search.tp = {:?} divides {n} and is <= max_tp = {max_tp}",
                space.tp
            ));
        }
        let cps: Vec<u32> = divs
            .iter()
            .copied()
            .filter(|v| match &space.cp {
                Some(l) => l.contains(v),
                None => *v == 1,
            })
            .collect();
        if cps.is_empty() {
            why_empty.push(format!(
                "{n} devices: no context-parallel degree in search.cp = {:?} divides {n}",
                space.cp
            ));
        }
        let before = outers.len();
        for &tp in &tps {
            for &cp in &cps {
                if !(n as u64).is_multiple_of(tp as u64 * cp as u64) {
                    continue;
                }
                let rest = n / (tp * cp);
                for pp in divisors(rest as u64) {
                    let dp = rest / pp;
                    if allowed(&space.pp, pp) && allowed(&space.dp, dp) {
                        outers.push(Outer {
                            t: ti,
                            devices: n,
                            tp,
                            pp,
                            dp,
                            cp,
                        });
                    }
                }
            }
        }
        if outers.len() == before && !tps.is_empty() && !cps.is_empty() {
            why_empty.push(format!(
                "{n} devices: no pp in search.pp = {:?} and dp in search.dp = {:?} with tp x cp x pp x dp = {n}",
                space.pp, space.dp
            ));
        }
    }
    if outers.is_empty() {
        return Err(SearchError::Empty {
            reason: why_empty.join("; "),
        });
    }
    let ctx = Ctx {
        trainings,
        lists,
        template,
        constraints,
        objective,
        top_n,
        threshold: AtomicU64::new(f64::INFINITY.to_bits()),
    };
    // Largest work first (small pp and many variants), for an early threshold; the order
    // does not change the result.
    outers.sort_by_key(|o| (o.pp, o.tp, o.cp, o.devices));
    let acc = outers
        .par_iter()
        .with_max_len(1)
        .fold(Acc::new, |mut acc, o| {
            ctx.walk(*o, &mut acc);
            acc
        })
        .reduce(Acc::new, |a, b| a.merge(b, top_n));
    let counts = acc.counts;
    if counts.evaluated == 0 {
        let limit_gib = trainings[0].capacity().0 * (1.0 - constraints.memory_headroom) / GIB;
        let mut reason = if counts.enumerated == 0 {
            "the space lists no plan (check search.vpp, search.micro_batch, search.recompute, \
             search.schedule, search.precision)"
                .to_string()
        } else if counts.pruned_memory > 0 {
            format!(
                "no plan fits in memory: the limit is {limit_gib:.2} GiB per device \
                 (capacity x (1 - search.memory_headroom = {})), the smallest plan needs {:.2} GiB",
                constraints.memory_headroom,
                acc.min_memory / GIB
            )
        } else {
            "every plan was refused by the engine's checks".to_string()
        };
        let mut reasons: Vec<_> = acc.invalid.iter().collect();
        reasons.sort_by(|a, b| {
            (b.1 .0.cmp(&a.1 .0)).then_with(|| a.0.to_string().cmp(&b.0.to_string()))
        });
        for (k, (c, m)) in reasons.iter().take(3) {
            reason.push_str(&format!("; {c} plans refused on `{k}`: {m}"));
        }
        return Err(SearchError::Empty { reason });
    }
    let mut top: Vec<Scored> = acc.top.into_vec();
    top.sort();
    let tindex = |d: u32| trainings.iter().position(|t| t.system().devices == d);
    let mut plans = Vec::with_capacity(top.len());
    for (i, s) in top.iter().enumerate() {
        let t = &trainings[tindex(s.key.devices).unwrap_or(0)];
        let plan = plan_of(template, t, &s.key);
        let placement = placement_of(&s.key);
        let report = t
            .evaluate_placed(&plan, &placement)
            .map_err(|e| SearchError::Model {
                context: format!("evaluating finalist {plan:?}"),
                source: e,
            })?;
        plans.push(RankedPlan {
            rank: i + 1,
            objective: s.objective,
            plan,
            placement: placement.name(),
            report,
        });
    }
    let point = |s: &Scored| {
        let t = &trainings[tindex(s.key.devices).unwrap_or(0)];
        ParetoPoint {
            devices: s.key.devices,
            time_s: s.time,
            memory_gib: s.memory / GIB,
            plan: plan_of(template, t, &s.key),
            placement: placement_of(&s.key).name(),
        }
    };
    let pareto: Vec<ParetoPoint> = acc.pareto.pts.iter().map(point).collect();
    // Fastest per device count, kept when faster than every smaller count.
    let fastest: Vec<ParetoPoint> = acc.fastest.values().map(point).collect();
    let mut pareto_devices = Vec::new();
    if trainings.len() > 1 {
        let best = &acc.fastest;
        let mut fastest = f64::INFINITY;
        for s in best.values() {
            if s.time < fastest {
                fastest = s.time;
                pareto_devices.push(point(s));
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let summary = Summary {
        enumerated: counts.enumerated,
        pruned: counts.pruned,
        evaluated: counts.evaluated,
        seconds,
        pruned_invalid: counts.pruned_invalid,
        pruned_memory: counts.pruned_memory,
        pruned_bound: counts.pruned_bound,
        groups: counts.groups,
        layer_programs: counts.layer_programs,
        plans_per_s: counts.enumerated as f64 / seconds.max(1e-9),
        evaluations_per_s: counts.evaluated as f64 / seconds.max(1e-9),
        objective,
        threads: rayon::current_num_threads(),
    };
    Ok(SearchResult {
        plans,
        pareto,
        pareto_devices,
        fastest,
        summary,
    })
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
