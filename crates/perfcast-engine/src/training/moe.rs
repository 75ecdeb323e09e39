//! Mixture-of-experts in the training step: the MoE layer's shape on one rank, where the
//! dense and the MoE layers (and the multi-token-prediction modules) sit on the pipeline
//! stages, the experts' parameters per stage, and the MoE layer's activations.
//!
//! Load on the slowest rank: every MoE layer waits for the rank that receives the most token
//! copies (its combine cannot finish earlier), so the experts' rows, the dispatch volume and
//! the activations are the busiest rank's. That is the mean (`tokens x top_k` per rank) times
//! the router's systematic imbalance (`MoeSpec::load_imbalance`) times the statistical excess
//! of a finite sample: with `n = tokens x top_k` copies spread at random over `ep` ranks, each
//! rank's count is binomial with mean `n` and variance `n (1 - 1/ep)`, and the largest of `ep`
//! such counts exceeds the mean by about `sqrt(2 ln ep)` standard deviations (the Gaussian
//! extreme-value bound, e.g. Cramér 1946 §28.6): a factor `1 + sqrt(2 ln(ep) (1 - 1/ep) / n)`,
//! 1.6% for DeepSeek-V3's 4096 tokens x 8 on EP 64, large for decode-sized batches. A
//! capacity factor caps it (tokens beyond an expert's capacity are dropped).

use super::activations::ActivationShape;
use super::modules::RecomputeModules;
use super::plan::TrainingPlan;
use super::shape::{self, MlaShape, MoeShape};
use super::Training;
use perfcast_core::parallel::{LayerActivations, LayerSplit, MoeDims};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{Bytes, Key, ModelError};

/// Layers of one pipeline stage by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct StageMix {
    pub(super) dense: f64,
    pub(super) moe: f64,
    /// Parameters of the routed experts on one device of the stage.
    pub(super) expert_params: f64,
}

impl StageMix {
    pub(super) fn layers(&self) -> f64 {
        self.dense + self.moe
    }
}

/// What a plan's MoE layers look like on one device.
#[derive(Clone, Copy)]
pub(super) struct MoePrep {
    /// The MoE layer's shape (the dense layer's is `Prepared::ls`).
    pub(super) ls: shape::LayerShape,
    /// One MoE layer's activations with nothing recomputed.
    pub(super) act: LayerActivations,
    pub(super) first: StageMix,
    pub(super) mid: StageMix,
    pub(super) last: StageMix,
    /// Extra LM heads and losses on the last stage (multi-token prediction).
    pub(super) mtp_heads: f64,
    /// Parameters of one MoE layer's routed experts on one device.
    pub(super) expert_layer_params: f64,
}

/// The slowest rank's load over the mean (module documentation).
pub fn load_factor(m: &perfcast_core::workload::MoeSpec, ep: u64, copies_per_rank: f64) -> f64 {
    let mut f = m.load_imbalance();
    if ep > 1 && copies_per_rank > 0.0 {
        let e = ep as f64;
        f *= 1.0 + (2.0 * e.ln() * (1.0 - 1.0 / e) / copies_per_rank).sqrt();
    }
    match m.capacity_factor {
        Some(c) => f.min(c.max(1e-9)),
        None => f,
    }
}

/// The latent attention of `m`, as the layer program sees it.
pub(super) fn mla_shape(m: &ModelSpec) -> Option<MlaShape> {
    m.mla.map(|l| MlaShape {
        q_rank: l.q_lora_rank,
        kv_rank: l.kv_lora_rank,
        nope: l.qk_nope_head_dim,
        rope: l.qk_rope_head_dim,
        v: l.v_head_dim,
    })
}

/// Leading dense layers and MoE layers of a stage of `n` layers that starts after `before`
/// layers (Megatron-Core places the first `dense_layers` as layers 0.., and of the rest every
/// `moe_layer_freq`-th as MoE).
fn mix_of(m: &ModelSpec, before: f64, n: f64) -> (f64, f64) {
    let Some(moe) = &m.moe else { return (n, 0.0) };
    let lead = moe.dense_layers as f64;
    let lead_here = (lead - before).clamp(0.0, n);
    let rest = n - lead_here;
    let moe_layers = rest / moe.moe_layer_freq.max(1) as f64;
    (n - moe_layers, moe_layers)
}

