//! The fast path for plan search: a plan's evaluation split into the part its recompute and
//! schedule variants share (a [`PlanGroup`]: the layer program, the collectives and their
//! exposure, timed once per group; the layer program cached per layer shape in a
//! [`LayerCache`]) and a cheap per-variant composition (recompute plan, memory, schedule).
//!
//! Invariant: the numbers are those of [`Training::evaluate`] bit for bit, because both run the
//! same private functions (`prepare_checked`, `set_recompute`, `group_times`, `compose`,
//! `memory_report`) in the same order; only the lookups by name and the report are skipped.

use super::placement::Placement;
use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::time::GroupTimes;
use super::timer::Timer;
use super::{moe, ops, shape, time, Training};
use perfcast_core::parallel::ScheduleInput;
use perfcast_core::{Bytes, DType, Key, ModelError, Seconds};

use std::collections::HashMap;

/// What the layer and end programs depend on besides the model (one layer's shape on one
/// device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LayerKey {
    dims: [u64; 8],
    /// The MoE layer's: local experts, rows per expert, expert width, dispatcher fusion,
    /// rows routed to the rank (all that EP and ETP change in a layer's program).
    moe: [u64; 5],
    gemm: DType,
    act: DType,
    flags: u8,
    /// Module-level selective recompute (`RecomputeModules` bits; 0: none).
    modules: u8,
    /// Micro-batches sharing one quantisation of the weights.
    weight_casts: u64,
    /// LoRA's rank, target bits and split (0: none, the base weights trained).
    lora: (u64, u8, u64),
}

fn layer_key(ls: &shape::LayerShape, moe: Option<&moe::MoePrep>) -> LayerKey {
    let attention = ls.attention as u8;
    let m = moe.and_then(|m| m.ls.moe);
    LayerKey {
        moe: m.map_or([0; 5], |m| {
            [
                m.local_experts,
                m.rows_per_expert,
                m.f_dev,
                m.fused_permute as u64,
                m.routed,
            ]
        }),
        dims: [
            ls.b,
            ls.sq,
            ls.a_dev,
            ls.kv_dev,
            ls.f_dev,
            ls.ps,
            ls.vocab_dev,
            ls.s,
        ],
        gemm: ls.gemm_dtype,
        act: ls.act_dtype,
        flags: (ls.fp32_grads as u8) | (ls.dropout as u8) << 1 | attention << 2,
        modules: ls.modules.map_or(0, |m| m.0),
        weight_casts: ls.weight_casts,
        lora: ls.lora.map_or((0, 0, 0), |l| (l.rank, l.targets, l.split)),
    }
}

/// Timed layer and end programs per layer shape, for one [`Training`] (one per worker
/// thread; bounded by the distinct shapes of a search, a few thousand at most).
#[derive(Default)]
pub struct LayerCache {
    map: HashMap<LayerKey, time::LayerPrograms>,
    /// Programs timed (cache misses).
    pub timed: u64,
}

impl LayerCache {
    pub fn new() -> Self {
        Self::default()
    }
    /// Distinct layer shapes held.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A plan's evaluation up to its recompute policy and schedule. Select a variant with
/// [`PlanGroup::set_variant`], then read [`PlanGroup::memory_peak`] and [`PlanGroup::time`].
pub struct PlanGroup<'t> {
    training: &'t Training,
    plan: TrainingPlan,
    p: Prepared<'t>,
    lt: ops::LayerTimes,
    ends: ops::EndTimes,
    moe_lt: Option<ops::LayerTimes>,
    g: Option<GroupTimes>,
    /// The group's times with the other expert-overlap state (a schedule that overlaps two
    /// micro-batches hides the expert all-to-all): kept while variants alternate.
    g_other: Option<GroupTimes>,
    variant_set: bool,
    placement: Placement,
}

