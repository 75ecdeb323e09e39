//! A validated plan with everything that needs no timing worked out: the layer shape on one
//! device, the layers and parameters of each stage, the model state, the dimensions the
//! strategies see, the activations, and (set per variant) the recompute plan.

use super::activations::{ActivationShape, StateBytes};
use super::lora::{self, LoraShape};
use super::plan::TrainingPlan;
use super::{moe, shape, Training};
use perfcast_core::parallel::{
    stage_layers, LayerDims, LayerSplit, PipelineSchedule, PlanShape, RecomputePlan,
    RecomputePolicy, StateSplit,
};
use perfcast_core::workload::{FfnAct, ModelSpec, NormKind, PositionKind};
use perfcast_core::{Bytes, DType, Key, ModelError};

/// A validated plan with everything that needs no timing worked out.
#[derive(Clone, Copy)]
pub(super) struct Prepared<'a> {
    pub(super) shape: perfcast_core::parallel::PlanShape,
    pub(super) sched: &'a dyn PipelineSchedule,
    pub(super) ssplit: StateSplit,
    pub(super) cpd: u64,
    pub(super) ps: u64,
    pub(super) b: u64,
    pub(super) s: u64,
    pub(super) precision: DType,
    pub(super) dropout: bool,
    pub(super) ls: shape::LayerShape,
    pub(super) hf: f64,
    /// Layers and parameters of each stage on one device.
    pub(super) params: StageParams,
    pub(super) single: bool,
    pub(super) state: StateBytes,
    pub(super) dims: LayerDims,
    pub(super) rp_first: RecomputePlan,
    pub(super) rp_mid: RecomputePlan,
    pub(super) rp_last: RecomputePlan,
    /// One layer's activations with nothing recomputed (what the recompute policy decides on).
    pub(super) act: perfcast_core::parallel::LayerActivations,
    /// The MoE layers and the stages' layer mix (`None` for a dense model without
    /// multi-token prediction: every layer is `ls`).
    pub(super) moe: Option<moe::MoePrep>,
    /// The shape `act` was computed from.
    pub(super) act_shape: ActivationShape,
}

/// Whether the expert all-to-all hides behind another micro-batch's compute: the plan asks
/// for it (`plan.ep_comm_overlap`), or its schedule overlaps two micro-batches
/// ([`PipelineSchedule::overlaps_expert_comm`]) and the step has two to overlap.
pub(super) fn expert_overlap(
    plan: &TrainingPlan,
    shape: &perfcast_core::parallel::PlanShape,
    sched: &dyn PipelineSchedule,
) -> bool {
    plan.ep_comm_overlap || (sched.overlaps_expert_comm() && shape.micro_batches() >= 2)
}

/// A recompute plan before a policy has decided (the fast path sets it per variant).
pub(super) const NO_RECOMPUTE_YET: RecomputePlan = RecomputePlan {
    full_layers: 0.0,
    attention_layers: 0.0,
    kept: Bytes::ZERO,
    working: Bytes::ZERO,
};

