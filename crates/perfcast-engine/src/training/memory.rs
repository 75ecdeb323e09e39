//! Memory accounting: activations per layer (Korthikanti et al. 2022, §4, generalised to
//! GQA, gated MLPs, context parallelism and FlashAttention), and model state per parameter
//! (mixed-precision Adam, Rajbhandari et al. 2020 §3; Korthikanti 2022 §2).

use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::report::{MemoryReport, StageMemory};
use super::Training;
use perfcast_core::parallel::{CpComm, ScheduleInput};
use perfcast_core::{Bytes, ModelError, Seconds};

use perfcast_core::parallel::LayerActivations;
use perfcast_core::AttentionKind;

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

/// Micro-batches (whole-stage units) whose activations stage `idx` holds at its peak, each
/// chunk weighted by its layers (the schedule's `peak_layers_held` over the stage's layers).
/// The short chunks of an uneven split (`stage_layers`) are the
/// first stage's first chunks and the last stage's last ones (Llama 3's embedding-only and
/// head-only chunks); with equal chunks this is the schedule's `in_flight`.
pub(super) fn layer_weighted_in_flight(
    p: &Prepared,
    input: &ScheduleInput,
    idx: u32,
    vpp: u32,
    last: u32,
) -> f64 {
    let n = if idx == 0 {
        p.params.n_first
    } else if idx == last {
        p.params.n_last
    } else {
        p.params.n_mid
    };
    if vpp <= 1 || n == 0 || n == p.params.n_mid {
        return p.sched.in_flight(input, idx);
    }
    let per = p.params.n_mid / vpp as u64;
    let deficit = p.params.n_mid - n;
    let chunk_layers = |c: u32| {
        // Chunks counted from the stage's short end.
        let from_end = if idx == 0 { c } else { vpp - 1 - c } as u64;
        (per - deficit.saturating_sub(from_end * per).min(per)) as f64
    };
    p.sched.peak_layers_held(input, idx, &chunk_layers) / n as f64
}

impl Training {
    /// Memory of pipeline stage `idx` of a prepared plan.
    pub(super) fn stage_memory(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        input: &ScheduleInput,
        idx: u32,
    ) -> StageMemory {
        let last = plan.pp.saturating_sub(1);
        let with_emb = idx == 0;
        let with_head = idx == last;
        let (params, rp, eparams) = if idx == 0 {
            (p.params.first_params, &p.rp_first, p.params.first_expert)
        } else if idx == last {
            (p.params.last_params, &p.rp_last, p.params.last_expert)
        } else {
            (p.params.mid_params, &p.rp_mid, p.params.mid_expert)
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
            temp +=
                (2.0 * p.params.layer_dev + tables * p.dims.embedding_params) * p.dims.weight_bytes;
        }
        if plan.zero_stage >= 3 && p.ssplit.expert_weights > 1 {
            // ZeRO-3 over the expert data-parallel group: the gathered experts of the current
            // and the prefetched MoE layer.
            if let Some(mp) = &p.moe {
                temp += 2.0 * mp.expert_layer_params * p.dims.weight_bytes;
            }
        }
        let st = &p.state;
        let mut weights = params * st.weights / p.ssplit.weights.max(1) as f64;
        let mut grads = params * st.grads / p.ssplit.grads.max(1) as f64;
        let mut optimizer = params * st.optimizer / p.ssplit.optimizer.max(1) as f64;
        if eparams > 0.0 {
            let ss = &p.ssplit;
            weights += eparams * st.weights / ss.expert_weights.max(1) as f64;
            grads += eparams * st.grads / ss.expert_grads.max(1) as f64;
            optimizer += eparams * st.optimizer / ss.expert_optimizer.max(1) as f64;
        }
        // DualPipe holds a stage of each direction: its model state twice.
        let copies = p.sched.model_copies();
        if copies != 1.0 {
            weights *= copies;
            grads *= copies;
            optimizer *= copies;
        }
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
    pub(super) fn memory_report(
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

    pub(super) fn memory_input(plan: &TrainingPlan, p: &Prepared) -> ScheduleInput {
        ScheduleInput {
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: p.shape.micro_batches(),
            forward: Seconds::ZERO,
            backward: Seconds::ZERO,
            p2p: Seconds::ZERO,
        }
    }

    /// A lower bound on the peak memory per device of every plan of this model on `devices`
    /// devices, whatever its degrees, ZeRO stage, recompute or precision: the model state
    /// sharded over all of them at the least bytes per parameter any plan keeps
    /// ([`StateBytes::mixed_precision_adam`] without fp32 gradients or fp8 copies, 16 B),
    /// plus the runtime reserve. Sound because each stage's weights, gradients and optimizer
    /// state are split at most `tp x cp x dp` ways and the busiest of `pp` stages holds at
    /// least `1/pp` of the parameters; activations only add. For refusing a hopeless search
    /// at once.
    pub fn memory_floor(&self, devices: u32) -> Bytes {
        let state = StateBytes::mixed_precision_adam(false, false).total();
        let params = self.model.params() as f64;
        Bytes(
            params * state / devices.max(1) as f64
                + Bytes::from_gib(self.params.runtime_reserve_gib).0,
        )
    }

    /// Memory per device of `plan` without timing it (cheap: for pruning plans that cannot
    /// fit before they are evaluated). Same numbers as `evaluate(plan)?.memory`.
    pub fn memory(&self, plan: &TrainingPlan) -> Result<MemoryReport, ModelError> {
        let p = self.prepare(plan)?;
        let input = Self::memory_input(plan, &p);
        Ok(self.memory_report(plan, &p, &input))
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
