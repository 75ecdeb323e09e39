//! FLOP conventions of the validation schema (`SCHEMA.md`, "FLOP conventions").
//!
//! Published TFLOP/s, MFU and HFU are counted by formula from the configuration, not measured
//! with counters, so the harness counts them the same way: a predicted step time `T` becomes
//! `tflops_per_gpu = F / (T·N) / 1e12` with `F` in the case's `flops_convention`, and
//! `mfu = F_model / (T·N·peak_tflops_basis)`, `hfu = F_hw / (T·N·peak_tflops_basis)` against the
//! peak the *source* divided by (e.g. 989 for H100 BF16), not the device's own peak.
//!
//! Per token of a training step (`s` = sequence length, `L` layers):
//!
//! * model FLOPs = `6·P_mm + 6·L·s·heads·(d_qk + d_v)`, the attention term halved when the
//!   source counts causally (`attention_flops = "causal"`). For a dense GPT this is
//!   `72·L·h² + 12·L·s·h + 6·h·V`, i.e. Korthikanti 2022's
//!   `72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h))` per sequence.
//! * hardware FLOPs: full recompute multiplies the per-layer terms by 4/3 (one extra forward,
//!   logits not recomputed; Narayanan 2021 eq. 3: `96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h))`);
//!   selective recompute (Korthikanti 2022) adds the forward attention term
//!   `2·L·s·heads·(d_qk + d_v)`; full recompute of only N layers per stage scales the extra
//!   forward by the recomputed fraction of layers.
//! * LoRA with frozen base weights: `4·P_mm` + attention (no weight-gradient GEMMs).

use crate::cases::{AttentionFlops, CaseModel, FlopsConvention, Recompute, Task};

/// What the FLOP count needs to know about a training step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepShape {
    /// Sequences per optimizer step.
    pub global_batch: f64,
    pub seq_len: f64,
    pub recompute: Recompute,
    /// With `Full`: layers recomputed per pipeline stage (`None`: all).
    pub recompute_layers: Option<u64>,
    pub pp: u64,
    pub task: Task,
    pub attention: AttentionFlops,
}

/// `(d_qk, d_v)` per head: `head_dim` both, or the MLA dimensions.
fn head_dims(m: &CaseModel) -> (f64, f64) {
    if let Some(mla) = &m.mla {
        (
            (mla.qk_nope_head_dim + mla.qk_rope_head_dim) as f64,
            mla.v_head_dim as f64,
        )
    } else {
        let d = m.head_dim.unwrap_or(m.hidden / m.heads.max(1)) as f64;
        (d, d)
    }
}

/// Matmul weights one token passes through (`P_mm`): QKV and output projections, the MLP
/// (MoE: `top_k` routed + shared experts, plus the router), and the logit layer.
pub fn matmul_params_per_token(m: &CaseModel) -> f64 {
    let h = m.hidden as f64;
    let (dqk, dv) = head_dims(m);
    let heads = m.heads as f64;
    let attn = match &m.mla {
        Some(mla) => {
            // DeepSeek-V2 MLA: q down/up (or a plain q projection without q_lora_rank),
            // kv down (+ rope key), kv up, output.
            let q = if mla.q_lora_rank > 0 {
                h * mla.q_lora_rank as f64 + mla.q_lora_rank as f64 * heads * dqk
            } else {
                h * heads * dqk
            };
            let kv_down = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) as f64;
            let kv_up = mla.kv_lora_rank as f64 * heads * (mla.qk_nope_head_dim as f64 + dv);
            q + kv_down + kv_up + heads * dv * h
        }
        None => {
            let hd = dqk;
            h * (heads * hd + 2.0 * m.kv_heads as f64 * hd) + heads * hd * h
        }
    };
    let mats = m.ffn_act.matrices() as f64;
    let dense_mlp = mats * h * m.ffn_hidden as f64;
    let layers = m.layers as f64;
    let mlp_total = match &m.moe {
        None => layers * dense_mlp,
        Some(moe) => {
            let moe_layers =
                (m.layers.saturating_sub(moe.dense_layers) / moe.moe_layer_freq.max(1)) as f64;
            let expert = mats * h * moe.expert_ffn_hidden as f64;
            let moe_mlp = (moe.top_k + moe.shared_experts) as f64 * expert + h * moe.experts as f64;
            (layers - moe_layers) * dense_mlp + moe_layers * moe_mlp
        }
    };
    layers * attn + mlp_total + h * m.vocab as f64
}

/// Forward attention-core FLOPs per token for one pass: `2·L·s·heads·(d_qk + d_v)`
/// (halved when counted causally).
fn attention_fwd_per_token(m: &CaseModel, seq_len: f64, a: AttentionFlops) -> f64 {
    let (dqk, dv) = head_dims(m);
    let full = 2.0 * m.layers as f64 * seq_len * m.heads as f64 * (dqk + dv);
    match a {
        AttentionFlops::Noncausal => full,
        AttentionFlops::Causal => 0.5 * full,
    }
}