impl Training {
    /// The axes the strategies in use declare, in the run's numbering (`PlanShape::axes`).
    pub fn declared_axes(&self) -> impl Iterator<Item = &perfcast_core::parallel::AxisDecl> {
        self.comps.declared.iter().map(|d| &d.decl)
    }
    /// The run's number of the declared axis `name`, or why there is none (no strategy in
    /// use declares an axis; or the names they declare, with the nearest): the reason a plan
    /// key `plan.axes.NAME` or a search key `search.axes.NAME` is refused.
    pub fn declared_axis(&self, name: &str) -> Result<usize, String> {
        let declared = &self.comps.declared;
        if let Some(k) = declared.iter().position(|d| d.decl.name == name) {
            return Ok(k);
        }
        let known = declared.iter().map(|d| d.decl.name.as_str());
        Err(if declared.is_empty() {
            "no strategy in use declares an axis (options.strategies)".to_string()
        } else {
            format!(
                "not an axis the strategies in use declare{}; declared: {}",
                perfcast_core::suggest::did_you_mean(name, known.clone()),
                known.collect::<Vec<_>>().join(", ")
            )
        })
    }
    /// Registered recompute policy names, in the order [`PlanGroup::set_variant`] indexes them.
    pub fn recompute_names(&self) -> Vec<&str> {
        self.comps
            .recompute
            .iter()
            .map(|(n, _)| n.as_str())
            .collect()
    }
    /// Registered schedule names, in the order [`PlanGroup::set_variant`] indexes them.
    pub fn schedule_names(&self) -> Vec<&str> {
        self.comps
            .schedules
            .iter()
            .map(|(n, _)| n.as_str())
            .collect()
    }
    /// Device memory capacity (bytes) plans are checked against.
    pub fn capacity(&self) -> Bytes {
        self.capacity
    }

    /// Validate everything of `plan` but its recompute policy and schedule (its `recompute`,
    /// `recompute_layers` and `schedule` are ignored), and time its layer program (through
    /// `cache`). Errors as [`Training::evaluate`] gives them.
    pub fn plan_group<'t>(
        &'t self,
        plan: &TrainingPlan,
        cache: &mut LayerCache,
    ) -> Result<PlanGroup<'t>, ModelError> {
        self.check_plan(plan)?;
        let shape = self.shape(plan)?;
        self.comps
            .each_strategy(&shape, |s, view, _| s.validate(&self.model, view))?;
        let sched = self
            .comps
            .schedules
            .first()
            .map(|(_, s)| s.as_ref())
            .ok_or_else(|| {
                ModelError::invalid(
                    Key::plan("schedule"),
                    "",
                    "no pipeline schedule is registered",
                )
            })?;
        // The schedule is validated per variant; prepare without it.
        let p = self.prepare_checked(plan, shape, sched)?;
        let key = layer_key(&p.ls, p.moe.as_ref());
        let (lt, ends, moe_lt) = match cache.map.get(&key) {
            Some(v) => *v,
            None => {
                let v = self.layer_times(&p)?;
                cache.timed += 1;
                cache.map.insert(key, v);
                v
            }
        };
        Ok(PlanGroup {
            training: self,
            plan: plan.clone(),
            p,
            lt,
            ends,
            moe_lt,
            g: None,
            g_other: None,
            variant_set: false,
            placement: Placement::MEGATRON,
        })
    }
}

impl<'t> PlanGroup<'t> {
    /// Choose the recompute policy (index into [`Training::recompute_names`]), its layer
    /// count and the schedule (index into [`Training::schedule_names`]); validates them as
    /// `evaluate` does.
    pub fn set_variant(
        &mut self,
        recompute: usize,
        recompute_layers: Option<u32>,
        schedule: usize,
    ) -> Result<(), ModelError> {
        let t = self.training;
        self.variant_set = false;
        let (rname, policy) = t.comps.recompute.get(recompute).ok_or_else(|| {
            ModelError::invalid(
                Key::plan("recompute"),
                recompute,
                "no such recompute policy index",
            )
        })?;
        let (_, sched) = t.comps.schedules.get(schedule).ok_or_else(|| {
            ModelError::invalid(Key::plan("schedule"), schedule, "no such schedule index")
        })?;
        sched.validate(&self.p.shape)?;
        self.p.sched = sched.as_ref();
        let overlap = super::prepare::expert_overlap(&self.plan, &self.p.shape, sched.as_ref());
        if overlap != self.p.shape.ep_comm_overlap {
            self.p.shape.ep_comm_overlap = overlap;
            std::mem::swap(&mut self.g, &mut self.g_other);
        }
        t.set_recompute(&mut self.p, policy.as_ref(), recompute_layers, rname)?;
        self.variant_set = true;
        Ok(())
    }

    /// Check schedule `schedule` (index into [`Training::schedule_names`]) against the plan,
    /// as `evaluate` does: once per group instead of once per variant.
    pub fn check_schedule(&self, schedule: usize) -> Result<(), ModelError> {
        let (_, sched) = self.training.comps.schedules.get(schedule).ok_or_else(|| {
            ModelError::invalid(Key::plan("schedule"), schedule, "no such schedule index")
        })?;
        sched.validate(&self.p.shape)
    }

