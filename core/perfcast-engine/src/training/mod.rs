//! The training step model: one optimizer step of a dense decoder-only transformer under
//! TP/SP/CP/PP/DP/ZeRO with a recompute policy and a pipeline schedule.
//!
//! Method (Narayanan et al. 2021; Korthikanti et al. 2022; seed paper §2): build one layer's
//! op program on one device (shapes sharded by the strategies), time each op on the device's
//! `ComputeUnit` over its memory tiers, time each collective on the network levels its group
//! spans, keep what the overlap rules expose, multiply by the layers of a stage, add the
//! embedding (first stage) and the LM head with the loss (last stage), let the schedule
//! compose the slowest stage over the micro-batches, then add the exposed gradient
//! reduction / parameter gathers and the optimizer step. Memory per stage: model state per
//! ZeRO stage, activations per recompute policy times the micro-batches the schedule keeps in
//! flight, transient buffers, against the device tier's capacity.

pub mod fast;
pub mod flops;
pub mod memory;
pub mod ops;
pub mod placement;
mod plan;
pub mod report;

pub use fast::{LayerCache, PlanGroup};
pub use ops::{ComputeBreakdown, OpLine};
pub use placement::{MeshAxis, Placement};
pub use plan::{EngineParams, TrainingPlan};
pub use report::{
    Bottleneck, Feasibility, LayerReport, MemoryReport, StageMemory, TimeBreakdown, TrainingReport,
};

use crate::network::{Mesh, Network};
use memory::{ActivationShape, StateBytes};
use ops::{ClassTimes, OpClass, PassTimes, Timer};
use perfcast_core::parallel::{
    stage_layers, CommClass, CommList, CpComm, LayerDims, LayerSplit, Overlap, ParallelStrategy,
    Phase, PipelineSchedule, RecomputePlan, RecomputePolicy, ScheduleInput, StateSplit,
};
use perfcast_core::registry::{Category, Registry};
use perfcast_core::workload::{FfnAct, ModelSpec, NormKind, PositionKind};
use perfcast_core::{Bytes, DType, Engine, FlopCount, ModelError, Seconds, System};
use std::sync::Arc;

/// Registry names of the parallel strategies a `Training` uses by default, in mesh order
/// (Megatron-LM's: TP innermost, then SP, CP, PP, DP, and ZeRO sharding over DP). Any
/// registry that holds strategies of these names serves; the built-ins do.
pub const DEFAULT_STRATEGIES: [&str; 6] =
    ["tensor", "sequence", "context", "pipeline", "data", "zero"];

/// The execution plugins a `Training` evaluates plans with.
#[derive(Clone)]
pub struct TrainingComponents {
    /// Applied in order; each adds its split, collectives and state sharding.
    pub strategies: Vec<Arc<dyn ParallelStrategy>>,
    /// Recompute policies by name (the plan's `recompute`).
    pub recompute: Vec<(String, Arc<dyn RecomputePolicy>)>,
    /// Pipeline schedules by name (the plan's `schedule`).
    pub schedules: Vec<(String, Arc<dyn PipelineSchedule>)>,
}

fn registry_error(e: perfcast_core::registry::RegistryError) -> ModelError {
    let s = e.to_string();
    ModelError::invalid("plugin", s.clone(), s)
}

impl TrainingComponents {
    /// The default strategies, and every registered recompute policy and schedule, each built
    /// with its default parameters.
    pub fn from_registry(registry: &Registry) -> Result<Self, ModelError> {
        Self::from_options(registry, &TrainingOptions::default())
    }

    /// The strategies of `options` (default: [`DEFAULT_STRATEGIES`]) built with their
    /// parameters, and every registered recompute policy and schedule.
    pub fn from_options(
        registry: &Registry,
        options: &TrainingOptions,
    ) -> Result<Self, ModelError> {
        let names: Vec<&str> = match &options.strategies {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => DEFAULT_STRATEGIES.to_vec(),
        };
        for key in options.strategy_params.keys() {
            if !names.contains(&key.as_str()) {
                return Err(ModelError::invalid(
                    format!("training.strategy_params.{key}"),
                    key,
                    format!("not a strategy in use; in use: {}", names.join(", ")),
                ));
            }
        }
        let null = serde_json::Value::Null;
        let mut strategies = Vec::with_capacity(names.len());
        for n in names {
            let params = options.strategy_params.get(n).unwrap_or(&null);
            strategies.push(
                registry
                    .parallel_strategy(n, params)
                    .map_err(registry_error)?,
            );
        }
        let mut recompute = Vec::new();
        for n in registry.names(Category::RecomputePolicy) {
            let p = registry
                .recompute_policy(&n, &null)
                .map_err(registry_error)?;
            recompute.push((n, p));
        }
        let mut schedules = Vec::new();
        for n in registry.names(Category::PipelineSchedule) {
            let p = registry
                .pipeline_schedule(&n, &null)
                .map_err(registry_error)?;
            schedules.push((n, p));
        }
        Ok(TrainingComponents {
            strategies,
            recompute,
            schedules,
        })
    }
}

/// How a host configures the training model (e.g. a `[training]` config table): engine
/// parameters, and the parallel strategies with their parameters. Shared by every plan.
#[derive(serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrainingOptions {
    #[serde(default)]
    pub engine: EngineParams,
    /// Strategy registry names in mesh order; default `tensor, sequence, context, pipeline,
    /// data, zero`.
    #[serde(default)]
    pub strategies: Option<Vec<String>>,
    /// Parameters per strategy name, e.g. `data = { overlap_efficiency = 0.9 }`.
    #[serde(default)]
    pub strategy_params: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A model on a system, resolved and ready to evaluate training plans.
