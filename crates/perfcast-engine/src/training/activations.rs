//! Activation and model-state bytes: what one layer keeps per micro-batch (Korthikanti et al.
//! 2022, §4, generalised to GQA, gated MLPs, context parallelism, FlashAttention and
//! module recompute), and the bytes of model state per parameter (mixed-precision Adam,
//! Rajbhandari et al. 2020 §3; Korthikanti 2022 §2). Pure formulas: the stage memory that
//! multiplies them out is `memory`.

use perfcast_core::parallel::LayerActivations;
use perfcast_core::{AttentionKind, Bytes};

use super::modules::RecomputeModules;

/// Shape of one layer's activations on one device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationShape {
    /// Sequences per micro-batch `b`.
    pub micro_batch: f64,
    /// Sequence length `s`.
    pub seq_len: f64,
    pub hidden: f64,
    pub heads: f64,
    pub kv_heads: f64,
    pub head_dim: f64,
    pub ffn_hidden: f64,
    /// Weight matrices of the MLP (2, or 3 for gated MLPs).
    pub ffn_matrices: f64,
    /// Tensor-parallel degree `t`.
    pub tp: f64,
    /// Divisor of the activations outside the TP region (`t` with sequence parallelism).
    pub pointwise: f64,
    /// Context-parallel degree (splits the sequence).
    pub cp: f64,
    /// Bytes per activation element (2 for 16-bit).
    pub elem: f64,
    /// Bytes per element of the GEMM inputs kept for the weight gradient: `elem`, or the
    /// recipe's format with its scales (`EngineParams::fp8_saved_inputs`).
    pub gemm_in: f64,
    pub dropout: bool,
    pub attention: AttentionKind,
    /// Latent attention's widths (`None`: QKV of `heads`/`kv_heads` x `head_dim`).
    pub mla: Option<super::shape::MlaShape>,
    /// Module-level selective recompute (`None`: `selective` drops the attention core).
    pub modules: Option<RecomputeModules>,
}

