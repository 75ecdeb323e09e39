//! The walk: every plan group of an outer tuple enumerated, refused or pruned (memory, the
//! time lower bound) before timing, the rest timed on the engine's fast path, in parallel
//! over the outer tuples (rayon), each worker with its own [`Acc`].

use super::accumulate::{push_top, Acc, Scored};
use super::finalists::{recipe_for, set_axes};
use super::resolve::{divisors, Lists, Outer, MAX_SCHEDULES};
use super::results::{precision_code, PlanKey};
use crate::space::{Constraints, Objective};
use perfcast_core::parallel::interleaving_degrees;
use perfcast_engine::training::{Placement, PlanGroup, Training, TrainingPlan};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::time::Instant;

/// Shared, read-only state of one search.
pub(super) struct Ctx<'a> {
    pub(super) trainings: &'a [Training],
    /// Per training.
    pub(super) lists: Vec<Lists>,
    pub(super) template: &'a TrainingPlan,
    pub(super) constraints: &'a Constraints,
    pub(super) objective: Objective,
    pub(super) top_n: usize,
    /// f64 bits of the best known N-th objective (an upper bound on the final N-th best).
    pub(super) threshold: AtomicU64,
    /// When the walk must stop (`--max-seconds`), if ever.
    pub(super) deadline: Option<Instant>,
    /// Set once the deadline has passed (so workers stop without asking the clock).
    pub(super) expired: AtomicBool,
    /// Memory checks of a run of partial recompute counts by bisection ([`unfit_prefix`]);
    /// off: every count checked (what the tests compare it with).
    pub(super) bisect: bool,
}

/// Walk every outer tuple in parallel (one rayon task each), then merge the workers'
/// accumulators. `estimates[i]` is the size of `outers[i]` ([`Ctx::estimate`]); an outer
/// tuple the deadline cut short (or never started) is recorded with how much of it was left.
pub(super) fn run(ctx: &Ctx<'_>, outers: &[Outer], estimates: &[u64]) -> Acc {
    outers
        .par_iter()
        .zip(estimates.par_iter())
        .enumerate()
        .with_max_len(1)
        .fold(Acc::new, |mut acc, (i, (o, est))| {
            let visited = if ctx.out_of_time() {
                0
            } else {
                ctx.walk(*o, &mut acc)
            };
            acc.visited += visited;
            if visited < *est {
                acc.unvisited.push((i, est - visited));
            }
            acc
        })
        .reduce(Acc::new, |a, b| a.merge(b, ctx.top_n))
}

impl Ctx<'_> {
    /// Whether the deadline has passed (asks the clock until it has, then remembers).
    pub(super) fn out_of_time(&self) -> bool {
        if self.expired.load(AtomicOrdering::Relaxed) {
            return true;
        }
        match self.deadline {
            Some(d) if Instant::now() >= d => {
                self.expired.store(true, AtomicOrdering::Relaxed);
                true
            }
            _ => false,
        }
    }
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

/// The per-tuple value lists of one outer tuple (see [`Ctx::dims`]).
struct Dims {
    /// (ep, etp) pairs valid on the tuple.
    experts: Vec<(u32, u32)>,
    vpps: Vec<u32>,
    mbs: Vec<u32>,
    sps: Vec<bool>,
    tpos: Vec<bool>,
    zeros: Vec<u8>,
    places: Vec<u8>,
}