#[derive(Clone)]
pub struct Training {
    model: ModelSpec,
    system: System,
    network: Network,
    params: EngineParams,
    comps: TrainingComponents,
    capacity: Bytes,
}

fn positive(key: &'static str, v: u32) -> Result<(), ModelError> {
    if v == 0 {
        Err(ModelError::invalid(key, v, "must be a positive integer"))
    } else {
        Ok(())
    }
}

/// Per-class exposed communication time.
type ClassComm = [f64; 5];

fn sum(c: &ClassComm) -> f64 {
    c.iter().sum()
}

/// One stage's per-micro-batch times.
#[derive(Debug, Clone, Copy, Default)]
struct StageTimes {
    layers: f64,
    rc_compute: f64,
    rc_comm: f64,
    fwd: f64,
    bwd: f64,
    compute: ClassTimes,
    comm: ClassComm,
}

/// A validated plan with everything that needs no timing worked out.
#[derive(Clone, Copy)]
struct Prepared<'a> {
    shape: perfcast_core::parallel::PlanShape,
    sched: &'a dyn PipelineSchedule,
    ssplit: StateSplit,
    cpd: u64,
    ps: u64,
    b: u64,
    s: u64,
    precision: DType,
    dropout: bool,
    ls: ops::LayerShape,
    hf: f64,
    layer_dev: f64,
    n_first: u64,
    n_mid: u64,
    n_last: u64,
    single: bool,
    first_params: f64,
    mid_params: f64,
    last_params: f64,
    device_params: f64,
    state: StateBytes,
    dims: LayerDims,
    rp_first: RecomputePlan,
    rp_mid: RecomputePlan,
    rp_last: RecomputePlan,
    /// One layer's activations with nothing recomputed (what the recompute policy decides on).
    act: perfcast_core::parallel::LayerActivations,
}

/// A recompute plan before a policy has decided (the fast path sets it per variant).
const NO_RECOMPUTE_YET: RecomputePlan = RecomputePlan {
    full_layers: 0.0,
    attention_layers: 0.0,
    kept: Bytes::ZERO,
    working: Bytes::ZERO,
};

/// Micro-batches (whole-stage units) whose activations stage `idx` holds at its peak, each
/// chunk weighted by its layers (the schedule's `peak_layers_held` over the stage's layers).
/// The short chunks of an uneven split (`stage_layers`) are the
/// first stage's first chunks and the last stage's last ones (Llama 3's embedding-only and
/// head-only chunks); with equal chunks this is the schedule's `in_flight`.
fn layer_weighted_in_flight(
    p: &Prepared,
    input: &ScheduleInput,
    idx: u32,
    vpp: u32,
    last: u32,
) -> f64 {
    let n = if idx == 0 {
        p.n_first
    } else if idx == last {
        p.n_last
    } else {
        p.n_mid
    };
    if vpp <= 1 || n == 0 || n == p.n_mid {
        return p.sched.in_flight(input, idx);
    }
    let per = p.n_mid / vpp as u64;
    let deficit = p.n_mid - n;
    let chunk_layers = |c: u32| {
        // Chunks counted from the stage's short end.
        let from_end = if idx == 0 { c } else { vpp - 1 - c } as u64;
        (per - deficit.saturating_sub(from_end * per).min(per)) as f64
    };
    p.sched.peak_layers_held(input, idx, &chunk_layers) / n as f64
}

/// The plugin named `name` in `list` (a scan of the few resolved plugins), or an error on
/// `key` listing the registered names of `what`.
fn by_name<'a, T: ?Sized>(
    list: &'a [(String, Arc<T>)],
    name: &str,
    key: &str,
    what: &str,
) -> Result<&'a T, ModelError> {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p.as_ref())
        .ok_or_else(|| {
            let known: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
            ModelError::invalid(
                key,
                name,
                format!("unknown {what}; registered: {}", known.join(", ")),
            )
        })
}

/// Everything of a plan's timing that neither the recompute policy nor the schedule changes:
/// the layer and end programs, the collectives and their exposed parts, the optimizer step.
#[derive(Clone, Copy)]
struct GroupTimes {
    lt: ops::LayerTimes,
    ends: ops::EndTimes,
    comms: CommList,
    ctime: [f64; CommList::CAPACITY],
    fwd_ex: ClassComm,
    bwd_ex: ClassComm,
    rc_ex: ClassComm,
    emb_f_ex: ClassComm,
    emb_b_ex: ClassComm,
    head_f_ex: ClassComm,
    head_b_ex: ClassComm,
    p2p: f64,
    opt: f64,
}

/// The composed step of a plan.
#[derive(Clone, Copy)]
struct Composed {
    crit: StageTimes,
    input: ScheduleInput,
    sr: perfcast_core::parallel::ScheduleResult,
    step_ex: ClassComm,
    iteration: f64,
}