impl Training {
    /// Validate `plan` and work out everything that does not need timing.
    pub(super) fn prepare(&self, plan: &TrainingPlan) -> Result<Prepared<'_>, ModelError> {
        self.check_plan(plan)?;
        let shape = self.shape(plan)?;
        self.comps
            .each_strategy(&shape, |s, view, _| s.validate(&self.model, view))?;
        let policy = self.recompute_policy(&plan.recompute)?;
        if let Some(m) = plan
            .recompute_modules
            .filter(|_| policy.kind() != "selective")
        {
            return Err(ModelError::invalid(
                Key::plan("recompute_modules"),
                m.names().join(", "),
                format!(
                    "lists what `selective` recompute reruns, but plan.recompute = \"{}\"",
                    plan.recompute
                ),
            ));
        }
        let sched = self.schedule(plan.schedule_name())?;
        sched.validate(&shape)?;
        let mut p = self.prepare_checked(plan, shape, sched)?;
        p.shape.ep_comm_overlap = expert_overlap(plan, &p.shape, sched);
        self.set_recompute(&mut p, policy, plan.recompute_layers, &plan.recompute)?;
        Ok(p)
    }

    /// [`Training::prepare`] after the plan's own checks, the strategies' and the schedule's
    /// validation (the fast path validates the schedule per variant), with no recompute
    /// decided yet.
    pub(super) fn prepare_checked<'a>(
        &'a self,
        plan: &TrainingPlan,
        shape: PlanShape,
        sched: &'a dyn PipelineSchedule,
    ) -> Result<Prepared<'a>, ModelError> {
        let m = &self.model;
        let mut split = LayerSplit::default();
        let mut ssplit = StateSplit::default();
        self.comps.each_strategy(&shape, |s, view, _| {
            s.split_layer(view, &mut split)?;
            s.split_state(view, &mut ssplit)
        })?;
        let t = split.weights.max(1) as u64;
        let cpd = split.tokens.max(1) as u64;
        let ps = split.pointwise.max(1) as u64;
        let (b, s, h) = (plan.micro_batch as u64, m.seq_len, m.hidden);
        if !s.is_multiple_of(cpd) || !m.heads.is_multiple_of(t) {
            return Err(ModelError::invalid(
                Key::plan(""),
                format!("tokens split {cpd}, weights split {t}"),
                "the strategies' splits must divide model.seq_len and model.heads",
            ));
        }
        check_tensor_sizes(m, plan)?;
        let ls = self.layer_shape(plan, t, cpd, ps, shape.micro_batches());
        let (precision, dropout, e) = (plan.precision, ls.dropout, ls.act_dtype.bytes());
        let mut params = stage_params(m, plan, t)?;
        let (tf, hf) = (t as f64, h as f64);
        let single = plan.pp == 1;
        let state = StateBytes::mixed_precision_adam(plan.fp32_grad_accum, plan.recipe().is_some());
        let mut dims = self.layer_dims(plan, &params, &state, e);
        // Recompute.
        // The GEMM inputs kept for the weight gradient: in the recipe's format where the
        // stack saves the quantised input, else as the activations.
        let gemm_in = match ls.cast {
            Some(_) if self.params.fp8_saved_inputs => {
                ls.gemm_dtype.bytes() + ls.scaling.scale_bytes_per_element()
            }
            _ => e,
        };
        let act_shape = activation_shape(m, &ls, t, cpd, gemm_in);
        let act = act_shape.layer();
        let moe = self.prepare_moe(
            plan,
            &split,
            &ls,
            [params.n_first, params.n_mid, params.n_last],
            &act_shape,
        )?;
        if let Some(mp) = &moe {
            params.apply_mix(m, mp, tf);
            dims.moe = moe::moe_dims(m, mp, e, params.expert_params);
        }
        if let Some(l) = &ls.lora {
            params.add_adapters(lora::layer_adapter_params(m, l), m.mtp_layers);
        }
        dims.device_params = params.device_params;
        dims.layer_params = params.mean_layer_dense;

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
            params,
            single,
            state,
            dims,
            rp_first: NO_RECOMPUTE_YET,
            rp_mid: NO_RECOMPUTE_YET,
            rp_last: NO_RECOMPUTE_YET,
            act,
            moe,
            act_shape,
        })
    }

    /// One layer's shape on one rank: the weights split `t` ways, the tokens `cpd` ways and
    /// the pointwise ops `ps` ways.
    fn layer_shape(
        &self,
        plan: &TrainingPlan,
        t: u64,
        cpd: u64,
        ps: u64,
        micro_batches: u32,
    ) -> shape::LayerShape {
        let m = &self.model;
        let recipe = plan.recipe();
        let precision = plan.precision;
        let act_dtype = if recipe.is_some() {
            DType::Bf16
        } else {
            precision
        };
        let mla = moe::mla_shape(m);
        let d = match &mla {
            // The attention op has one head width: the mean of Q/K's and V's carries the
            // same work (2·(d_qk + d_v) per score).
            Some(l) => (l.nope + l.rope + l.v).div_ceil(2),
            None => m.head_dim(),
        };
        let spans = m.layer_spans(0, m.layers);
        let share = |n: u64| n as f64 / m.layers.max(1) as f64;
        let s = m.seq_len;
        shape::LayerShape {
            b: plan.micro_batch as u64,
            sq: s / cpd,
            s,
            h: m.hidden,
            a_dev: m.heads / t,
            kv_dev: (m.kv_heads() / t).max(1),
            d,
            f_dev: m.ffn_hidden / t,
            mat: m.ffn_act.matrices(),
            ps,
            vocab_dev: m.vocab.div_ceil(t),
            gemm_dtype: precision,
            scaling: recipe.map_or(perfcast_core::GemmScaling::Tensor, |r| r.scaling()),
            cast: recipe.map(|r| self.params.recipe_costs(r)),
            act_dtype,
            fp32_grads: plan.fp32_grad_accum,
            dropout: plan.dropout.unwrap_or(m.ffn_act == FfnAct::Gelu),
            norm: m.norm(),
            rope: m.position() == PositionKind::Rope,
            learned_positions: m.position() == PositionKind::Learned,
            swiglu: m.ffn_act == FfnAct::Swiglu,
            attention: plan.attention,
            mla,
            moe: None,
            window: (spans.sliding > 0).then(|| (share(spans.sliding), spans.window)),
            chunk: (spans.chunked > 0).then(|| (share(spans.chunked), spans.chunk)),
            fused: self.params.fused,
            op_sac: self.params.selective_recompute == crate::software::SelectiveRecompute::OpSac
                && plan.recompute_modules.is_none(),
            modules: plan.recompute_modules,
            weight_casts: if self.params.fp8_weight_cache && recipe.is_some() {
                micro_batches.max(1) as u64
            } else {
                1
            },
            lora: self.adapters(plan).map(|(rank, targets)| LoraShape {
                rank: rank as u64,
                targets,
                split: t,
            }),
        }
    }

    /// The dense layer's dimensions for the strategies' memory and communication, with
    /// activations of `e` bytes per element.
    fn layer_dims(
        &self,
        plan: &TrainingPlan,
        params: &StageParams,
        state: &StateBytes,
        e: f64,
    ) -> LayerDims {
        let m = &self.model;
        let recipe = plan.recipe();
        LayerDims {
            micro_batch: plan.micro_batch as u64,
            seq_len: m.seq_len,
            hidden: m.hidden,
            heads: m.heads,
            kv_heads: m.kv_heads(),
            head_dim: m.head_dim(),
            ffn_hidden: m.ffn_hidden,
            act_bytes: e,
            gather_bytes: match recipe {
                Some(r) if r.per_tensor() => r.dtype().bytes(),
                _ => e,
            },
            layer_params: params.layer_dev,
            device_params: params.device_params,
            grad_bytes: state.grads,
            // FSDP/ZeRO gathers weights in fp8 where the stack casts the shards before the
            // gather (torchtitan `enable_fsdp_float8_all_gather`, Megatron-Core
            // `--fp8-param-gather`): per-tensor scales survive the gather.
            weight_bytes: match recipe {
                Some(r) if self.params.fp8_param_gather && r.per_tensor() => r.dtype().bytes(),
                _ => 2.0,
            },
            embedding_params: params.table,
            tied_embeddings: m.tied_embeddings,
            moe: None,
        }
    }

    /// Let `policy` decide the recompute plan of every stage of `p`.
    pub(super) fn set_recompute(
        &self,
        p: &mut Prepared,
        policy: &dyn RecomputePolicy,
        recompute_layers: Option<u32>,
        name: &str,
    ) -> Result<(), ModelError> {
        let stage_act = |mix: Option<moe::StageMix>| match (mix, &p.moe) {
            (Some(x), Some(mp)) if x.layers() > 0.0 => {
                let w = |a: Bytes, b: Bytes| Bytes((x.dense * a.0 + x.moe * b.0) / x.layers());
                perfcast_core::parallel::LayerActivations {
                    input: w(p.act.input, mp.act.input),
                    attention_core: w(p.act.attention_core, mp.act.attention_core),
                    other: w(p.act.other, mp.act.other),
                }
            }
            _ => p.act,
        };
        let mixes = p.moe.map(|mp| (mp.first, mp.mid, mp.last));
        let acts = (
            stage_act(mixes.map(|x| x.0)),
            stage_act(mixes.map(|x| x.1)),
            stage_act(mixes.map(|x| x.2)),
        );
        let op_sac = p.ls.op_sac && policy.kind() == "selective";
        // Per-op SAC's saved tensors are the dense layer's (an MoE layer's grouped-GEMM
        // outputs are not among torchtitan's saved ops: an approximation for MoE stages).
        let op_sac_kept = p.act_shape.op_sac_kept();
        let recompute_plan = |n: u64,
                              act: perfcast_core::parallel::LayerActivations|
         -> Result<RecomputePlan, ModelError> {
            let n32 = u32::try_from(n).unwrap_or(u32::MAX);
            let rl = recompute_layers.map(|r| r.min(n32.max(1)));
            let mut rp = policy.plan(&act, n32, rl)?;
            if op_sac {
                // Per-op SAC keeps what its policy saves; a rerun layer's activations are
                // live again during its backward.
                rp.kept = op_sac_kept * rp.attention_layers
                    + act.total() * (n as f64 - rp.attention_layers);
                rp.working = act.total();
            }
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
                    Key::plan("recompute"),
                    name,
                    format!("the policy returned an inconsistent plan for {n} layers: {rp:?}"),
                ));
            }
            Ok(rp)
        };
        let layers =
            |n: u64, mix: Option<moe::StageMix>| mix.map_or(n, |x| x.layers().round() as u64);
        p.rp_first = recompute_plan(layers(p.params.n_first, mixes.map(|x| x.0)), acts.0)?;
        p.rp_mid = recompute_plan(layers(p.params.n_mid, mixes.map(|x| x.1)), acts.1)?;
        p.rp_last = recompute_plan(layers(p.params.n_last, mixes.map(|x| x.2)), acts.2)?;
        Ok(())
    }
}

