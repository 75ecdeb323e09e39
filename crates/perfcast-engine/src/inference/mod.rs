//! The inference model: time to first token, time per output token, end-to-end latency,
//! throughput and memory of a decoder-only transformer (dense or mixture-of-experts, with
//! grouped-query or latent attention) served with static batching.
//!
//! How a plan is evaluated:
//!
//! - **Phases.** Prefill runs one forward pass over `batch x input_len` tokens (attention over
//!   the prompt, causal) and samples the first token; decode runs `output_len - 1` passes of
//!   `batch` tokens, each attending over a KV cache that grows by one position per step
//!   (seed digest §2.9; Pope et al. 2022, "Efficiently Scaling Transformer Inference").
//! - **Ops.** One layer is the fused kernel sequence of production runtimes (norm, QKV GEMM,
//!   rotary + KV write, attention, output GEMM, all-reduce, residual + norm, gate/up GEMM,
//!   activation, down GEMM, all-reduce); each compute op is timed by the `ComputeUnit` plugin
//!   against the device's `MemoryHierarchy` (hierarchical roofline by default), each
//!   collective by the innermost `Interconnect` level that spans its group.
//! - **Precision.** Weights, activations and KV cache each have a format: weight bytes come
//!   from `weight_dtype`, the matrix engine runs in the wider of activation and weight format
//!   (weight-only int4 with bf16 activations runs at bf16 peak but moves half-byte weights),
//!   the KV cache is read and stored in `kv_dtype`.
//! - **Parallelism.** TP shards heads and the MLP (Shoeybi et al. 2019) with two all-reduces
//!   of `tokens x hidden` per layer; PP splits layers and adds one hand-off per stage
//!   boundary per pass; a pass's latency is the sum over stages (no micro-batch pipelining
//!   of a static batch). Replicas multiply throughput only.
//! - **Fixed costs.** The device plugin's launch overhead per kernel; without graph capture,
//!   a host launch cost per kernel that the GPU hides only behind longer kernels
//!   (`max(device, host)`); a software overhead per collective; a per-pass overhead.
//! - **Decode in closed form.** Everything but attention is independent of the context
//!   length, so one decode pass is timed once; attention time is affine in the context
//!   length within each of `decode_segments` segments and summed exactly there
//!   (trapezoid over integer points), so a 128-step or 4,096-step decode costs the same.
//! - **Skinny GEMMs.** A GEMM is timed as libraries run it: also as split-K (a batched GEMM
//!   of depth `k / s` with fp32 partials) and, for a few rows, as a GEMV on the vector units;
//!   the fastest variant the compute-unit plugin reports is kept.
//! - **Attention.** Prefill: the core `Attention` op (flash: Q, K, V, O traffic only; plain:
//!   materialised scores; Dao et al. 2022). Decode: the query heads sharing a KV head (GQA,
//!   Ainslie et al. 2023; MQA, Shazeer 2019) are folded into the M dimension of one product
//!   per KV head; the KV cache is read in `kv_dtype`, `decode_kv_group_reread` says how much
//!   of the extra per-query-head passes older kernels make reach device memory.
//! - **KV heads and TP.** With fewer KV heads than `tp`, `tp` must be a multiple of them and
//!   each KV head is replicated on `tp / kv_heads` devices (TensorRT-LLM and vLLM do the
//!   same); otherwise `tp` must divide them. `tp` must divide the query heads and the MLP
//!   width; the vocabulary is padded up to a multiple of `tp`.
//! - **Mixture of experts** (`moe`): the dense layers' MLPs and the MoE layers' router,
//!   routed experts (grouped GEMMs over the experts a step's tokens touch, on the busiest
//!   expert-parallel rank) and shared experts; `ep` spreads the experts over the TP ranks,
//!   `attention_dp` runs attention, dense layers and the LM head data-parallel with the
//!   experts' tokens exchanged by all-to-all.
//! - **Latent attention (MLA)**: its projections (query and key/value latents, the latent's
//!   expansion, which decode absorbs at the same FLOPs), a KV cache of `kv_lora_rank + rope`
//!   per token and layer on every attention rank, and decode attention over the latent with
//!   the heads folded into one product per sequence.
//! - **Memory.** Weights of the largest stage + KV cache (`2 x layers x kv_heads x head_dim x
//!   bytes / TP` per token) + activation workspace + runtime reserve against the device
//!   tier's capacity; `max_batch` searches the largest batch that fits.
//!
//! Serving under load (in-flight batching, chunked prefill, a paged KV cache, speculative
//! decoding, prefix caching) is `perfcast-serving`, which times each engine step of a mixed
//! batch with [`Inference::step_time`] ([`StepCosts`]). Not modelled here (reported as such
//! by callers): micro-batch pipelining of a static batch across PP stages; `max_prefill_tokens`
//! only sizes the static workspace.