/// Exposed time per class of the collectives of `phase` (pooled per overlap window).
fn pool(
    comms: &CommList,
    ctime: &[f64; CommList::CAPACITY],
    phase: Phase,
    recompute_only: bool,
    windows: [f64; 5],
) -> ClassComm {
    let mut exposed = [0.0; 5];
    let mut total_w = [0.0; 5];
    let mut cap_w = [0.0f64; 5];
    let mut by = [[0.0; 5]; 5];
    for (i, c) in comms.iter().enumerate() {
        if c.phase != phase || (recompute_only && !c.with_recompute) {
            continue;
        }
        let k = c.class.index();
        match c.overlap {
            Overlap::Exposed => exposed[k] += ctime[i],
            Overlap::Behind { window, efficiency } => {
                let w = window.index();
                total_w[w] += ctime[i];
                cap_w[w] = cap_w[w].max(efficiency.clamp(0.0, 1.0) * windows[w]);
                by[w][k] += ctime[i];
            }
        }
    }
    for w in 0..5 {
        if total_w[w] > 0.0 {
            let ex = (total_w[w] - cap_w[w]).max(0.0);
            for k in 0..5 {
                exposed[k] += ex * by[w][k] / total_w[w];
            }
        }
    }
    exposed
}

impl Training {
    /// Resolve the default execution plugins from `registry`.
    pub fn new(model: ModelSpec, system: System, registry: &Registry) -> Result<Self, ModelError> {
        let comps = TrainingComponents::from_registry(registry)?;
        Self::with_components(model, system, comps, EngineParams::default())
    }

    /// Resolve the execution plugins from `registry` as `options` say.
    pub fn with_options(
        model: ModelSpec,
        system: System,
        registry: &Registry,
        options: &TrainingOptions,
    ) -> Result<Self, ModelError> {
        let comps = TrainingComponents::from_options(registry, options)?;
        Self::with_components(model, system, comps, options.engine.clone())
    }

    /// Use explicit execution plugins and engine parameters.
    pub fn with_components(
        model: ModelSpec,
        system: System,
        comps: TrainingComponents,
        params: EngineParams,
    ) -> Result<Self, ModelError> {
        model.validate()?;
        // Parameter counts are u64 in the core: refuse sizes whose count would overflow.
        let (l, h, f, v) = (
            model.layers as u128,
            model.hidden as u128,
            model.ffn_hidden as u128,
            model.vocab as u128,
        );
        let q = (model.heads as u128) * (model.head_dim() as u128);
        let per_layer = h * (q + 2 * (model.kv_heads() as u128) * (model.head_dim() as u128))
            + q * h
            + 3 * h * f
            + 8 * h;
        let bound = l * per_layer + 2 * v * h + (model.seq_len as u128) * h;
        if bound >= 1u128 << 60 {
            return Err(ModelError::invalid(
                "model.hidden",
                model.hidden,
                format!("the model's parameter count (~{bound}) is beyond 2^60"),
            ));
        }
        if model.moe.is_some() {
            return Err(ModelError::invalid(
                "model.moe",
                "set",
                "mixture-of-experts training is not modelled yet (dense models only)",
            ));
        }
        if system.devices == 0 {
            return Err(ModelError::invalid(
                "system.devices",
                0,
                "must be a positive integer",
            ));
        }
        if !(params.runtime_reserve_gib.is_finite() && params.runtime_reserve_gib >= 0.0) {
            return Err(ModelError::invalid(
                "engine.runtime_reserve_gib",
                params.runtime_reserve_gib,
                "must be a finite number >= 0",
            ));
        }
        let capacity = system
            .memory
            .device()
            .map(|t| t.capacity())
            .ok_or_else(|| {
                ModelError::invalid(
                    "system.memory",
                    format!("{:?}", system.memory),
                    "needs a device-level memory tier (e.g. HBM)",
                )
            })?;
        if !(capacity.0.is_finite() && capacity.0 > 0.0) {
            return Err(ModelError::invalid(
                "system.memory device capacity",
                capacity.0,
                "must be finite and > 0",
            ));
        }
        if system.network.is_empty() && system.devices > 1 {
            return Err(ModelError::invalid(
                "system.network",
                "[]",
                "a system of more than one device needs at least one network level",
            ));
        }
        let network = Network::new(&system.network)?;
        if comps.strategies.is_empty() {
            return Err(ModelError::invalid(
                "parallel strategies",
                "[]",
                "at least one strategy is needed",
            ));
        }
        Ok(Training {
            model,
            system,
            network,
            params,
            comps,
            capacity,
        })
    }

    pub fn model(&self) -> &ModelSpec {
        &self.model
    }
    pub fn system(&self) -> &System {
        &self.system
    }
    pub fn params(&self) -> &EngineParams {
        &self.params
    }

    fn recompute_policy(&self, name: &str) -> Result<&dyn RecomputePolicy, ModelError> {
        by_name(
            &self.comps.recompute,
            name,
            "plan.recompute",
            "recompute policy",
        )
    }

    fn schedule(&self, name: &str) -> Result<&dyn PipelineSchedule, ModelError> {
        by_name(
            &self.comps.schedules,
            name,
            "plan.schedule",
            "pipeline schedule",
        )
    }

