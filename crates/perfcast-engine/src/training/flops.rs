//! FLOP accounting per optimizer step (validation SCHEMA "FLOP conventions"; Narayanan et al.
//! 2021 eq. 3; Korthikanti et al. 2022 §6 for model FLOPs).
//!
//! Per token of a training step:
//! * model FLOPs = `6·P_mm + 6·L·s·heads·(d_qk + d_v)` (the attention term non-causal): for a
//!   GPT model `72·L·h² + 12·L·s·h + 6·h·V`;
//! * hardware FLOPs add what recompute reruns: full recompute one more forward of each
//!   recomputed layer (`2·P_layer + 2·s·heads·(d_qk + d_v)`), selective the forward attention
//!   core (`2·s·heads·(d_qk + d_v)`); the logit layer is never recomputed;
//! * with frozen base weights and LoRA adapters of `P_a` parameters (`task = "lora"`): no
//!   weight-gradient GEMMs for the frozen ones, `4·P_mm + 6·P_a + 6·L·s·heads·(d_qk + d_v)`
//!   (validation SCHEMA: "LoRA with frozen base weights: ≈ `4·P_mm` + attention").

use super::modules::RecomputeModules;
use perfcast_core::workload::ModelSpec;

/// FLOPs of one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepFlops {
    pub model: f64,
    pub hardware: f64,
}

/// Forward attention-core FLOPs per token per layer: `2·s·heads·(d_qk + d_v)`.
pub fn attention_fwd_per_token(m: &ModelSpec) -> f64 {
    if m.mla.is_some() {
        return 2.0 * m.seq_len as f64 * m.heads as f64 * (m.qk_head_dim() + m.v_head_dim()) as f64;
    }
    2.0 * m.seq_len as f64 * m.heads as f64 * 2.0 * m.head_dim() as f64
}

/// Forward FLOPs per token per layer that `selective` recompute reruns, the mean over the
/// layers: the attention core, or with module recompute (`modules`) the modules' GEMMs:
/// `core_attn` the attention term, `mla_up_proj` the query and key/value up-projections,
/// `mlp` the dense layers' MLP, `shared_experts` the MoE layers' shared experts (norms and
/// activations are not matmuls).
pub fn selective_fwd_per_token(m: &ModelSpec, modules: Option<RecomputeModules>) -> f64 {
    let attn = attention_fwd_per_token(m);
    let Some(r) = modules else { return attn };
    let pick = |module, flops: f64| if r.contains(module) { flops } else { 0.0 };
    let layers = m.layers.max(1) as f64;
    let up = m.mla.map_or(0.0, |l| {
        let heads = m.heads as f64;
        let q = l.q_lora_rank as f64 * heads * (l.qk_nope_head_dim + l.qk_rope_head_dim) as f64;
        2.0 * (q + l.kv_lora_rank as f64 * heads * (l.qk_nope_head_dim + l.v_head_dim) as f64)
    });
    let mlp = 2.0 * m.mlp_weights() as f64 * m.dense_layers() as f64 / layers;
    let shared = m.moe.map_or(0.0, |x| {
        let w = x.shared_experts * m.ffn_act.matrices() * m.hidden * x.shared_ffn_hidden();
        2.0 * w as f64 * m.moe_layers() as f64 / layers
    });
    pick(RecomputeModules::CORE_ATTN, attn)
        + pick(RecomputeModules::MLA_UP_PROJ, up)
        + pick(RecomputeModules::MLP, mlp)
        + pick(RecomputeModules::SHARED_EXPERTS, shared)
}

/// Matmul weights one token passes through in one layer (an MoE model's: the mean over its
/// layers of the weights a token uses, `top_k` routed experts and the shared ones).
pub fn layer_matmul_params(m: &ModelSpec) -> f64 {
    if m.moe.is_some() {
        let per_token = m.matmul_params_per_token() - m.vocab * m.hidden;
        return per_token as f64 / m.layers as f64;
    }
    (m.attention_weights() + m.mlp_weights()) as f64
}

/// FLOPs of a step of `sequences` sequences, where `full_fraction` of the layers rerun their
/// forward and `selective_fraction` rerun what `selective` reruns under `modules`
/// ([`selective_fwd_per_token`]; `None`: the attention core). `lora`: the base weights are
/// frozen and each layer has this many adapter parameters.
pub fn step_flops(
    m: &ModelSpec,
    sequences: f64,
    full_fraction: f64,
    selective_fraction: f64,
    modules: Option<RecomputeModules>,
    lora: Option<f64>,
) -> StepFlops {
    let tokens = sequences * m.seq_len as f64;
    let l = m.layers as f64;
    let attn = attention_fwd_per_token(m);
    // FLOPs per weight per token: forward, data and weight gradients (no weight gradient
    // for a frozen weight).
    let per_weight = if lora.is_some() { 4.0 } else { 6.0 };
    let adapters = lora.unwrap_or(0.0);
    let mut model = tokens
        * (per_weight * m.matmul_params_per_token() as f64 + 3.0 * l * attn + 6.0 * l * adapters);
    if m.mtp_layers > 0 {
        // Each multi-token-prediction module: one more layer, its 2h -> h projection and one
        // more logit layer per token (DeepSeek 2024 §2.2).
        let h = m.hidden as f64;
        let module = layer_matmul_params(m) + 2.0 * h * h + h * m.vocab as f64;
        model += tokens * m.mtp_layers as f64 * (per_weight * module + 3.0 * attn);
    }
    let layer_fwd = 2.0 * (layer_matmul_params(m) + adapters) + attn;
    let rerun = selective_fwd_per_token(m, modules);
    let extra = tokens * l * (full_fraction * layer_fwd + selective_fraction * rerun);
    StepFlops {
        model,
        hardware: model + extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_testkit::gpt;

    /// Narayanan 2021 eq. 3: `96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h))` with full recompute;
    /// model FLOPs `72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h))` (SCHEMA F_model); selective adds the
    /// forward attention term `4·B·s²·L·h`.
    #[test]
    fn narayanan_eq3_table() {
        // (L, h, a, B): GPT-3 175B at batch 1536, 530B at 2520, 1T at 3072, 1.7B at 512.
        let table = [
            (96, 12288, 96, 1536.0),
            (105, 20480, 128, 2520.0),
            (128, 25600, 160, 3072.0),
            (24, 2304, 24, 512.0),
        ];
        for (l, h, a, b) in table {
            let m = gpt(l, h, a);
            let (s, v, lf, hf) = (2048.0, 51200.0, l as f64, h as f64);
            let eq3 = 96.0 * b * s * lf * hf * hf * (1.0 + s / (6.0 * hf) + v / (16.0 * lf * hf));
            let f72 = 72.0 * b * s * lf * hf * hf * (1.0 + s / (6.0 * hf) + v / (12.0 * lf * hf));
            let full = step_flops(&m, b, 1.0, 0.0, None, None);
            assert!((full.hardware / eq3 - 1.0).abs() < 1e-12, "L={l}");
            assert!((full.model / f72 - 1.0).abs() < 1e-12, "L={l}");
            let none = step_flops(&m, b, 0.0, 0.0, None, None);
            assert_eq!(none.hardware, none.model);
            let sel = step_flops(&m, b, 0.0, 1.0, None, None);
            let want = f72 + 4.0 * b * s * s * lf * hf;
            assert!((sel.hardware / want - 1.0).abs() < 1e-12);
        }
    }
}