mod attention;
mod check;
mod memory;
mod moe;
mod plan;
mod report;
mod roofline;
mod shard;
mod spans;
mod step;
mod time;

#[cfg(test)]
mod moe_tests;
#[cfg(test)]
mod spans_tests;
#[cfg(test)]
mod step_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use plan::{InferenceOptions, InferencePlan};
pub use report::{GemmPoint, InferenceReport, MemoryReport, Phase, PhaseBreakdown};
pub use shard::GemmName;
pub use step::{PrefillChunk, ServingMemory, StepBatch, StepCosts};

use perfcast_core::{Key, ModelError, ModelSpec, Seconds, System};
use time::{Acc, Pass};

/// A model resolved against a system, ready to evaluate plans.
#[derive(Clone, Debug)]
pub struct Inference {
    model: ModelSpec,
    system: System,
    options: InferenceOptions,
}

impl Inference {
    /// Resolve `model` against `system`. Errors on an invalid model, options out of range or a
    /// system without a device memory tier.
    pub fn new(
        model: ModelSpec,
        system: System,
        options: InferenceOptions,
    ) -> Result<Self, ModelError> {
        model.validate()?;
        options.validate()?;
        if system.memory.device().is_none() {
            return Err(ModelError::invalid(
                Key::system("memory"),
                format!("{:?}", system.memory),
                "needs a device-level memory tier (HBM/DRAM) for weights and KV cache",
            ));
        }
        Ok(Inference {
            model,
            system,
            options,
        })
    }

    pub fn model(&self) -> &ModelSpec {
        &self.model
    }
    pub fn system(&self) -> &System {
        &self.system
    }
    pub fn options(&self) -> &InferenceOptions {
        &self.options
    }