    fn check_plan(&self, plan: &TrainingPlan) -> Result<(), ModelError> {
        positive("plan.tp", plan.tp)?;
        positive("plan.pp", plan.pp)?;
        positive("plan.dp", plan.dp)?;
        positive("plan.cp", plan.cp)?;
        positive("plan.ep", plan.ep)?;
        positive("plan.vpp", plan.vpp)?;
        positive("plan.micro_batch", plan.micro_batch)?;
        positive("plan.global_batch", plan.global_batch)?;
        if plan.ep != 1 {
            return Err(ModelError::invalid(
                "plan.ep",
                plan.ep,
                "must be 1: expert parallelism needs a mixture-of-experts model",
            ));
        }
        if !matches!(plan.precision, DType::Bf16 | DType::Fp16 | DType::Fp8) {
            return Err(ModelError::invalid(
                "plan.precision",
                plan.precision,
                "must be bf16, fp16 or fp8",
            ));
        }
        let unit = self.system.compute.as_ref();
        if unit.peak(Engine::Matrix, plan.precision).is_none() {
            let have: Vec<&str> = [DType::Bf16, DType::Fp16, DType::Fp8]
                .into_iter()
                .filter(|d| unit.peak(Engine::Matrix, *d).is_some())
                .map(|d| d.name())
                .collect();
            return Err(ModelError::invalid(
                "plan.precision",
                plan.precision,
                format!(
                    "device `{}` has no matrix-engine peak for it; it has: {}",
                    unit.kind(),
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
        }
        if plan.devices() != self.system.devices as u64 {
            return Err(ModelError::invalid(
                "plan.tp*pp*dp*cp",
                format!(
                    "{}x{}x{}x{} = {}",
                    plan.tp,
                    plan.pp,
                    plan.dp,
                    plan.cp,
                    plan.devices()
                ),
                format!("must equal the system's devices = {}", self.system.devices),
            ));
        }
        Ok(())
    }

    /// Validate `plan` and work out everything that does not need timing.
    fn prepare(&self, plan: &TrainingPlan) -> Result<Prepared<'_>, ModelError> {
        self.check_plan(plan)?;
        let shape = plan.shape();
        for s in &self.comps.strategies {
            s.validate(&self.model, &shape)?;
        }
        let policy = self.recompute_policy(&plan.recompute)?;
        let sched = self.schedule(plan.schedule_name())?;
        let mut p = self.prepare_checked(plan, sched, true)?;
        self.set_recompute(&mut p, policy, plan.recompute_layers, &plan.recompute)?;
        Ok(p)
    }

    /// [`Training::prepare`] after the plan's own checks and the strategies' validation, with
    /// the schedule given and no recompute decided yet.
    fn prepare_checked<'a>(
        &'a self,
        plan: &TrainingPlan,
        sched: &'a dyn PipelineSchedule,
        validate_schedule: bool,
    ) -> Result<Prepared<'a>, ModelError> {
        let m = &self.model;
        let shape = plan.shape();
        if validate_schedule {
            sched.validate(&shape)?;
        }

        let mut split = LayerSplit::default();
        let mut ssplit = StateSplit::default();
        for s in &self.comps.strategies {
            s.split_layer(&shape, &mut split);
            s.split_state(&shape, &mut ssplit);
        }
        let t = split.weights.max(1) as u64;
        let cpd = split.tokens.max(1) as u64;
        let ps = split.pointwise.max(1) as u64;
        let (b, s, h) = (plan.micro_batch as u64, m.seq_len, m.hidden);
        if !s.is_multiple_of(cpd) || !m.heads.is_multiple_of(t) {
            return Err(ModelError::invalid(
                "plan",
                format!("tokens split {cpd}, weights split {t}"),
                "the strategies' splits must divide model.seq_len and model.heads",
            ));
        }
        // The largest tensor a device touches (logits, attention scores, MLP activations) must
        // count its elements exactly in u64 and f64: below 2^53.
        let widest = [
            m.vocab,
            m.ffn_hidden * m.ffn_act.matrices(),
            h,
            m.heads.saturating_mul(s),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let largest = (b as u128) * (s as u128) * (widest as u128);
        if largest >= 1u128 << 53 {
            return Err(ModelError::invalid(
                "plan.micro_batch",
                plan.micro_batch,
                format!(
                    "micro_batch x seq_len x widest tensor dimension = {largest} elements is \
                     beyond what any device holds (limit 2^53)"
                ),
            ));
        }
        let precision = plan.precision;
        let fp8 = precision == DType::Fp8;
        let act_dtype = if fp8 { DType::Bf16 } else { precision };
        let e = act_dtype.bytes();
        let dropout = plan.dropout.unwrap_or(m.ffn_act == FfnAct::Gelu);
        let kv = m.kv_heads();
        let ls = ops::LayerShape {
            b,
            sq: s / cpd,
            s,
            h,
            a_dev: m.heads / t,
            kv_dev: (kv / t).max(1),
            d: m.head_dim(),
            f_dev: m.ffn_hidden / t,
            mat: m.ffn_act.matrices(),
            ps,
            vocab_dev: m.vocab.div_ceil(t),
            gemm_dtype: precision,
            act_dtype,
            fp32_grads: plan.fp32_grad_accum,
            dropout,
            norm: m.norm(),
            rope: m.position() == PositionKind::Rope,
            learned_positions: m.position() == PositionKind::Learned,
            swiglu: m.ffn_act == FfnAct::Swiglu,
            attention: plan.attention,
        };
        // Parameters on one device.
        let tf = t as f64;
        let hf = h as f64;
        let norm_params = match m.norm() {
            NormKind::LayerNorm => 2.0 * hf,
            NormKind::RmsNorm => hf,
        };
        let bias_params = if m.bias() {
            (m.q_width() + 2 * m.kv_width()) as f64 / tf
                + hf
                + (m.ffn_act.matrices() - 1) as f64 * m.ffn_hidden as f64 / tf
                + hf
        } else {
            0.0
        };
        let layer_dev =
            (m.attention_weights() + m.mlp_weights()) as f64 / tf + 2.0 * norm_params + bias_params;
        let (n_first, n_mid, n_last) =
            stage_layers(m.layers, plan.pp, plan.vpp).ok_or_else(|| {
                ModelError::invalid(
                    "plan.pp",
                    plan.pp,
                    format!(
                        "model.layers = {} cannot be split over plan.pp x plan.vpp = {} x {}",
                        m.layers, plan.pp, plan.vpp
                    ),
                )
            })?;
        let table = m.vocab as f64 * hf / tf;
        let emb_dev = table
            + match m.position() {
                PositionKind::Learned => s as f64 * hf,
                PositionKind::Rope => 0.0,
            };
        let head_dev = if !m.tied_embeddings || plan.pp > 1 {
            table
        } else {
            0.0
        };
        let single = plan.pp == 1;
        let first_params = n_first as f64 * layer_dev
            + emb_dev
            + if single { head_dev + norm_params } else { 0.0 };
        let mid_params = n_mid as f64 * layer_dev;
        let last_params =
            n_last as f64 * layer_dev + head_dev + norm_params + if single { emb_dev } else { 0.0 };
        let device_params = first_params.max(last_params).max(mid_params);
        let state = StateBytes::mixed_precision_adam(plan.fp32_grad_accum, fp8);
        let dims = LayerDims {
            micro_batch: b,
            seq_len: s,
            hidden: h,
            heads: m.heads,
            kv_heads: kv,
            head_dim: m.head_dim(),
            ffn_hidden: m.ffn_hidden,
            act_bytes: e,
            layer_params: layer_dev,
            device_params,
            grad_bytes: state.grads,
            weight_bytes: 2.0,
            embedding_params: table,
            tied_embeddings: m.tied_embeddings,
        };

        // Recompute.
        let act = ActivationShape {
            micro_batch: b as f64,
            seq_len: s as f64,
            hidden: hf,
            heads: m.heads as f64,
            kv_heads: kv as f64,
            head_dim: m.head_dim() as f64,
            ffn_hidden: m.ffn_hidden as f64,
            ffn_matrices: m.ffn_act.matrices() as f64,
            tp: tf,
            pointwise: ps as f64,
            cp: cpd as f64,
            elem: e,
            dropout,
            attention: plan.attention,
        }
        .layer();

        Ok(Prepared {
            shape,
            sched,
            ssplit,
            cpd,
            ps,
            b,
            s,
            precision,
            dropout,
            ls,
            hf,
            layer_dev,
            n_first,
            n_mid,
            n_last,
            single,
            first_params,
            mid_params,
            last_params,
            device_params,
            state,
            dims,
            rp_first: NO_RECOMPUTE_YET,
            rp_mid: NO_RECOMPUTE_YET,
            rp_last: NO_RECOMPUTE_YET,
            act,
        })
    }

    /// Let `policy` decide the recompute plan of every stage of `p`.
    fn set_recompute(
        &self,
        p: &mut Prepared,
        policy: &dyn RecomputePolicy,
        recompute_layers: Option<u32>,
        name: &str,
    ) -> Result<(), ModelError> {
        let act = p.act;
        let recompute_plan = |n: u64| -> Result<RecomputePlan, ModelError> {
            let n32 = u32::try_from(n).unwrap_or(u32::MAX);
            let rl = recompute_layers.map(|r| r.min(n32.max(1)));
            let rp = policy.plan(&act, n32, rl)?;
            let nf = n as f64;
            if !(rp.full_layers >= 0.0
                && rp.full_layers <= nf
                && rp.attention_layers >= 0.0
                && rp.attention_layers <= nf
                && rp.kept.0.is_finite()
                && rp.kept.0 >= 0.0
                && rp.working.0.is_finite()
                && rp.working.0 >= 0.0)
            {
                return Err(ModelError::invalid(
                    "plan.recompute",
                    name,
                    format!("the policy returned an inconsistent plan for {n} layers: {rp:?}"),
                ));
            }
            Ok(rp)
        };
        p.rp_first = recompute_plan(p.n_first)?;
        p.rp_mid = recompute_plan(p.n_mid)?;
        p.rp_last = recompute_plan(p.n_last)?;
        Ok(())
    }

    /// Memory of pipeline stage `idx` of a prepared plan.
    fn stage_memory(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        input: &ScheduleInput,
        idx: u32,
    ) -> StageMemory {
        let last = plan.pp.saturating_sub(1);
        let with_emb = idx == 0;
        let with_head = idx == last;
        let (params, rp) = if idx == 0 {
            (p.first_params, &p.rp_first)
        } else if idx == last {
            (p.last_params, &p.rp_last)
        } else {
            (p.mid_params, &p.rp_mid)
        };
        let tok = (p.b * p.s / p.cpd) as f64;
        let reserved = Bytes::from_gib(self.params.runtime_reserve_gib);
        let in_flight = layer_weighted_in_flight(p, input, idx, plan.vpp, last);
        let mut per_mb = rp.kept.0;
        if with_emb && p.dropout {
            // Input-embedding dropout mask.
            per_mb += tok * p.hf / p.ps as f64;
        }
        let mut temp = rp.working.0;
        if with_head {
            // fp32 logits of the loss (Korthikanti 2022 §4.1: 4sbV/t).
            temp += 4.0 * tok * p.ls.vocab_dev as f64;
        }
        if plan.cp > 1 && plan.cp_comm == CpComm::AllGather {
            // All-gather context parallelism: the whole sequence's K and V, and in the
            // backward their gradients (before the reduce-scatter), of one layer.
            let ls = &p.ls;
            let kv = 2.0 * (ls.b * ls.s * ls.kv_dev * ls.d) as f64 * p.dims.act_bytes;
            temp += 2.0 * kv;
        }
        if plan.zero_stage >= 3 && p.ssplit.weights > 1 {
            // ZeRO-3: the gathered weights of the current and the prefetched layer, and the
            // gathered embedding table / LM head on their stages (one table when tied on a
            // single stage).
            let tables = match (with_emb, with_head) {
                (true, true) if p.dims.tied_embeddings => 1.0,
                (e, h) => e as u8 as f64 + h as u8 as f64,
            };
            temp += (2.0 * p.layer_dev + tables * p.dims.embedding_params) * p.dims.weight_bytes;
        }
        let st = &p.state;
        let weights = params * st.weights / p.ssplit.weights.max(1) as f64;
        let grads = params * st.grads / p.ssplit.grads.max(1) as f64;
        let optimizer = params * st.optimizer / p.ssplit.optimizer.max(1) as f64;
        let activations = in_flight * per_mb;
        let total = weights + grads + optimizer + activations + temp + reserved.0;
        StageMemory {
            stage: idx,
            in_flight,
            weights: Bytes(weights),
            grads: Bytes(grads),
            optimizer: Bytes(optimizer),
            activations: Bytes(activations),
            temp: Bytes(temp),
            reserved,
            total: Bytes(total),
        }
    }

    /// Memory per stage of a prepared plan: the first, the second (the busiest middle stage:
    /// under every built-in schedule a middle stage holds no more than stage 1) and the last.
    fn memory_report(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        input: &ScheduleInput,
    ) -> MemoryReport {
        let first_mem = self.stage_memory(plan, p, input, 0);
        let last_mem = self.stage_memory(plan, p, input, plan.pp - 1);
        let second_mem = if plan.pp > 2 {
            Some(self.stage_memory(plan, p, input, 1))
        } else {
            None
        };
        let mut peak = first_mem.total.max(last_mem.total);
        if let Some(sm) = &second_mem {
            peak = peak.max(sm.total);
        }
        let fits = peak.0 <= self.capacity.0;
        MemoryReport {
            first_stage: first_mem,
            second_stage: second_mem,
            last_stage: last_mem,
            peak,
            capacity: self.capacity,
            fits,
            shortfall: Bytes((peak.0 - self.capacity.0).max(0.0)),
        }
    }

    /// Memory of every pipeline stage's device under `plan` (allocates; for reports).
    pub fn memory_per_stage(&self, plan: &TrainingPlan) -> Result<Vec<StageMemory>, ModelError> {
        let p = self.prepare(plan)?;
        let input = Self::memory_input(plan, &p);
        Ok((0..plan.pp)
            .map(|i| self.stage_memory(plan, &p, &input, i))
            .collect())
    }

    fn memory_input(plan: &TrainingPlan, p: &Prepared) -> ScheduleInput {
        ScheduleInput {
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: p.shape.micro_batches(),
            forward: Seconds::ZERO,
            backward: Seconds::ZERO,
            p2p: Seconds::ZERO,
        }
    }

    /// Every compute op of one device's program under `plan`, timed: one layer forward and
    /// backward (one micro-batch), the embedding and the LM head with the loss (one
    /// micro-batch), and the optimizer step. For reports that show what bounds each op; not
    /// for the hot path (it allocates).
    pub fn op_breakdown(&self, plan: &TrainingPlan) -> Result<Vec<OpLine>, ModelError> {
        let p = self.prepare(plan)?;
        let trace = std::cell::RefCell::new(Vec::with_capacity(64));
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: Some(&trace),
            part: std::cell::Cell::new(""),
        };
        ops::layer(&timer, &p.ls)?;
        ops::ends(&timer, &p.ls)?;
        ops::optimizer(
            &timer,
            p.device_params / p.ssplit.optimizer.max(1) as f64,
            p.state.grads,
        )?;
        Ok(trace.into_inner())
    }