    fn need_variant(&self) -> Result<(), ModelError> {
        if self.variant_set {
            Ok(())
        } else {
            Err(ModelError::invalid(
                Key::plan(""),
                "no variant",
                "call set_variant (successfully) first",
            ))
        }
    }

    /// Peak memory per device (bytes) of the selected variant: `evaluate(plan)?.memory.peak`.
    pub fn memory_peak(&self) -> Result<f64, ModelError> {
        self.need_variant()?;
        let input = Training::memory_input(&self.plan, &self.p);
        Ok(self
            .training
            .memory_report(&self.plan, &self.p, &input)
            .peak
            .0)
    }

    /// A lower bound on the step time of every variant of this group under `schedule`: the
    /// schedule applied to the compute of the busiest stage's layers alone (no recompute, no
    /// communication, no embedding or head), plus the optimizer step. Valid for schedules whose
    /// time does not decrease when a stage's forward + backward time grows (every built-in
    /// schedule: they depend on the sum only, linearly).
    pub fn time_lower_bound(&mut self, schedule: usize) -> Result<f64, ModelError> {
        let t = self.training;
        let (_, sched) = t.comps.schedules.get(schedule).ok_or_else(|| {
            ModelError::invalid(Key::plan("schedule"), schedule, "no such schedule index")
        })?;
        let n = self
            .p
            .params
            .n_first
            .max(self.p.params.n_mid)
            .max(self.p.params.n_last) as f64;
        // An MoE model's layers: the cheaper kind's (a bound for any mix of them).
        let per_layer = match &self.moe_lt {
            Some(m) => (self.lt.fwd.total + self.lt.bwd.total).min(m.fwd.total + m.bwd.total),
            None => self.lt.fwd.total + self.lt.bwd.total,
        };
        let input = ScheduleInput {
            stages: self.plan.pp,
            virtual_stages: self.plan.vpp,
            micro_batches: self.p.shape.micro_batches(),
            forward: Seconds::ZERO,
            backward: Seconds(n * per_layer),
            p2p: Seconds::ZERO,
        };
        let opt = match &self.g {
            Some(g) => g.opt,
            None => {
                let timer = Timer {
                    unit: t.system.compute.as_ref(),
                    memory: &t.system.memory,
                    trace: None,
                    part: std::cell::Cell::new(""),
                    scales: t.params.efficiency,
                };
                ops::optimizer(&timer, time::optimizer_params(&self.p), self.p.state.grads)?
            }
        };
        Ok(sched.step(&input)?.time.0 + opt)
    }

    /// Step time (seconds) of the selected variant: `evaluate(plan)?.iteration_time`. The
    /// collectives are timed on the first call and reused by every later variant.
    pub fn time(&mut self) -> Result<f64, ModelError> {
        self.need_variant()?;
        let t = self.training;
        let g = match self.g {
            Some(ref g) => g,
            None => self.g.insert(t.group_times(
                &self.plan,
                &self.p,
                self.lt,
                self.ends,
                self.moe_lt,
                &self.placement,
            )?),
        };
        Ok(t.compose(&self.plan, &self.p, g)?.iteration)
    }

    /// Lay the mesh out in `placement`'s order (default Megatron's): the time of every later
    /// variant is `evaluate_placed(plan, placement)`'s. Memory does not depend on it.
    pub fn set_placement(&mut self, placement: Placement) {
        if placement != self.placement {
            self.placement = placement;
            self.g = None;
            self.g_other = None;
        }
    }

    /// Layers per device on the first, a middle and the last stage.
    pub fn stage_layers(&self) -> (u64, u64, u64) {
        (
            self.p.params.n_first,
            self.p.params.n_mid,
            self.p.params.n_last,
        )
    }