    /// Evaluate one plan. A plan that does not fit in memory still gets timed; its report
    /// says `memory.fits = false` with the shortfall.
    pub fn evaluate(&self, plan: &InferencePlan) -> Result<InferenceReport, ModelError> {
        let sh = self.shard(plan)?;
        let b = plan.batch as u64;
        let s = plan.input_len as u64;

        // Prefill: one eager pass over the prompts.
        let prefill_pass = Pass {
            tokens: b * s,
            logits: b,
            eager: true,
        };
        let mut prefill = self.pass_without_attention(&sh, plan, prefill_pass)?;
        // Attention runs per rank on its own sequences under attention data parallelism.
        let b_rank = b.div_ceil(sh.dp);
        if sh.spans.all_full() {
            let att = self.attention(&sh, prefill_pass, b_rank, s, s)?;
            prefill.add_scaled(&att, sh.layers as f64);
        } else {
            let att = self.layers_attention(&sh, prefill_pass, b_rank, s, 0)?;
            prefill.add_scaled(&att, 1.0);
        }

        // Decode: n steps, context input_len + j at step j = 1..=n.
        let n = plan.output_len as u64 - 1;
        let mut decode = Acc::default();
        if n > 0 {
            let pass = Pass {
                tokens: b,
                logits: b,
                eager: !plan.graph_capture,
            };
            let step = self.pass_without_attention(&sh, plan, pass)?;
            decode.add_scaled(&step, n as f64);
            if plan.graph_capture {
                decode.overhead += n as f64 * self.options.graph_launch_us * 1e-6;
            }
            if sh.spans.all_full() {
                let att = self.decode_attention_sum(&sh, pass, b_rank, s, n)?;
                decode.add_scaled(&att, sh.layers as f64);
            } else {
                let att = self.layers_decode_sum(&sh, pass, b_rank, s, n)?;
                decode.add_scaled(&att, 1.0);
            }
        }

        let memory = self.memory_report(&sh, plan, b);
        let ttft = prefill.total();
        let decode_total = decode.total();
        let latency = ttft + decode_total;
        let out_tokens = (b * plan.output_len as u64) as f64;
        let per_replica = out_tokens / latency;
        let kernels_per_step = if n > 0 {
            (decode.kernels / n as f64).round() as u32
        } else {
            0
        };
        let per_device = |x: f64| x / plan.pp as f64;
        let (peak, bw) = self.matrix_peak_and_bandwidth(sh.engine_dtype());
        let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        let report = InferenceReport {
            model: self.model.name.clone(),
            system: self.system.name.clone(),
            plan: plan.clone(),
            gpus: plan.gpus(),
            ttft: Seconds(ttft),
            tpot: Seconds(if n > 0 { decode_total / n as f64 } else { 0.0 }),
            latency: Seconds(latency),
            tokens_per_s_batch: per_replica,
            tokens_per_s: per_replica * plan.replicas as f64,
            tokens_per_s_per_gpu: per_replica / plan.gpus_per_replica() as f64,
            prefill: prefill.breakdown(1),
            decode: decode.breakdown(n as u32),
            memory,
            kernels_per_decode_step: kernels_per_step,
            prefill_mfu: ratio(per_device(prefill.flops), ttft * peak),
            decode_bandwidth_utilization: ratio(per_device(decode.bytes), decode_total * bw),
        };
        for (what, v) in [
            ("ttft", report.ttft.0),
            ("tpot", report.tpot.0),
            ("latency", report.latency.0),
            ("tokens_per_s", report.tokens_per_s),
            ("prefill_mfu", report.prefill_mfu),
            (
                "decode_bandwidth_utilization",
                report.decode_bandwidth_utilization,
            ),
        ] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        ModelError::check_utilisation("prefill MFU", report.prefill_mfu, || {
            format!("the prefill's FLOPs at a peak of {peak:.4e} FLOP/s")
        })?;
        ModelError::check_utilisation(
            "decode bandwidth utilisation",
            report.decode_bandwidth_utilization,
            || format!("the decode's device-memory traffic at {bw:.4e} B/s"),
        )?;
        Ok(report)
    }

    /// The largest batch whose weights, KV cache (for `input_len + output_len` tokens per
    /// sequence) and workspace fit on every device, other plan fields as given. Errors when
    /// not even one sequence fits, with the sizes.
    pub fn max_batch(&self, plan: &InferencePlan) -> Result<u32, ModelError> {
        let sh = self.shard(plan)?;
        let one = self.memory_report(&sh, plan, 1);
        if !one.fits {
            return Err(ModelError::invalid(
                Key::inference("batch"),
                1,
                format!(
                    "does not fit: weights {:.2} GB + KV cache {:.2} GB + workspace {:.2} GB + reserve {:.2} GB = {:.2} GB > usable {:.2} GB per device; raise inference.tp or inference.pp, or narrow inference.weight_dtype / inference.kv_dtype",
                    one.weights.gb(),
                    one.kv_cache.gb(),
                    one.workspace.gb(),
                    one.reserve.gb(),
                    one.total.gb(),
                    one.capacity.gb()
                ),
            ));
        }
        // Memory grows with the batch; bracket then bisect.
        let (mut lo, mut hi) = (1u64, 2u64);
        while hi <= u32::MAX as u64 && self.memory_report(&sh, plan, hi).fits {
            lo = hi;
            hi *= 2;
        }
        let hi_cap = hi.min(u32::MAX as u64 + 1);
        let mut hi = hi_cap;
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.memory_report(&sh, plan, mid).fits {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(lo as u32)
    }
}