    /// Memory per device of `plan` without timing it (cheap: for pruning plans that cannot
    /// fit before they are evaluated). Same numbers as `evaluate(plan)?.memory`.
    pub fn memory(&self, plan: &TrainingPlan) -> Result<MemoryReport, ModelError> {
        let p = self.prepare(plan)?;
        let input = Self::memory_input(plan, &p);
        Ok(self.memory_report(plan, &p, &input))
    }

    /// Time the layer program, the ends and every collective of a prepared plan (what its
    /// recompute and schedule variants share).
    fn group_times(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        lt: ops::LayerTimes,
        ends: ops::EndTimes,
        placement: &Placement,
    ) -> Result<GroupTimes, ModelError> {
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: None,
            part: std::cell::Cell::new(""),
        };
        let mut comms = CommList::default();
        for st in &self.comps.strategies {
            st.comms(&p.shape, &p.dims, &mut comms)?;
        }
        let mesh: Mesh = placement.mesh(plan.tp, plan.cp, plan.pp, plan.dp);
        let mut ctime = [0.0f64; CommList::CAPACITY];
        for (i, c) in comms.iter().enumerate() {
            let group = placement.map(c.group);
            let tt = self.network.time(&mesh, group, c.kind, c.bytes)?.0 * c.count;
            if !(tt.is_finite() && tt >= 0.0) {
                return Err(ModelError::NonFinite {
                    what: format!("{} {} time", c.class.name(), c.kind.name()),
                    value: tt,
                });
            }
            ctime[i] = tt;
        }
        let layer_windows = |p: &PassTimes| [p.gemm, p.attention, p.total, 0.0, 0.0];
        let none = [0.0; 5];
        let opt = ops::optimizer(
            &timer,
            p.device_params / p.ssplit.optimizer.max(1) as f64,
            p.state.grads,
        )?;
        Ok(GroupTimes {
            fwd_ex: pool(
                &comms,
                &ctime,
                Phase::Forward,
                false,
                layer_windows(&lt.fwd),
            ),
            bwd_ex: pool(
                &comms,
                &ctime,
                Phase::Backward,
                false,
                layer_windows(&lt.bwd),
            ),
            rc_ex: pool(&comms, &ctime, Phase::Forward, true, layer_windows(&lt.fwd)),
            emb_f_ex: pool(&comms, &ctime, Phase::EmbeddingForward, false, none),
            emb_b_ex: pool(&comms, &ctime, Phase::EmbeddingBackward, false, none),
            head_f_ex: pool(&comms, &ctime, Phase::HeadForward, false, none),
            head_b_ex: pool(&comms, &ctime, Phase::HeadBackward, false, none),
            p2p: sum(&pool(
                &comms,
                &ctime,
                Phase::Boundary,
                false,
                layer_windows(&lt.fwd),
            )),
            lt,
            ends,
            comms,
            ctime,
            opt,
        })
    }

    /// The layer and end programs of a prepared plan, timed.
    fn layer_times(&self, p: &Prepared) -> Result<(ops::LayerTimes, ops::EndTimes), ModelError> {
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: None,
            part: std::cell::Cell::new(""),
        };
        Ok((ops::layer(&timer, &p.ls)?, ops::ends(&timer, &p.ls)?))
    }

    /// Compose the stages of a prepared plan (its recompute decided) over the schedule.
    fn compose(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        g: &GroupTimes,
    ) -> Result<Composed, ModelError> {
        let lt = &g.lt;
        let ends = &g.ends;
        let (fwd_ex, bwd_ex, rc_ex) = (g.fwd_ex, g.bwd_ex, g.rc_ex);
        // Per-micro-batch stage times.
        let stage = |n: u64, rp: &RecomputePlan, with_emb: bool, with_head: bool| {
            let nf = n as f64;
            let mut st = StageTimes {
                layers: nf,
                rc_compute: rp.full_layers * lt.fwd.total
                    + rp.attention_layers * lt.attention_core_fwd,
                rc_comm: rp.full_layers * sum(&rc_ex),
                ..StageTimes::default()
            };
            st.compute.add_scaled(&lt.fwd.classes, nf + rp.full_layers);
            st.compute.add_scaled(&lt.bwd.classes, nf);
            st.compute.0[OpClass::Attention as usize] +=
                rp.attention_layers * lt.attention_core_fwd;
            for k in 0..5 {
                st.comm[k] = nf * (fwd_ex[k] + bwd_ex[k]) + rp.full_layers * rc_ex[k];
            }
            st.fwd = nf * (lt.fwd.total + sum(&fwd_ex));
            st.bwd = nf * (lt.bwd.total + sum(&bwd_ex)) + st.rc_compute + st.rc_comm;
            let mut add = |p: &PassTimes, ex: &ClassComm, fwd: bool| {
                let x = p.total + sum(ex);
                if fwd {
                    st.fwd += x;
                } else {
                    st.bwd += x;
                }
                st.compute.add_scaled(&p.classes, 1.0);
                for (c, e) in st.comm.iter_mut().zip(ex) {
                    *c += e;
                }
            };
            if with_emb {
                add(&ends.embedding_fwd, &g.emb_f_ex, true);
                add(&ends.embedding_bwd, &g.emb_b_ex, false);
            }
            if with_head {
                add(&ends.head_fwd, &g.head_f_ex, true);
                add(&ends.head_bwd, &g.head_b_ex, false);
            }
            st
        };
        let single = p.single;
        let first = stage(p.n_first, &p.rp_first, true, single);
        let last = stage(p.n_last, &p.rp_last, single, true);
        let mut crit = if first.fwd + first.bwd >= last.fwd + last.bwd {
            first
        } else {
            last
        };
        if plan.pp > 2 {
            let mid = stage(p.n_mid, &p.rp_mid, false, false);
            if mid.fwd + mid.bwd > crit.fwd + crit.bwd {
                crit = mid;
            }
        }

        let mb = p.shape.micro_batches();
        let input = ScheduleInput {
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: mb,
            forward: Seconds(crit.fwd),
            backward: Seconds(crit.bwd),
            p2p: Seconds(g.p2p),
        };
        let sr = p.sched.step(&input)?;
        for (what, v) in [
            ("schedule time", sr.time.0),
            ("schedule bubble", sr.bubble.0),
            ("schedule p2p", sr.p2p.0),
        ] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        let step_ex = pool(
            &g.comms,
            &g.ctime,
            Phase::Step,
            false,
            [0.0, 0.0, 0.0, crit.bwd, crit.fwd],
        );
        let iteration = sr.time.0 + sum(&step_ex) + g.opt;
        Ok(Composed {
            crit,
            input,
            sr,
            step_ex,
            iteration,
        })
    }

    /// Predict one training step under `plan`. A plan that does not fit in memory is still
    /// evaluated and reported with `memory.fits = false`.
    pub fn evaluate(&self, plan: &TrainingPlan) -> Result<TrainingReport, ModelError> {
        self.evaluate_placed(plan, &Placement::MEGATRON)
    }

    /// [`Training::evaluate`] with the mesh axes laid out on the devices in `placement`'s
    /// order (`evaluate` uses Megatron-LM's TP, CP, PP, DP).
    pub fn evaluate_placed(
        &self,
        plan: &TrainingPlan,
        placement: &Placement,
    ) -> Result<TrainingReport, ModelError> {
        let p = self.prepare(plan)?;
        let (lt, ends) = self.layer_times(&p)?;
        let g = self.group_times(plan, &p, lt, ends, placement)?;
        let Composed {
            crit,
            input,
            sr,
            step_ex,
            iteration,
        } = self.compose(plan, &p, &g)?;
        let Prepared {
            s,
            precision,
            single,
            rp_first,
            rp_mid,
            rp_last,
            ..
        } = p;
        let m = &self.model;
        let (fwd_ex, bwd_ex) = (g.fwd_ex, g.bwd_ex);
        let opt = g.opt;
        let mb = input.micro_batches;

        // Breakdown.
        let mbf = mb as f64;
        let mut compute = ClassTimes::default();
        compute.add_scaled(&crit.compute, mbf);
        let comm_of = |c: CommClass| mbf * crit.comm[c.index()] + step_ex[c.index()];
        let breakdown = TimeBreakdown {
            compute: ComputeBreakdown::from(&compute),
            recompute: Seconds(mbf * crit.rc_compute),
            tp_comm: Seconds(comm_of(CommClass::Tensor)),
            cp_comm: Seconds(comm_of(CommClass::Context)),
            pp_comm: Seconds(comm_of(CommClass::Pipeline) + sr.p2p.0),
            dp_comm: Seconds(comm_of(CommClass::Data)),
            zero_comm: Seconds(comm_of(CommClass::Zero)),
            bubble: sr.bubble,
            optimizer: Seconds(opt),
        };

        let memory = self.memory_report(plan, &p, &input);
        let fits = memory.fits;

        // FLOPs and utilisation.
        // Layers recomputed over the whole pipeline.
        let (full, attn) = if single {
            (rp_first.full_layers, rp_first.attention_layers)
        } else {
            let mids = (plan.pp - 2) as f64;
            (
                rp_first.full_layers + mids * rp_mid.full_layers + rp_last.full_layers,
                rp_first.attention_layers
                    + mids * rp_mid.attention_layers
                    + rp_last.attention_layers,
            )
        };
        let lf = m.layers as f64;
        let fl = flops::step_flops(m, plan.global_batch as f64, full / lf, attn / lf);
        let peak_rate = self
            .system
            .compute
            .peak(Engine::Matrix, precision)
            .ok_or_else(|| ModelError::UnsupportedDType {
                device: self.system.compute.kind().to_string(),
                engine: "matrix".to_string(),
                dtype: precision.name().to_string(),
            })?;
        let n = self.system.devices as f64;
        let tokens = plan.global_batch as f64 * s as f64;
        let per_gpu = |f: f64| f / (iteration * n);
        let mfu = per_gpu(fl.model) / peak_rate.0;
        let hfu = per_gpu(fl.hardware) / peak_rate.0;

        // Bottleneck.
        let c = &breakdown.compute;
        let matrix = c.gemm + c.attention;
        let vector = c.total() - matrix;
        let candidates = [
            (Bottleneck::MatrixCompute, matrix),
            (Bottleneck::VectorOps, vector),
            (Bottleneck::TensorComm, breakdown.tp_comm.0),
            (Bottleneck::ContextComm, breakdown.cp_comm.0),
            (Bottleneck::PipelineComm, breakdown.pp_comm.0),
            (Bottleneck::PipelineBubble, breakdown.bubble.0),
            (Bottleneck::DataComm, breakdown.dp_comm.0),
            (Bottleneck::ZeroComm, breakdown.zero_comm.0),
            (Bottleneck::Optimizer, breakdown.optimizer.0),
        ];
        let mut bottleneck = candidates[0];
        for cand in candidates {
            if cand.1 > bottleneck.1 {
                bottleneck = cand;
            }
        }

        let rc_avg = (crit.rc_compute + crit.rc_comm) / crit.layers.max(1.0);
        let report = TrainingReport {
            iteration_time: Seconds(iteration),
            devices: self.system.devices,
            micro_batches: mb,
            tokens_per_iteration: tokens,
            tokens_per_s: tokens / iteration,
            tokens_per_s_per_gpu: tokens / iteration / n,
            model_flops: FlopCount(fl.model),
            hardware_flops: FlopCount(fl.hardware),
            tflops_per_gpu_model: per_gpu(fl.model) / 1e12,
            tflops_per_gpu_hardware: per_gpu(fl.hardware) / 1e12,
            peak_tflops: peak_rate.tflops(),
            mfu,
            hfu,
            breakdown,
            layer: LayerReport {
                forward: Seconds(lt.fwd.total + sum(&fwd_ex)),
                backward: Seconds(lt.bwd.total + sum(&bwd_ex) + rc_avg),
                forward_compute: Seconds(lt.fwd.total),
                backward_compute: Seconds(lt.bwd.total),
                recompute: Seconds(rc_avg),
            },
            memory,
            feasibility: if fits {
                Feasibility::Fits
            } else {
                Feasibility::ExceedsMemory
            },
            bottleneck: bottleneck.0,
        };
        report.check_finite()?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