/// The axes of degree > 1 of tuple `o` as `placement` lays them out, innermost first (the
/// dense ones 0..4 in `MeshAxis` order, declared axis `k` as `10 + k`, each next to its
/// anchor): two placements with the same order place every group the same.
fn physical_order(
    placement: &Placement,
    o: Outer,
    decls: &[&perfcast_core::parallel::AxisDecl],
) -> Vec<u8> {
    use perfcast_core::parallel::AxisPlace;
    use perfcast_engine::training::MeshAxis;
    let mut out = Vec::with_capacity(4 + decls.len());
    for a in placement.order() {
        let degree = match a {
            MeshAxis::Tp => o.tp,
            MeshAxis::Cp => o.cp,
            MeshAxis::Pp => o.pp,
            MeshAxis::Dp => o.dp,
        };
        for outside in [false, true] {
            if outside && degree > 1 {
                out.push(a as u8);
            }
            for (k, d) in decls.iter().enumerate() {
                let side = matches!(d.place, AxisPlace::Outside(_));
                if o.axes[k] > 1 && side == outside && MeshAxis::of(d.place.anchor()) == a {
                    out.push(10 + k as u8);
                }
            }
        }
    }
    out
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

impl Ctx<'_> {
    fn objective_of(&self, time: f64, memory: f64, devices: u32) -> f64 {
        match self.objective {
            Objective::Time => time,
            Objective::Memory => memory,
            Objective::Cost => time * devices as f64,
        }
    }

    /// The per-tuple dimensions of outer tuple `o`: its interleavings, micro-batches,
    /// sequence-parallel, TP-overlap and ZeRO values, and the placements that place it apart.
    fn dims(&self, o: Outer) -> Dims {
        let training = &self.trainings[o.t];
        let l = &self.lists[o.t];
        let m = training.model();
        let gb = self.constraints.global_batch;
        let vpps: Vec<u32> = match &l.vpp {
            Some(v) => v.iter().copied().filter(|v| o.pp > 1 || *v == 1).collect(),
            None => interleaving_degrees(m.layers, o.pp),
        };
        let mbs: Vec<u32> = match &l.micro_batch {
            Some(v) => v.clone(),
            None => {
                let replicas = o.dp * o.batch;
                if gb.is_multiple_of(replicas) {
                    divisors((gb / replicas) as u64)
                        .into_iter()
                        .filter(|b| *b <= self.constraints.max_micro_batch)
                        .collect()
                } else {
                    vec![1]
                }
            }
        };
        let sps = if o.tp > 1 { l.sp.clone() } else { vec![false] };
        let tpos = if o.tp > 1 { l.tpo.clone() } else { vec![false] };
        let zeros = if o.dp * o.cp * o.batch > 1 {
            l.zero.clone()
        } else {
            vec![0]
        };
        // Placements that place this mesh differently (same order of the non-trivial axes
        // = same placement of every group; with a declared axis every order is tried, as
        // its anchor may be a trivial axis whose place still matters).
        let decls: Vec<_> = self.trainings[o.t].declared_axes().collect();
        let all = Placement::all();
        let mut places: Vec<u8> = Vec::with_capacity(l.placements.len());
        let mut seen = Vec::with_capacity(l.placements.len());
        for &i in &l.placements {
            let e = physical_order(&all[i as usize], o, &decls);
            if !seen.contains(&e) {
                seen.push(e);
                places.push(i);
            }
        }
        Dims {
            experts: self.expert_layouts(o),
            vpps,
            mbs,
            sps,
            tpos,
            zeros,
            places,
        }
    }

    /// The expert layouts `(ep, etp)` of tuple `o`: the listed (or default) degrees whose
    /// product divides its TP x CP x DP ranks (DP times the declared axes that split the
    /// batch), `ep` the experts and `etp` an expert's width (the expert strategy's rules); a
    /// dense model keeps the template's.
    fn expert_layouts(&self, o: Outer) -> Vec<(u32, u32)> {
        let l = &self.lists[o.t];
        let Some(moe) = &self.trainings[o.t].model().moe else {
            return vec![(self.template.ep, self.template.etp)];
        };
        let eps = l.ep.clone().unwrap_or_else(|| {
            (0..32)
                .map(|i| 1u32 << i)
                .take_while(|e| (*e as u64) <= moe.experts)
                .filter(|e| moe.experts.is_multiple_of(*e as u64))
                .collect()
        });
        let mut etps = l.etp.clone().unwrap_or_else(|| vec![1, o.tp]);
        etps.dedup();
        let mesh = o.tp as u64 * o.cp as u64 * o.dp as u64 * o.batch as u64;
        let mut out = Vec::new();
        for &ep in &eps {
            for &etp in &etps {
                let (e, t) = (ep as u64, etp as u64);
                if moe.experts.is_multiple_of(e)
                    && moe.expert_ffn_hidden.is_multiple_of(t)
                    && mesh.is_multiple_of(e * t)
                    && !out.contains(&(ep, etp))
                {
                    out.push((ep, etp));
                }
            }
        }
        out
    }

    /// The overlap switches walked for a ZeRO stage: (grad-reduce values, param-gather
    /// values).
    fn overlaps(&self, o: Outer, zero: u8) -> (&[bool], &[bool]) {
        let l = &self.lists[o.t];
        let ogrs: &[bool] = if o.dp * o.cp * o.batch > 1 {
            &l.ogr
        } else {
            std::slice::from_ref(&self.template.overlap_grad_reduce)
        };
        let opgs: &[bool] = if o.dp * o.cp * o.batch > 1 && (1..=2).contains(&zero) {
            &l.opg
        } else {
            std::slice::from_ref(&self.template.overlap_param_gather)
        };
        (ogrs, opgs)
    }

    /// Layers of the busiest stage at interleaving `vpp` (for the partial-recompute counts),
    /// even if the split turns out invalid.
    fn stage_layers_bound(&self, o: Outer, vpp: u32) -> u64 {
        let chunks = o.pp as u64 * vpp as u64;
        vpp as u64 * self.trainings[o.t].model().layers.div_ceil(chunks.max(1))
    }

    /// How many plans the walk of `o` enumerates (before it drops the partial-recompute
    /// counts beyond a group's real stage size): the same loops as [`Ctx::walk`], counted
    /// instead of evaluated. Cheap: no engine call.
    pub(super) fn estimate(&self, o: Outer) -> u64 {
        let d = self.dims(o);
        let l = &self.lists[o.t];
        let mut var = Vec::new();
        let mut per_mb = 0u64;
        for &zero in &d.zeros {
            let (ogrs, opgs) = self.overlaps(o, zero);
            per_mb +=
                (d.sps.len() * l.precision.len() * d.tpos.len() * ogrs.len() * opgs.len()) as u64;
        }
        let mut n = 0u64;
        for &vpp in &d.vpps {
            variants(l, o.pp, vpp, self.stage_layers_bound(o, vpp), &mut var);
            let nv = var.len() as u64 * d.places.len() as u64;
            n = n.saturating_add(nv.saturating_mul(d.mbs.len() as u64 * per_mb));
        }
        n.saturating_mul(d.experts.len() as u64)
    }

    /// Walk every group of one outer tuple; how many plans it visited (all of
    /// [`Ctx::estimate`] unless the deadline stopped it).
    fn walk(&self, o: Outer, acc: &mut Acc) -> u64 {
        let training = &self.trainings[o.t];
        let l = &self.lists[o.t];
        let gb = self.constraints.global_batch;
        let limit = self.constraints.memory_limit(training.capacity().0);
        let Dims {
            experts,
            vpps,
            mbs,
            sps,
            tpos,
            zeros,
            places,
        } = self.dims(o);
        let mut var = Vec::with_capacity(128);
        let mut visited = 0u64;
        let mut plan = TrainingPlan {
            tp: o.tp,
            pp: o.pp,
            dp: o.dp,
            cp: o.cp,
            global_batch: gb,
            ..self.template.clone()
        };
        set_axes(&mut plan, training, &o.axes);
        'all: for (&(ep, etp), &vpp) in experts
            .iter()
            .flat_map(|e| vpps.iter().map(move |v| (e, v)))
        {
            plan.ep = ep;
            plan.etp = etp;
            variants(l, o.pp, vpp, self.stage_layers_bound(o, vpp), &mut var);
            if var.is_empty() {
                continue; // no schedule listed for this interleaving: no plan
            }
            let nv = var.len() as u64;
            for &mb in &mbs {
                for &sp in &sps {
                    for &zero in &zeros {
                        let (ogrs, opgs) = self.overlaps(o, zero);
                        for &prec in &l.precision {
                            for &tpo in &tpos {
                                for &ogr in ogrs {
                                    for &opg in opgs {
                                        if self.out_of_time() {
                                            break 'all;
                                        }
                                        let n = nv * places.len() as u64;
                                        acc.counts.enumerated += n;
                                        acc.counts.groups += 1;
                                        plan.vpp = vpp;
                                        plan.micro_batch = mb;
                                        plan.sp = sp;
                                        plan.zero_stage = zero;
                                        plan.precision = prec;
                                        plan.fp8_recipe = recipe_for(self.template, prec);
                                        plan.tp_comm_overlap = tpo;
                                        plan.overlap_grad_reduce = ogr;
                                        plan.overlap_param_gather = opg;
                                        let key = PlanKey {
                                            devices: o.devices,
                                            tp: o.tp,
                                            pp: o.pp,
                                            dp: o.dp,
                                            cp: o.cp,
                                            ep,
                                            etp,
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
                                            axes: o.axes,
                                        };
                                        let left = self
                                            .group(training, &plan, key, &var, &places, limit, acc);
                                        // Plans the deadline cut off are not enumerated.
                                        acc.counts.enumerated -= left;
                                        visited += n - left;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        visited
    }

    /// Evaluate the variants of one group: refuse, prune by memory, prune by the lower
    /// bound (a variant that cannot enter the top N, cannot be the fastest of its device count
    /// and would be dominated on the Pareto front), time the rest. Returns how many of its
    /// plans the deadline left unvisited (0 when it finished).
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
    ) -> u64 {
        let np = places.len() as u64;
        let nv = var.len() as u64 * np;
        let before = acc.cache.timed;
        let mut g: PlanGroup = match training.plan_group(plan, &mut acc.cache) {
            Ok(g) => g,
            Err(e) => {
                acc.refuse(&e, nv);
                return 0;
            }
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
        for (i, &pi) in places.iter().enumerate() {
            g.set_placement(all[pi as usize]);
            let left = self.variants_of(
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
            if left > 0 {
                return left + (places.len() - i - 1) as u64 * var.len() as u64;
            }
        }
        0
    }

    /// The variants of one group at one placement; how many the deadline left unvisited
    /// (the clock is read every [`CLOCK_EVERY`] variants: a group of a deep model has one
    /// per partial-recompute count).
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
    ) -> u64 {
        // Variants before this index are known not to fit (a run of partial counts bisected).
        let mut unfit_until = 0;
        for (j, &(r, k, s)) in var.iter().enumerate() {
            if j % CLOCK_EVERY == CLOCK_EVERY - 1 && self.out_of_time() {
                return (var.len() - j) as u64;
            }
            if k >= busiest && k > 0 {
                acc.counts.enumerated -= 1;
                continue;
            }
            let Some(lb) = scheds.iter().find(|x| x.0 == s).and_then(|x| x.1) else {
                continue; // refused with its schedule above
            };
            if k == 1 && self.bisect {
                let run = var[j..]
                    .iter()
                    .zip(1..busiest)
                    .take_while(|(v, n)| v.0 == r && v.2 == s && v.1 == *n)
                    .count();
                unfit_until = j + unfit_prefix(g, &var[j..j + run], limit, acc).unwrap_or(0);
            }
            if j < unfit_until {
                acc.counts.pruned_memory += 1;
                acc.counts.pruned += 1;
                continue;
            }
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
        0
    }
}

/// How many of `run` (one recompute policy and schedule at partial counts 1, 2, ...) do not
/// fit in `limit`, found by bisection: memory does not grow with the layers recomputed, so
/// the counts that fit are a suffix of the run. `None` (scan them all) when a probe is
/// refused. The run's last count (its least memory) is always probed, so the least memory
/// seen is the exhaustive scan's (`tests/bisection.rs`).
fn unfit_prefix(
    g: &mut PlanGroup,
    run: &[(u8, u32, u8)],
    limit: f64,
    acc: &mut Acc,
) -> Option<usize> {
    let mut memory = |&(r, k, s): &(u8, u32, u8)| -> Option<f64> {
        g.set_variant(r as usize, Some(k), s as usize).ok()?;
        let m = g.memory_peak().ok()?;
        acc.min_memory = acc.min_memory.min(m);
        Some(m)
    };
    let last = run.last()?;
    if memory(last)? > limit {
        return Some(run.len());
    }
    let (mut lo, mut hi) = (0, run.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if memory(&run[mid])? <= limit {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// Variants between two looks at the clock inside a group.
const CLOCK_EVERY: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::parallel::{Axis, AxisDecl, AxisPlace, Divides, MAX_DECLARED_AXES};

    /// Placements are told apart by where they put every axis of degree > 1, declared ones
    /// included: a shard group inside `data` moves with `data` even when `dp = 1`.
    #[test]
    fn placements_are_compared_with_their_declared_axes() {
        let shard = AxisDecl {
            name: "shard".into(),
            place: AxisPlace::Inside(Axis::Data),
            divides: Divides::default(),
        };
        let mut axes = [1; MAX_DECLARED_AXES];
        axes[0] = 4;
        let o = Outer {
            t: 0,
            devices: 8,
            tp: 2,
            pp: 1,
            dp: 1,
            cp: 1,
            axes,
            batch: 4,
        };
        let order = |name: &str| physical_order(&Placement::parse(name).unwrap(), o, &[&shard]);
        // (placement, tp = 0 and the shard = 10, innermost first)
        let table: [(&str, &[u8]); 3] = [
            ("tp-cp-pp-dp", &[0, 10]),
            ("dp-tp-pp-cp", &[10, 0]),
            ("cp-tp-pp-dp", &[0, 10]),
        ];
        for (name, want) in table {
            assert_eq!(order(name), want, "{name}");
        }
        // Without the declared axis both orders are the same (TP alone).
        let o = Outer {
            axes: [1; MAX_DECLARED_AXES],
            ..o
        };
        let plain = |name: &str| physical_order(&Placement::parse(name).unwrap(), o, &[&shard]);
        assert_eq!(plain("tp-cp-pp-dp"), plain("dp-tp-pp-cp"));
    }
}