    /// Micro-batches per step on one pipeline.
    pub fn micro_batches(&self) -> u32 {
        self.p.shape.micro_batches()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::workload::ModelSpec;
    use perfcast_testkit::{a100_from_registry, gpt};

    /// GPT-3 175B (Narayanan et al. 2021, Table 1).
    fn gpt3() -> ModelSpec {
        ModelSpec {
            name: "gpt3-175b".into(),
            ..gpt(96, 12288, 96)
        }
    }

    /// Every recompute and schedule variant of a few GPT-3 175B groups: the fast path's time
    /// and peak memory are `evaluate`'s, bit for bit; refusals agree.
    #[test]
    fn variants_equal_evaluate() {
        let registry = perfcast_builtins::registry().unwrap();
        let sys = a100_from_registry(&registry, 1024).unwrap();
        let t = Training::new(gpt3(), sys, &registry).unwrap();
        let mut cache = LayerCache::new();
        let groups = [
            (8, 16, 8, 1, 1, false, 0u8),
            (8, 16, 8, 3, 2, true, 1),
            (4, 8, 32, 4, 1, true, 3),
            (8, 1, 128, 1, 4, true, 2),
        ];
        let rnames: Vec<String> = t.recompute_names().iter().map(|s| s.to_string()).collect();
        let snames: Vec<String> = t.schedule_names().iter().map(|s| s.to_string()).collect();
        let mut compared = 0;
        for (tp, pp, dp, vpp, mb, sp, zero) in groups {
            let base = TrainingPlan {
                tp,
                pp,
                dp,
                vpp,
                micro_batch: mb,
                sp,
                zero_stage: zero,
                global_batch: 1536,
                ..TrainingPlan::default()
            };
            let mut g = t.plan_group(&base, &mut cache).unwrap();
            for (ri, r) in rnames.iter().enumerate() {
                for k in [None, Some(1), Some(2)] {
                    for (si, s) in snames.iter().enumerate() {
                        let plan = TrainingPlan {
                            recompute: r.clone(),
                            recompute_layers: k,
                            schedule: Some(s.clone()),
                            ..base.clone()
                        };
                        let fast = g
                            .set_variant(ri, k, si)
                            .and_then(|_| Ok((g.time()?, g.memory_peak()?)));
                        match (t.evaluate(&plan), fast) {
                            (Ok(rep), Ok((time, mem))) => {
                                assert_eq!(rep.iteration_time.0, time, "{plan:?}");
                                assert_eq!(rep.memory.peak.0, mem, "{plan:?}");
                                compared += 1;
                            }
                            (Err(_), Err(_)) => {}
                            (a, b) => panic!("{plan:?}: {:?} vs {:?}", a.err(), b.err()),
                        }
                    }
                }
            }
        }
        assert!(compared >= 20, "{compared}");
        assert!(cache.len() <= 4 && cache.timed as usize == cache.len());
        // A variant must be chosen before reading results.
        let mut g = t
            .plan_group(
                &TrainingPlan {
                    tp: 8,
                    pp: 16,
                    dp: 8,
                    global_batch: 1536,
                    ..TrainingPlan::default()
                },
                &mut cache,
            )
            .unwrap();
        assert!(g.time().is_err() && g.memory_peak().is_err());
        assert!(g.set_variant(99, None, 0).is_err());
        assert!(g.time().is_err());
    }

    /// Every placement: the fast path's time is `evaluate_placed`'s; the default placement is
    /// `evaluate`'s; moving TP out of the NVLink domain costs time.
    #[test]
    fn placements_equal_evaluate_placed() {
        let registry = perfcast_builtins::registry().unwrap();
        let sys = a100_from_registry(&registry, 1024).unwrap();
        let t = Training::new(gpt3(), sys, &registry).unwrap();
        let mut cache = LayerCache::new();
        let full = t
            .recompute_names()
            .iter()
            .position(|n| *n == "full")
            .unwrap();
        let f1b = t
            .schedule_names()
            .iter()
            .position(|n| *n == "1f1b")
            .unwrap();
        for (tp, pp, dp, cp) in [(8, 16, 8, 1), (2, 4, 64, 2), (4, 1, 256, 1)] {
            let plan = TrainingPlan {
                tp,
                pp,
                dp,
                cp,
                global_batch: 1536,
                recompute: "full".into(),
                schedule: Some("1f1b".into()),
                ..TrainingPlan::default()
            };
            let mut g = t.plan_group(&plan, &mut cache).unwrap();
            g.set_variant(full, None, f1b).unwrap();
            for pl in Placement::all() {
                g.set_placement(pl);
                let want = t.evaluate_placed(&plan, &pl).unwrap().iteration_time.0;
                assert_eq!(g.time().unwrap(), want, "{plan:?} {}", pl.name());
            }
            let megatron = t.evaluate(&plan).unwrap().iteration_time.0;
            g.set_placement(Placement::MEGATRON);
            assert_eq!(g.time().unwrap(), megatron);
        }
        let plan = TrainingPlan {
            tp: 8,
            pp: 16,
            dp: 8,
            global_batch: 1536,
            ..TrainingPlan::default()
        };
        let inside = t.evaluate(&plan).unwrap().iteration_time.0;
        let across = t
            .evaluate_placed(&plan, &Placement::parse("dp-cp-pp-tp").unwrap())
            .unwrap()
            .iteration_time
            .0;
        assert!(across > inside, "{across} vs {inside}");
    }
}