/// Parameters on one device of each pipeline stage (TP shards the matrices; the first stage
/// holds the embedding, the last the LM head and the final norm).
#[derive(Clone, Copy)]
pub(super) struct StageParams {
    /// One layer's parameters on one device.
    pub(super) layer_dev: f64,
    /// Layers of the first, a middle and the last stage.
    pub(super) n_first: u64,
    pub(super) n_mid: u64,
    pub(super) n_last: u64,
    /// Parameters on one device of the first, a middle and the last stage.
    pub(super) first_params: f64,
    pub(super) mid_params: f64,
    pub(super) last_params: f64,
    /// The stage with the most.
    pub(super) device_params: f64,
    /// The word-embedding table on one device.
    pub(super) table: f64,
    /// Routed-expert parameters on one device of the first, a middle and the last stage,
    /// and of the stage with the most (0 for dense models; sharded by the expert mesh, not
    /// by the dense state split).
    pub(super) first_expert: f64,
    pub(super) mid_expert: f64,
    pub(super) last_expert: f64,
    pub(super) expert_params: f64,
    /// Non-expert parameters of one layer on one device, averaged over the model's layers
    /// (`layer_dev` for dense models).
    pub(super) mean_layer_dense: f64,
    /// LoRA adapter parameters of one layer on one device (0: none; counted in the
    /// parameters above).
    pub(super) adapter_layer: f64,
}