/// Model FLOPs of one training step (recompute not counted).
pub fn model_flops(m: &CaseModel, s: &StepShape) -> f64 {
    let pmm = matmul_params_per_token(m);
    let attn = attention_fwd_per_token(m, s.seq_len, s.attention);
    let per_token = match s.task {
        Task::Lora => 4.0 * pmm + 3.0 * attn,
        Task::Pretrain | Task::Sft => 6.0 * pmm + 3.0 * attn,
    };
    per_token * s.global_batch * s.seq_len
}

/// Hardware FLOPs of one training step (the recomputed forward counted).
pub fn hardware_flops(m: &CaseModel, s: &StepShape) -> f64 {
    let model = model_flops(m, s);
    let tokens = s.global_batch * s.seq_len;
    let attn = attention_fwd_per_token(m, s.seq_len, s.attention);
    // Forward FLOPs of the transformer layers (not the logits) per token.
    let logits = 2.0 * m.hidden as f64 * m.vocab as f64;
    let layer_fwd = 2.0 * matmul_params_per_token(m) - logits + attn;
    let extra = match s.recompute {
        Recompute::None | Recompute::Unknown => 0.0,
        Recompute::Selective => attn,
        Recompute::Full => {
            let frac = match s.recompute_layers {
                Some(n) => {
                    let per_stage = (m.layers as f64 / s.pp.max(1) as f64).max(1.0);
                    (n as f64 / per_stage).min(1.0)
                }
                None => 1.0,
            };
            frac * layer_fwd
        }
    };
    model + extra * tokens
}

/// FLOPs of one static batch of inference (forward only, schema: `2·P_mm + 2·L·c·heads·(d_qk
/// + d_v)` per token attending to `c` positions): `batch` prompts of `input_len` tokens
/// prefilled (token `i` attends to `i` positions when counted causally, to all `input_len`
/// otherwise), then `output_len - 1` decode steps (step `j` attends to `input_len + j`).
pub fn inference_flops(
    m: &CaseModel,
    batch: f64,
    input_len: f64,
    output_len: f64,
    attention: AttentionFlops,
) -> f64 {
    let pmm = matmul_params_per_token(m);
    let (dqk, dv) = head_dims(m);
    let per_pos = 2.0 * m.layers as f64 * m.heads as f64 * (dqk + dv);
    let prefill_positions = match attention {
        AttentionFlops::Causal => input_len * (input_len + 1.0) / 2.0,
        AttentionFlops::Noncausal => input_len * input_len,
    };
    let steps = (output_len - 1.0).max(0.0);
    // Sum over j = 1..steps of (input_len + j).
    let decode_positions = steps * input_len + steps * (steps + 1.0) / 2.0;
    batch * ((input_len + steps) * 2.0 * pmm + per_pos * (prefill_positions + decode_positions))
}

/// FLOPs of a step in a convention.
pub fn step_flops(m: &CaseModel, s: &StepShape, c: FlopsConvention) -> f64 {
    match c {
        FlopsConvention::Model => model_flops(m, s),
        FlopsConvention::Hardware => hardware_flops(m, s),
    }
}

/// Achieved TFLOP/s per device.
pub fn tflops_per_gpu(flops: f64, step_time_s: f64, gpus: f64) -> f64 {
    flops / (step_time_s * gpus) / 1e12
}