impl ActivationShape {
    /// Bytes one layer keeps for one micro-batch with nothing recomputed.
    ///
    /// Korthikanti 2022 §4.1 for a GPT layer, `sbh(34 + 5as/h)` (TP: `10 + 24/t + 5as/(ht)`;
    /// TP+SP: `34/t + 5as/(ht)`), term by term with `e` bytes per element and 1-byte masks:
    /// * layer input = LayerNorm-1 input `e·sbh`·(1/sp), LayerNorm-2 input the same;
    /// * attention: QKV input (LN-1 output) `e·sbh/sp`; Q and K `e·sb(a+kv)d/t`; V
    ///   `e·sb·kv·d/t`; output-projection input `e·sb·a·d/t`; dropout mask `sbh/sp`;
    /// * attention core (plain): scores-softmax `e·as²b/t`, dropout mask `as²b/t`, dropout
    ///   output `e·as²b/t` = `5as²b/t` for `e = 2` (no dropout: the softmax output only);
    ///   FlashAttention keeps only the fp32 log-sum-exp, `4·sab/t`;
    /// * MLP: input (LN-2 output) `e·sbh/sp`; up-projection outputs `(m-1)·e·sbf/t`;
    ///   activation output `e·sbf/t`; dropout mask `sbh/sp`.
    ///
    /// With module recompute (`modules`), `attention_core` is what the modules rerun (the
    /// attention core, the norms' outputs, MLA's up-projected queries, keys and values, the
    /// MLP's internals) and `other` the rest: `selective` drops the former. The GEMM inputs the
    /// weight gradients read (the norms' outputs, the output projection's input, MLA's
    /// latents, the down-projection's input) take `gemm_in` bytes per element.
    pub fn layer(&self) -> LayerActivations {
        let e = self.elem;
        let t = self.tp.max(1.0);
        let sp = self.pointwise.max(1.0);
        let kv_dev = (self.kv_heads / t).max(1.0);
        let a_dev = self.heads / t;
        let sq = self.seq_len / self.cp.max(1.0); // local queries
        let tok = self.micro_batch * sq;
        let sbh = tok * self.hidden;
        let d = self.head_dim;
        let mask = if self.dropout { 1.0 } else { 0.0 };

        // GEMM inputs kept narrower than `e` (`gemm_in`): what each term saves per element.
        let narrow = e - self.gemm_in;
        let input = e * sbh / sp;
        let ln2_in = e * sbh / sp;
        // The norms' outputs: the QKV (or latent down-projections') input and the MLP's.
        let norm_outputs = 2.0 * e * sbh / sp - narrow * 2.0 * sbh / sp;
        let (attn_linear, up_proj) = match &self.mla {
            None => (
                e * tok * (a_dev + kv_dev) * d
                    + e * tok * kv_dev * d
                    + e * tok * a_dev * d
                    + mask * sbh / sp
                    - narrow * tok * a_dev * d,
                0.0,
            ),
            // MLA: the normed query latent, the key/value latent with the rotary key, the
            // output projection's input (GEMM inputs but the rotary key); rebuilt from the
            // latents (the up-projections): the query, the up-projected keys (no-rope part)
            // and values, the keys with their rotary part.
            Some(l) => {
                let (q_lat, kv_lat) = (l.q_rank as f64, (l.kv_rank + l.rope) as f64);
                let (qk, nope, v) = ((l.nope + l.rope) as f64, l.nope as f64, l.v as f64);
                (
                    e * tok * (q_lat + kv_lat + a_dev * v) + mask * sbh / sp
                        - narrow * tok * (q_lat + l.kv_rank as f64 + a_dev * v),
                    e * tok * a_dev * (2.0 * qk + nope + v),
                )
            }
        };
        // Keys/values span the whole sequence under context parallelism.
        let scores = a_dev * sq * self.seq_len * self.micro_batch;
        let core = if self.attention.is_flash() {
            4.0 * a_dev * tok
        } else if self.dropout {
            (2.0 * e + 1.0) * scores
        } else {
            e * scores
        };
        let f_dev = self.ffn_hidden / t;
        // The up-projections' outputs, the activation's output (the down-projection's input).
        let mlp = (self.ffn_matrices - 1.0) * e * tok * f_dev + e * tok * f_dev + mask * sbh / sp
            - narrow * tok * f_dev;
        let rest = ln2_in + norm_outputs + attn_linear + up_proj + mlp;
        let Some(m) = self.modules else {
            return LayerActivations {
                input: Bytes(input),
                attention_core: Bytes(core),
                other: Bytes(rest),
            };
        };
        // Module recompute: what the modules rerun is what `selective` drops.
        let pick = |module, bytes: f64| if m.contains(module) { bytes } else { 0.0 };
        let dropped = pick(RecomputeModules::LAYERNORM, norm_outputs)
            + pick(RecomputeModules::MLA_UP_PROJ, up_proj)
            + pick(RecomputeModules::MLP, mlp);
        let core_dropped = pick(RecomputeModules::CORE_ATTN, core);
        LayerActivations {
            input: Bytes(input),
            attention_core: Bytes(core_dropped + dropped),
            other: Bytes(rest - dropped + (core - core_dropped)),
        }
    }

    /// Bytes one layer keeps under torchtitan's per-op selective checkpointing (`op_sac`):
    /// its input, the outputs of the 1st, 3rd, ... matmul (Llama: `wq`, `wv`, `w1`, `w2`; GPT:
    /// `q`, `v`, `fc1`), the attention kernel's output and log-sum-exp, and with sequence
    /// parallelism the two reduce-scatters' outputs.
    pub fn op_sac_kept(&self) -> Bytes {
        let e = self.elem;
        let t = self.tp.max(1.0);
        let sp = self.pointwise.max(1.0);
        let kv_dev = (self.kv_heads / t).max(1.0);
        let a_dev = self.heads / t;
        let tok = self.micro_batch * self.seq_len / self.cp.max(1.0);
        let sbh = tok * self.hidden;
        let d = self.head_dim;
        let f_dev = self.ffn_hidden / t;
        let mms = if self.ffn_matrices >= 3.0 {
            e * tok * (a_dev * d + kv_dev * d + f_dev) + e * sbh
        } else {
            e * tok * (a_dev * d + kv_dev * d + f_dev)
        };
        let sdpa = e * tok * a_dev * d + 4.0 * a_dev * tok;
        let rs = if sp > 1.0 { 2.0 * e * sbh / sp } else { 0.0 };
        Bytes(e * sbh / sp + mms + sdpa + rs)
    }
}