impl StageParams {
    /// Add `a` adapter parameters to every layer and to each of the `mtp` multi-token
    /// prediction modules on the last stage (after [`StageParams::apply_mix`]: every layer,
    /// dense or MoE, has the attention projections adapters target).
    fn add_adapters(&mut self, a: f64, mtp: u64) {
        self.adapter_layer = a;
        self.layer_dev += a;
        self.mean_layer_dense += a;
        self.first_params += self.n_first as f64 * a;
        self.mid_params += self.n_mid as f64 * a;
        self.last_params += (self.n_last + mtp) as f64 * a;
        self.device_params = self.first_params.max(self.mid_params).max(self.last_params);
    }

    /// Layers of the stage with the most.
    pub(super) fn max_layers(&self) -> u64 {
        self.n_first.max(self.n_mid).max(self.n_last)
    }

    /// Parameters with gradients and optimizer state on one device of a stage of `n` layers
    /// holding `params` (and `experts` routed-expert parameters): all of them, or with frozen
    /// base weights the layers' adapters only.
    pub(super) fn trainable(&self, frozen: bool, n: u64, params: f64, experts: f64) -> (f64, f64) {
        if frozen {
            (n as f64 * self.adapter_layer, 0.0)
        } else {
            (params, experts)
        }
    }

    /// Re-count the stages' parameters for the mix of dense and MoE layers (and MTP modules)
    /// of `mp`: an MoE layer holds attention, the router and the shared experts (split by
    /// TP; the router replicated) and its share of the routed experts (`expert_*`).
    fn apply_mix(&mut self, m: &ModelSpec, mp: &moe::MoePrep, tf: f64) {
        let hf = m.hidden as f64;
        let norms = match m.norm() {
            NormKind::LayerNorm => 4.0 * hf,
            NormKind::RmsNorm => 2.0 * hf,
        } + m.mla.map_or(0.0, |l| l.norm_params() as f64);
        let router = match &m.moe {
            Some(s) => hf * s.experts as f64,
            None => 0.0,
        };
        let moe_dense = (m.attention_weights() as f64 + m.moe_dense_params() as f64 - router) / tf
            + router
            + norms;
        let mla_norms = m.mla.map_or(0.0, |l| l.norm_params() as f64);
        let dense = self.layer_dev + mla_norms;
        // The MTP modules' `2h -> h` projections and norms, on the last stage.
        let mtp = m.mtp_layers as f64 * (2.0 * hf * hf / tf + 2.0 * hf);
        let layers = |n: u64, x: &moe::StageMix| {
            x.dense * dense + x.moe * moe_dense - n as f64 * self.layer_dev
        };
        let single = self.n_first == self.n_last && self.first_params == self.last_params;
        self.first_params += layers(self.n_first, &mp.first);
        self.mid_params += layers(self.n_mid, &mp.mid);
        self.last_params += layers(self.n_last, &mp.last) + mtp;
        if single && mp.first == mp.last {
            self.first_params = self.last_params;
        }
        self.device_params = self.first_params.max(self.mid_params).max(self.last_params);
        self.first_expert = mp.first.expert_params;
        self.mid_expert = mp.mid.expert_params;
        self.last_expert = mp.last.expert_params;
        self.expert_params = self.first_expert.max(self.mid_expert).max(self.last_expert);
        let (nd, nm) = (m.dense_layers() as f64, m.moe_layers() as f64);
        self.mean_layer_dense = (nd * dense + nm * moe_dense) / (nd + nm).max(1.0);
    }
}