/// Utilisation against a peak in TFLOP/s (the source's `peak_tflops_basis`).
pub fn utilisation(flops: f64, step_time_s: f64, gpus: f64, peak_tflops: f64) -> f64 {
    flops / (step_time_s * gpus * peak_tflops * 1e12)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::workload::FfnAct;

    fn gpt(layers: u64, hidden: u64, heads: u64, vocab: u64) -> CaseModel {
        CaseModel {
            name: String::new(),
            layers,
            hidden,
            heads,
            kv_heads: heads,
            head_dim: None,
            ffn_hidden: 4 * hidden,
            ffn_act: FfnAct::Gelu,
            vocab,
            seq_len: Some(2048),
            tied_embeddings: None,
            attention: None,
            params_b: None,
            moe: None,
            mla: None,
        }
    }

    fn shape(b: f64, recompute: Recompute) -> StepShape {
        StepShape {
            global_batch: b,
            seq_len: 2048.0,
            recompute,
            recompute_layers: None,
            pp: 1,
            task: Task::Pretrain,
            attention: AttentionFlops::Noncausal,
        }
    }

    /// The closed forms of the schema for dense GPT models, for every recompute policy.
    #[test]
    fn closed_forms() {
        // (L, h, a, V, B)
        let table = [
            (48u64, 6144u64, 64u64, 51200u64, 4.0),
            (96, 12288, 96, 51200, 64.0),
            (105, 20480, 128, 51200, 280.0),
            (24, 2304, 24, 51200, 512.0),
        ];
        for (l, h, a, v, b) in table {
            let m = gpt(l, h, a, v);
            let (lf, hf, vf, s) = (l as f64, h as f64, v as f64, 2048.0);
            let f_model =
                72.0 * b * s * lf * hf * hf * (1.0 + s / (6.0 * hf) + vf / (12.0 * lf * hf));
            let f_full =
                96.0 * b * s * lf * hf * hf * (1.0 + s / (6.0 * hf) + vf / (16.0 * lf * hf));
            let f_sel = f_model + 4.0 * b * s * s * lf * hf;
            let got_model = model_flops(&m, &shape(b, Recompute::None));
            let got_full = hardware_flops(&m, &shape(b, Recompute::Full));
            let got_sel = hardware_flops(&m, &shape(b, Recompute::Selective));
            let got_none = hardware_flops(&m, &shape(b, Recompute::None));
            for (got, want, what) in [
                (got_model, f_model, "model"),
                (got_full, f_full, "full"),
                (got_sel, f_sel, "selective"),
                (got_none, f_model, "none"),
            ] {
                assert!(
                    (got - want).abs() / want < 1e-12,
                    "L={l} {what}: {got} vs {want}"
                );
            }
        }
    }

    /// Causal counting halves the attention term only; LoRA drops the weight-gradient GEMMs;
    /// full recompute of half the layers of a stage adds half the extra forward.
    #[test]
    fn causal_lora_partial_recompute() {
        let m = gpt(24, 2048, 16, 50000);
        let base = shape(8.0, Recompute::None);
        let causal = StepShape {
            attention: AttentionFlops::Causal,
            ..base
        };
        let attn_nc = 12.0 * 24.0 * 2048.0 * 2048.0 * 8.0 * 2048.0;
        let diff = model_flops(&m, &base) - model_flops(&m, &causal);
        assert!((diff - attn_nc / 2.0).abs() / attn_nc < 1e-12);
        let lora = StepShape {
            task: Task::Lora,
            ..base
        };
        let pmm = matmul_params_per_token(&m);
        let d = model_flops(&m, &base) - model_flops(&m, &lora);
        assert!((d - 2.0 * pmm * 8.0 * 2048.0).abs() / d < 1e-12);
        let full = hardware_flops(&m, &shape(8.0, Recompute::Full)) - model_flops(&m, &base);
        let half = StepShape {
            recompute: Recompute::Full,
            recompute_layers: Some(6),
            pp: 2,
            ..base
        };
        let h = hardware_flops(&m, &half) - model_flops(&m, &base);
        assert!((h - full / 2.0).abs() / full < 1e-12);
    }

    /// Inference: one token of prefill and one decode step add up as the schema says.
    #[test]
    fn inference_counts() {
        let m = gpt(2, 64, 4, 100);
        let pmm = matmul_params_per_token(&m);
        let per_pos = 2.0 * 2.0 * 4.0 * 32.0;
        // (batch, in, out, attention, expected)
        let table = [
            (1.0, 1.0, 1.0, AttentionFlops::Causal, 2.0 * pmm + per_pos),
            (
                1.0,
                2.0,
                1.0,
                AttentionFlops::Noncausal,
                4.0 * pmm + 4.0 * per_pos,
            ),
            (
                1.0,
                2.0,
                1.0,
                AttentionFlops::Causal,
                4.0 * pmm + 3.0 * per_pos,
            ),
            (
                3.0,
                2.0,
                2.0,
                AttentionFlops::Causal,
                3.0 * (6.0 * pmm + 6.0 * per_pos),
            ),
        ];
        for (b, i, o, a, want) in table {
            let got = inference_flops(&m, b, i, o, a);
            assert!(
                (got - want).abs() / want < 1e-12,
                "{b} {i} {o}: {got} vs {want}"
            );
        }
    }

    /// GQA and SwiGLU: P_mm = L·(h·(q + 2·kv) + q·h + 3·h·f) + h·V.
    #[test]
    fn gqa_swiglu_pmm() {
        let m = CaseModel {
            kv_heads: 8,
            ffn_hidden: 28672,
            ffn_act: FfnAct::Swiglu,
            ..gpt(80, 8192, 64, 32000)
        };
        let want = 80.0
            * (8192.0 * (8192.0 + 2.0 * 1024.0) + 8192.0 * 8192.0 + 3.0 * 8192.0 * 28672.0)
            + 8192.0 * 32000.0;
        assert_eq!(matmul_params_per_token(&m), want);
    }
}