/// Bytes of model state per parameter, mixed-precision Adam (Korthikanti 2022 §2, ZeRO §3):
/// 16-bit weights (2) + gradients (2, or 4 accumulated in fp32) + fp32 master weights,
/// momentum and variance (12) = 16, or 18 with fp32 gradient accumulation. Transformer
/// Engine fp8 keeps an fp8 copy of each weight and of its transpose (+2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateBytes {
    pub weights: f64,
    pub grads: f64,
    pub optimizer: f64,
}

impl StateBytes {
    pub fn mixed_precision_adam(fp32_grads: bool, fp8: bool) -> StateBytes {
        StateBytes {
            weights: if fp8 { 4.0 } else { 2.0 },
            grads: if fp32_grads { 4.0 } else { 2.0 },
            optimizer: 12.0,
        }
    }
    pub fn total(&self) -> f64 {
        self.weights + self.grads + self.optimizer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(b: f64, h: f64, a: f64, t: f64, sp: bool) -> ActivationShape {
        ActivationShape {
            micro_batch: b,
            seq_len: 2048.0,
            hidden: h,
            heads: a,
            kv_heads: a,
            head_dim: h / a,
            ffn_hidden: 4.0 * h,
            ffn_matrices: 2.0,
            tp: t,
            pointwise: if sp { t } else { 1.0 },
            cp: 1.0,
            elem: 2.0,
            gemm_in: 2.0,
            dropout: true,
            attention: AttentionKind::Plain,
            mla: None,
            modules: None,
        }
    }

    /// Korthikanti 2022 Table 2 forms, per layer, as multiples of `sbh`.
    #[test]
    fn korthikanti_per_layer_forms() {
        let (s, b, h, a) = (2048.0, 4.0, 6144.0, 64.0);
        let sbh = s * b * h;
        let q = 5.0 * a * s / h; // 5as/h
        for t in [1.0, 2.0, 8.0] {
            // (sp, policy: 0 none / 1 selective / 2 full, want / sbh)
            let table = [
                (false, 0, 10.0 + 24.0 / t + q / t),
                (true, 0, 34.0 / t + q / t),
                (true, 1, 34.0 / t),
                (false, 1, 10.0 + 24.0 / t),
                (true, 2, 2.0 / t),
                (false, 2, 2.0),
            ];
            for (i, (sp, pol, want)) in table.into_iter().enumerate() {
                let l = shape(b, h, a, t, sp).layer();
                let got = match pol {
                    0 => l.total(),
                    1 => l.input + l.other,
                    _ => l.input,
                };
                assert!(
                    (got.0 / sbh - want).abs() < 1e-9,
                    "t={t} case {i}: {} vs {want}",
                    got.0 / sbh
                );
            }
        }
        // No parallelism: sbh(34 + 5as/h).
        let l = shape(b, h, a, 1.0, false).layer();
        assert!((l.total().0 / sbh - (34.0 + q)).abs() < 1e-9);
    }

    #[test]
    fn optimizer_bytes_per_parameter() {
        let table = [
            (false, false, 16.0),
            (true, false, 18.0),
            (false, true, 18.0),
        ];
        for (fp32, fp8, want) in table {
            assert_eq!(StateBytes::mixed_precision_adam(fp32, fp8).total(), want);
        }
        assert_eq!(
            StateBytes::mixed_precision_adam(false, false).optimizer,
            12.0
        );
    }
}