impl Training {
    /// The MoE layer's shape, the stages' layer mix and the experts' parameters of `plan`
    /// (`None` for a dense model without multi-token prediction).
    pub(super) fn prepare_moe(
        &self,
        plan: &TrainingPlan,
        split: &LayerSplit,
        ls: &shape::LayerShape,
        stage_layers: [u64; 3],
        act_shape: &ActivationShape,
    ) -> Result<Option<MoePrep>, ModelError> {
        let m = &self.model;
        if m.moe.is_none() && m.mtp_layers == 0 {
            return Ok(None);
        }
        let (mut mix, mtp) = stage_mixes(m, plan, stage_layers);
        let Some(spec) = &m.moe else {
            return Ok(Some(MoePrep {
                ls: *ls,
                act: act_shape.layer(),
                first: mix[0],
                mid: mix[1],
                last: mix[2],
                mtp_heads: mtp,
                expert_layer_params: 0.0,
            }));
        };
        let (ep, etp) = (
            split.experts.max(1) as u64,
            split.expert_weights.max(1) as u64,
        );
        if !spec.experts.is_multiple_of(ep) || !spec.expert_ffn_hidden.is_multiple_of(etp) {
            return Err(ModelError::invalid(
                Key::plan("ep"),
                format!("experts split {ep}, expert weights split {etp}"),
                "the strategies' expert splits must divide model.moe.experts and \
                 model.moe.expert_ffn_hidden",
            ));
        }
        let t = ls.tokens_per_rank();
        let copies = (t * spec.top_k) as f64;
        let gamma = load_factor(spec, ep, copies);
        let routed = (copies * gamma * etp as f64).ceil() as u64;
        let local = spec.experts / ep;
        let tp = split.weights.max(1) as u64;
        let shared = spec.shared_experts * spec.shared_ffn_hidden();
        let moe_ls = shape::LayerShape {
            moe: Some(MoeShape {
                tokens: t,
                top_k: spec.top_k,
                experts: spec.experts,
                local_experts: local,
                routed,
                rows_per_expert: routed.div_ceil(local),
                f_dev: spec.expert_ffn_hidden / etp,
                shared_f_dev: shared.div_ceil(tp),
                shared_tokens: ls.tokens_total(),
                fused_permute: plan.moe_dispatcher.fused_permute(),
            }),
            ..*ls
        };
        // Activations: the attention part as a dense layer's without its MLP, plus the
        // block's tensors on the busiest rank.
        let base = ActivationShape {
            ffn_hidden: 0.0,
            ..*act_shape
        }
        .layer();
        let e = act_shape.elem;
        let (h, r) = (m.hidden as f64, routed as f64);
        let f_dev = (spec.expert_ffn_hidden / etp) as f64;
        let mat = m.ffn_act.matrices() as f64;
        let tok = ls.tokens_total() as f64;
        let sf = shared.div_ceil(tp) as f64;
        // GEMM inputs kept narrower (`gemm_in`): the routed rows entering the experts, the
        // experts' and the shared experts' down-projection inputs.
        let narrow = e - act_shape.gemm_in;
        let routed_act = e * r * f_dev - narrow * r * f_dev;
        let shared_bytes = e * tok * mat * sf - narrow * tok * sf;
        let block =
            4.0 * (t * spec.experts) as f64 + e * r * (2.0 * h + mat * f_dev) + shared_bytes
                - narrow * r * (h + f_dev);
        // Module recompute drops the routed experts' activation outputs (`moe_act`) and the
        // shared experts' internals (`shared_experts`) with what `selective` drops.
        let dropped = act_shape.modules.map_or(0.0, |m| {
            let pick = |module, bytes: f64| if m.contains(module) { bytes } else { 0.0 };
            pick(RecomputeModules::MOE_ACT, routed_act)
                + pick(RecomputeModules::SHARED_EXPERTS, shared_bytes)
        });
        let act = LayerActivations {
            other: Bytes(base.other.0 + block - dropped),
            attention_core: Bytes(base.attention_core.0 + dropped),
            ..base
        };
        let expert_layer_params = local as f64 * m.expert_params() as f64 / etp as f64;
        for s in &mut mix {
            s.expert_params = s.moe * expert_layer_params;
        }
        Ok(Some(MoePrep {
            ls: moe_ls,
            act,
            first: mix[0],
            mid: mix[1],
            last: mix[2],
            mtp_heads: mtp,
            expert_layer_params,
        }))
    }
}

/// The dense and MoE layers (multi-token-prediction modules included) of the first, a middle
/// and the last stage, and the multi-token-prediction modules.
fn stage_mixes(m: &ModelSpec, plan: &TrainingPlan, layers: [u64; 3]) -> ([StageMix; 3], f64) {
    let [n1, n2, n3] = layers.map(|n| n as f64);
    let pp = plan.pp as f64;
    // Stage starts: the first stage, a middle one (stage 1), the last.
    let (d1, m1) = mix_of(m, 0.0, n1);
    let (d2, m2) = mix_of(m, n1, n2);
    let (d3, m3) = if plan.pp == 1 {
        (d1, m1)
    } else {
        mix_of(m, n1 + (pp - 2.0).max(0.0) * n2, n3)
    };
    let mtp = m.mtp_layers as f64;
    let mtp_moe = m.moe.is_some();
    let mut mix = [
        StageMix {
            dense: d1,
            moe: m1,
            expert_params: 0.0,
        },
        StageMix {
            dense: d2,
            moe: m2,
            expert_params: 0.0,
        },
        StageMix {
            dense: d3,
            moe: m3,
            expert_params: 0.0,
        },
    ];
    // The multi-token-prediction modules run after the last layer, on the last stage.
    let last = if plan.pp == 1 { 0 } else { 2 };
    if mtp_moe {
        mix[last].moe += mtp;
    } else {
        mix[last].dense += mtp;
    }
    if plan.pp == 1 {
        mix[2] = mix[0];
    }
    (mix, mtp)
}

/// The strategies' view of the MoE layers.
pub(super) fn moe_dims(
    m: &ModelSpec,
    mp: &MoePrep,
    act_bytes: f64,
    expert_params: f64,
) -> Option<MoeDims> {
    let spec = m.moe.as_ref()?;
    let shape = mp.ls.moe.as_ref()?;
    let etp = (spec.expert_ffn_hidden / shape.f_dev.max(1)).max(1) as f64;
    Some(MoeDims {
        experts: spec.experts,
        top_k: spec.top_k,
        expert_groups: spec.expert_groups.unwrap_or(0),
        group_top_k: spec.group_top_k.unwrap_or(0),
        tokens: shape.tokens as f64,
        routed: shape.routed as f64 / etp,
        dispatch_bytes: act_bytes,
        expert_layer_params: mp.expert_layer_params,
        expert_params,
    })
}