fn stage_params(m: &ModelSpec, plan: &TrainingPlan, t: u64) -> Result<StageParams, ModelError> {
    let tf = t as f64;
    let hf = m.hidden as f64;
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
    let (n_first, n_mid, n_last) = stage_layers(m.layers, plan.pp, plan.vpp).ok_or_else(|| {
        ModelError::invalid(
            Key::plan("pp"),
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
            // A learned table holds a row per position the model takes.
            PositionKind::Learned => m.context_limit() as f64 * hf,
            PositionKind::Rope => 0.0,
        };
    let head_dev = if !m.tied_embeddings || plan.pp > 1 {
        table
    } else {
        0.0
    };
    let single = plan.pp == 1;
    let first_params =
        n_first as f64 * layer_dev + emb_dev + if single { head_dev + norm_params } else { 0.0 };
    let mid_params = n_mid as f64 * layer_dev;
    let last_params =
        n_last as f64 * layer_dev + head_dev + norm_params + if single { emb_dev } else { 0.0 };
    let device_params = first_params.max(last_params).max(mid_params);
    Ok(StageParams {
        layer_dev,
        n_first,
        n_mid,
        n_last,
        first_params,
        mid_params,
        last_params,
        device_params,
        table,
        first_expert: 0.0,
        mid_expert: 0.0,
        last_expert: 0.0,
        expert_params: 0.0,
        mean_layer_dense: layer_dev,
        adapter_layer: 0.0,
    })
}

/// The activations' shape for the recompute policies: layer `ls` with its weights split `t`
/// ways and its tokens `cpd` ways.
fn activation_shape(
    m: &ModelSpec,
    ls: &shape::LayerShape,
    t: u64,
    cpd: u64,
    gemm_in: f64,
) -> ActivationShape {
    ActivationShape {
        micro_batch: ls.b as f64,
        seq_len: ls.s as f64,
        hidden: ls.h as f64,
        heads: m.heads as f64,
        kv_heads: m.kv_heads() as f64,
        head_dim: m.head_dim() as f64,
        ffn_hidden: m.ffn_hidden as f64,
        ffn_matrices: ls.mat as f64,
        tp: t as f64,
        pointwise: ls.ps as f64,
        cp: cpd as f64,
        elem: ls.act_dtype.bytes(),
        gemm_in,
        dropout: ls.dropout,
        attention: ls.attention,
        mla: ls.mla,
        modules: ls.modules,
    }
}

/// The largest tensor a device touches (logits, attention scores, MLP activations) must count
/// its elements exactly in u64 and f64: below 2^53.
fn check_tensor_sizes(m: &ModelSpec, plan: &TrainingPlan) -> Result<(), ModelError> {
    let (b, s, h) = (plan.micro_batch as u64, m.seq_len, m.hidden);
    let routed = m.moe.map_or(0, |x| {
        x.top_k
            .saturating_mul(x.expert_ffn_hidden.max(m.hidden))
            .saturating_mul(m.ffn_act.matrices())
    });
    let widest = [
        m.vocab,
        m.ffn_hidden * m.ffn_act.matrices(),
        h,
        m.heads.saturating_mul(s),
        routed,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    let largest = (b as u128) * (s as u128) * (widest as u128);
    if largest >= 1u128 << 53 {
        return Err(ModelError::invalid(
            Key::plan("micro_batch"),
            plan.micro_batch,
            format!(
                "micro_batch x seq_len x widest tensor dimension = {largest} elements is \
             beyond what any device holds (limit 2^53)"
            ),
        ));
    }
    Ok(())
}
