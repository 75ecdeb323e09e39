//! The inference model: time to first token, time per output token, end-to-end latency,
//! throughput and memory of a dense decoder-only transformer served with static batching.
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
//! - **Memory.** Weights of the largest stage + KV cache (`2 x layers x kv_heads x head_dim x
//!   bytes / TP` per token) + activation workspace + runtime reserve against the device
//!   tier's capacity; `max_batch` searches the largest batch that fits.
//!
//! Not modelled (reported as such by callers): in-flight / continuous batching and chunked
//! prefill scheduling (the prefill is one pass; `max_prefill_tokens` only sizes the
//! workspace), micro-batch pipelining of a static batch across PP stages, speculative
//! decoding, mixture-of-experts and MLA models, prefix caching.

mod memory;
mod plan;
mod report;
mod shard;

#[cfg(test)]
mod tests;

pub use plan::{InferenceOptions, InferencePlan};
pub use report::{gemm_table, GemmPoint, InferenceReport, MemoryReport, Phase, PhaseBreakdown};
pub use shard::GemmName;

use perfcast_core::op::{Collective, CollectiveKind, ComputeOp};
use perfcast_core::{
    DType, Engine, Interconnect, ModelError, ModelSpec, Seconds, System, TimeBound,
};
use shard::{OpClass, Shard};

/// A model resolved against a system, ready to evaluate plans.
#[derive(Clone, Debug)]
pub struct Inference {
    model: ModelSpec,
    system: System,
    options: InferenceOptions,
}

/// Time and traffic accumulated over a set of ops.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Acc {
    gemm: f64,
    attention: f64,
    other: f64,
    comm: f64,
    overhead: f64,
    flops: f64,
    bytes: f64,
    kernels: f64,
}

impl Acc {
    fn total(&self) -> f64 {
        self.gemm + self.attention + self.other + self.comm + self.overhead
    }
    /// `self += k * o`.
    fn add_scaled(&mut self, o: &Acc, k: f64) {
        self.gemm += k * o.gemm;
        self.attention += k * o.attention;
        self.other += k * o.other;
        self.comm += k * o.comm;
        self.overhead += k * o.overhead;
        self.flops += k * o.flops;
        self.bytes += k * o.bytes;
        self.kernels += k * o.kernels;
    }
    fn breakdown(&self, steps: u32) -> PhaseBreakdown {
        PhaseBreakdown {
            total: Seconds(self.total()),
            gemm: Seconds(self.gemm),
            attention: Seconds(self.attention),
            other_ops: Seconds(self.other),
            communication: Seconds(self.comm),
            overheads: Seconds(self.overhead),
            steps,
            flops: self.flops,
            device_bytes: self.bytes,
        }
    }
}

/// One timed compute op.
#[derive(Clone, Copy, Debug)]
struct Timed {
    /// Device busy time (compute and memory combined per `compute_memory_overlap`).
    busy: f64,
    /// Device launch overhead plus exposed host launch.
    overhead: f64,
    flops: f64,
    bytes: f64,
    bound: TimeBound,
}

/// Split-K factors tried for a GEMM (1 is always tried).
const SPLIT_K: [u64; 5] = [2, 4, 8, 16, 32];
/// Rows up to which a GEMM may run as a GEMV on the vector units.
const GEMV_MAX_ROWS: u64 = 16;
/// Shallowest reduction slice a split may leave.
const MIN_SPLIT_DEPTH: u64 = 128;

/// How the engine adjusts a plugin's timing of an op the core IR cannot fully describe.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Adjust {
    /// Factor on the device-memory time (KV cache in its own format, KV re-reads).
    mem_scale: f64,
    /// An alternative compute time (another engine); the faster one is used.
    compute: Option<f64>,
}

impl Adjust {
    const NONE: Adjust = Adjust {
        mem_scale: 1.0,
        compute: None,
    };
}

/// Which kind of pass is being timed.
#[derive(Clone, Copy, Debug)]
struct Pass {
    /// Tokens processed.
    tokens: u64,
    /// Tokens that need logits (last token of each sequence).
    logits: u64,
    /// Host launch cost applies per kernel (not graph-captured).
    eager: bool,
}

impl Inference {
    /// Resolve `model` against `system`. Errors on an invalid model, options out of range, a
    /// system without a device memory tier, or a mixture-of-experts model (dense only).
    pub fn new(
        model: ModelSpec,
        system: System,
        options: InferenceOptions,
    ) -> Result<Self, ModelError> {
        model.validate()?;
        options.validate()?;
        if model.moe.is_some() {
            return Err(ModelError::invalid(
                "model.moe",
                "set",
                "the inference model covers dense models only (no expert routing yet)",
            ));
        }
        if system.memory.device().is_none() {
            return Err(ModelError::invalid(
                "system.memory",
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
        let att = self.attention(&sh, prefill_pass, b, s, s)?;
        prefill.add_scaled(&att, sh.layers as f64);

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
            let att = self.decode_attention_sum(&sh, pass, b, s, n)?;
            decode.add_scaled(&att, sh.layers as f64);
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
                "plan.batch",
                1,
                format!(
                    "does not fit: weights {:.2} GB + KV cache {:.2} GB + workspace {:.2} GB + reserve {:.2} GB = {:.2} GB > usable {:.2} GB per device; raise plan.tp or plan.pp, or narrow plan.weight_dtype / plan.kv_dtype",
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

    /// Every GEMM (and the attention core) of one prefill pass and of the mean decode step,
    /// placed on the device's roofline.
    pub fn gemm_roofline(&self, plan: &InferencePlan) -> Result<Vec<GemmPoint>, ModelError> {
        let report = self.evaluate(plan)?;
        let sh = self.shard(plan)?;
        let b = plan.batch as u64;
        let s = plan.input_len as u64;
        let mut out = Vec::with_capacity(12);
        let n = plan.output_len as u64 - 1;
        let phases = [
            (Phase::Prefill, b * s, s, s, true, report.prefill.total.0),
            (
                Phase::Decode,
                b,
                1,
                s + n.div_ceil(2).max(1),
                !plan.graph_capture,
                report.decode.per_step().0,
            ),
        ];
        for (phase, m, q_len, kv_len, eager, pass_time) in phases {
            if phase == Phase::Decode && n == 0 {
                continue;
            }
            let pass = Pass {
                tokens: m,
                logits: b,
                eager,
            };
            let layers = sh.layers;
            let mut ops: Vec<(GemmName, u64, ComputeOp)> = sh
                .layer_ops(m)
                .into_iter()
                .filter_map(|(c, op)| match c {
                    OpClass::Gemm(name) => Some((name, layers, op)),
                    OpClass::Other => None,
                })
                .collect();
            for (c, op) in sh.edge_ops(m, b) {
                if let OpClass::Gemm(name) = c {
                    ops.push((name, 1, op));
                }
            }
            for (name, count, op) in ops {
                let t = self.compute(&op, pass)?;
                let ComputeOp::Gemm(g) = op else { continue };
                out.push(self.point(
                    phase,
                    name.name(),
                    (g.m, g.n, g.k),
                    count,
                    (g.compute_dtype(), g.b),
                    &op,
                    &t,
                    pass_time,
                )?);
            }
            let (op, t) = self.attention_timed(&sh, pass, b, q_len, kv_len)?;
            out.push(self.point(
                phase,
                "attention",
                (b * q_len, kv_len, sh.head_dim),
                layers,
                (sh.base, sh.kv),
                &op,
                &t,
                pass_time,
            )?);
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn point(
        &self,
        phase: Phase,
        name: &'static str,
        (m, n, k): (u64, u64, u64),
        count: u64,
        (dtype, weight_dtype): (DType, DType),
        op: &ComputeOp,
        t: &Timed,
        pass_time: f64,
    ) -> Result<GemmPoint, ModelError> {
        let (peak, bw) = self.matrix_peak_and_bandwidth(op.dtype());
        // The datasheet ridge (peak over peak device bandwidth), as rooflines are drawn; the
        // `bound` comes from the timing model, efficiencies included.
        let ridge = if bw > 0.0 { peak / bw } else { 0.0 };
        let limiter = match t.bound {
            TimeBound::Compute => "compute".to_string(),
            TimeBound::Overhead => "overhead".to_string(),
            TimeBound::Memory(i) => format!(
                "memory:{}",
                self.system
                    .memory
                    .tiers
                    .get(i as usize)
                    .map(|t| t.kind())
                    .unwrap_or("?")
            ),
        };
        let intensity = if t.bytes > 0.0 {
            t.flops / t.bytes
        } else {
            0.0
        };
        let time = t.busy + t.overhead;
        let share = if pass_time > 0.0 {
            count as f64 * time / pass_time
        } else {
            0.0
        };
        for (what, v) in [("ridge", ridge), ("intensity", intensity), ("time", time)] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        Ok(GemmPoint {
            phase,
            name,
            m,
            n,
            k,
            count,
            dtype,
            weight_dtype,
            flops: t.flops,
            bytes: t.bytes,
            intensity,
            ridge,
            time: Seconds(time),
            bound: t.bound,
            limiter,
            share_of_phase_time: share,
        })
    }

    /// The device's matrix peak for `dtype` (FLOP/s) and its device-memory bandwidth
    /// (bytes/s), each 0 when the device has none.
    fn matrix_peak_and_bandwidth(&self, dtype: DType) -> (f64, f64) {
        let peak = self
            .system
            .compute
            .peak(Engine::Matrix, dtype)
            .map(|p| p.0)
            .unwrap_or(0.0);
        let bw = self
            .system
            .memory
            .device()
            .map(|d| d.bandwidth().0)
            .unwrap_or(0.0);
        (peak, bw)
    }

    /// Check the plan against the model and the system and derive the per-device shapes.
    fn shard(&self, plan: &InferencePlan) -> Result<Shard, ModelError> {
        let m = &self.model;
        for (key, v) in [
            ("plan.batch", plan.batch),
            ("plan.input_len", plan.input_len),
            ("plan.output_len", plan.output_len),
            ("plan.tp", plan.tp),
            ("plan.pp", plan.pp),
            ("plan.replicas", plan.replicas),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(key, v, "must be >= 1"));
            }
        }
        let tp = plan.tp as u64;
        if !m.heads.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                "plan.tp",
                tp,
                format!("must divide model.heads = {}", m.heads),
            ));
        }
        let kv = m.kv_heads();
        if kv >= tp && !kv.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                "plan.tp",
                tp,
                format!(
                    "must divide model.kv_heads = {kv} (or be a multiple of it: KV heads are then replicated)"
                ),
            ));
        }
        if kv < tp && !tp.is_multiple_of(kv) {
            return Err(ModelError::invalid(
                "plan.tp",
                tp,
                format!(
                    "exceeds model.kv_heads = {kv}, so must be a multiple of it (each KV head is replicated on tp / kv_heads devices)"
                ),
            ));
        }
        if !m.ffn_hidden.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                "plan.tp",
                tp,
                format!("must divide model.ffn_hidden = {}", m.ffn_hidden),
            ));
        }
        if plan.pp as u64 > m.layers {
            return Err(ModelError::invalid(
                "plan.pp",
                plan.pp,
                format!("must not exceed model.layers = {}", m.layers),
            ));
        }
        let context = plan.input_len as u64 + plan.output_len as u64;
        if context > m.seq_len {
            return Err(ModelError::invalid(
                "plan.input_len + plan.output_len",
                context,
                format!(
                    "must not exceed the model's context length model.seq_len = {}",
                    m.seq_len
                ),
            ));
        }
        let gpus = plan.gpus() as u64;
        if gpus > self.system.devices as u64 {
            return Err(ModelError::invalid(
                "plan.tp x plan.pp x plan.replicas",
                gpus,
                format!(
                    "must not exceed the devices of system `{}` = {}",
                    self.system.name, self.system.devices
                ),
            ));
        }
        if tp > 1 {
            self.level(tp as u32, "plan.tp")?;
        }
        if plan.pp > 1 {
            self.level(plan.gpus_per_replica(), "plan.pp")?;
        }
        let base = self.check_dtypes(plan)?;
        Ok(Shard::new(m, plan, base))
    }

    /// Supported formats and the 16-bit base format.
    fn check_dtypes(&self, plan: &InferencePlan) -> Result<DType, ModelError> {
        let cu = &self.system.compute;
        let supported = || {
            DType::ALL
                .iter()
                .filter(|d| cu.peak(Engine::Matrix, **d).is_some())
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (act, w) = (plan.activation_dtype, plan.weight_dtype);
        let engine = if act.bytes() >= w.bytes() { act } else { w };
        if cu.peak(Engine::Matrix, engine).is_none() {
            let key = if engine == act {
                "plan.activation_dtype"
            } else {
                "plan.weight_dtype"
            };
            return Err(ModelError::invalid(
                key,
                engine,
                format!(
                    "device `{}` has no matrix engine for {engine} (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        }
        let base = if act.bytes() >= 2.0 {
            act
        } else if cu.peak(Engine::Matrix, DType::Bf16).is_some() {
            DType::Bf16
        } else if cu.peak(Engine::Matrix, DType::Fp16).is_some() {
            DType::Fp16
        } else {
            return Err(ModelError::invalid(
                "plan.activation_dtype",
                act,
                format!(
                    "needs a 16-bit matrix format (bf16 or fp16) on device `{}` for attention and the LM head (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        };
        let kv = plan.kv_dtype;
        if kv != base && cu.peak(Engine::Matrix, kv).is_none() {
            return Err(ModelError::invalid(
                "plan.kv_dtype",
                kv,
                format!(
                    "device `{}` has no arithmetic for {kv} to dequantise the KV cache (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        }
        Ok(base)
    }

    /// The innermost network level (its index and itself) spanning `ranks` devices.
    fn level(&self, ranks: u32, key: &str) -> Result<(usize, &dyn Interconnect), ModelError> {
        self.system
            .network
            .iter()
            .enumerate()
            .find(|(_, l)| l.domain_size() >= ranks)
            .map(|(i, l)| (i, l.as_ref()))
            .ok_or_else(|| {
                ModelError::invalid(
                    key,
                    ranks,
                    format!(
                        "no network level of system `{}` spans {ranks} devices (levels: {})",
                        self.system.name,
                        self.system
                            .network
                            .iter()
                            .map(|l| format!("{} x{}", l.kind(), l.domain_size()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    /// Time one compute op as the plugin models it, GEMMs with the best split-K.
    fn compute(&self, op: &ComputeOp, pass: Pass) -> Result<Timed, ModelError> {
        match op {
            ComputeOp::Gemm(g) => self.gemm(g, pass),
            _ => self.compute_adjusted(op, pass, Adjust::NONE),
        }
    }

    /// A GEMM timed as libraries run it: when its output tiles cannot fill the device (skinny
    /// decode and short-prompt GEMMs), cuBLAS/CUTLASS heuristics split the reduction
    /// dimension over `s` thread-block groups and sum fp32 partials (split-K, CUTLASS
    /// documentation "Efficient GEMM in CUDA"; TensorRT-LLM's GEMM plugins do the same). The
    /// split is an ordinary batched GEMM of depth `k / s` with `s` fp32 partial outputs, so the
    /// compute-unit plugin times it with its own efficiency model; the fastest `s` is kept.
    fn gemm(&self, g: &perfcast_core::Gemm, pass: Pass) -> Result<Timed, ModelError> {
        let op = ComputeOp::Gemm(*g);
        // A few rows (decode at small batch) also run as a GEMV on the vector units, which
        // pad nothing (cuBLAS gemv, TensorRT-LLM's batched-GEMV kernels for m <= 4-8); the
        // faster engine is used. Beyond a few rows the matrix engine always wins.
        let gemv = if g.m <= GEMV_MAX_ROWS {
            self.vector_time(g.flops().0, g.compute_dtype(), g.m * g.n * g.batch)
        } else {
            None
        };
        let adj = Adjust {
            mem_scale: 1.0,
            compute: gemv,
        };
        let mut best = self.compute_adjusted(&op, pass, adj)?;
        for s in SPLIT_K {
            let depth = g.k.div_ceil(s);
            if depth < MIN_SPLIT_DEPTH {
                break;
            }
            let split = perfcast_core::Gemm {
                k: depth,
                batch: g.batch * s,
                out: DType::Fp32,
                ..*g
            };
            let t = self.compute_adjusted(&ComputeOp::Gemm(split), pass, Adjust::NONE)?;
            if t.busy + t.overhead < best.busy + best.overhead {
                best = Timed {
                    flops: g.flops().0,
                    ..t
                };
            }
        }
        Ok(best)
    }

    /// Compute time of `flops` of dot products producing `outputs` values in `dtype` on the
    /// vector engine, at the plugin's peak and efficiency for such an op.
    fn vector_time(&self, flops: f64, dtype: DType, outputs: u64) -> Option<f64> {
        let v = perfcast_core::VectorOp {
            kind: perfcast_core::VectorOpKind::Elementwise,
            elements: outputs.max(1),
            flops_per_element: flops / outputs.max(1) as f64,
            bytes_per_element: 0.0,
            dtype,
            launches: 1,
        };
        let cu = &self.system.compute;
        let eff = cu.efficiency(&ComputeOp::Vector(v));
        cu.peak(Engine::Vector, dtype)
            .filter(|p| p.0 > 0.0 && p.0.is_finite() && eff > 0.0 && eff <= 1.0)
            .map(|p| flops / (p.0 * eff))
    }

    /// Time one compute op with the engine's adjustments (see [`Adjust`]).
    fn compute_adjusted(
        &self,
        op: &ComputeOp,
        pass: Pass,
        adj: Adjust,
    ) -> Result<Timed, ModelError> {
        let t = self.system.compute.op_time(op, &self.system.memory)?;
        for (what, v) in [
            ("op time", t.time.0),
            ("op compute time", t.compute.0),
            ("op memory time", t.memory.0),
            ("op overhead", t.overhead.0),
        ] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        let ov = self.options.compute_memory_overlap;
        let plugin_busy = (t.time.0 - t.overhead.0).max(0.0);
        // A plugin with its own timing model may report only a total; adjust only what it
        // splits into compute and memory.
        let split = t.compute.0 > 0.0 || t.memory.0 > 0.0;
        let (busy, bound) = if !split {
            (plugin_busy * adj.mem_scale, t.bound)
        } else if ov >= 1.0 && adj == Adjust::NONE {
            (plugin_busy, t.bound)
        } else {
            let mem = t.memory.0 * adj.mem_scale;
            let c = match adj.compute {
                Some(alt) => t.compute.0.min(alt),
                None => t.compute.0,
            };
            let busy = c.max(mem) + (1.0 - ov) * c.min(mem);
            let bound = if t.overhead.0 > busy {
                TimeBound::Overhead
            } else if mem > c {
                match t.bound {
                    TimeBound::Memory(i) => TimeBound::Memory(i),
                    _ => TimeBound::Memory(self.system.memory.device_index().unwrap_or(0) as u8),
                }
            } else {
                TimeBound::Compute
            };
            (busy, bound)
        };
        let device = busy + t.overhead.0;
        let host = if pass.eager {
            op.launches() as f64 * self.options.host_launch_us * 1e-6
        } else {
            0.0
        };
        let exposed = (host - device).max(0.0);
        let overhead = t.overhead.0 + exposed;
        Ok(Timed {
            busy,
            overhead,
            flops: t.flops.0,
            bytes: t.device_bytes.0 * adj.mem_scale,
            bound: if overhead > busy {
                TimeBound::Overhead
            } else {
                bound
            },
        })
    }

    /// Time one collective over the innermost level spanning its ranks.
    fn collective(&self, c: Collective, pass: Pass, acc: &mut Acc) -> Result<(), ModelError> {
        if c.ranks <= 1 {
            return Ok(());
        }
        let (i, level) = self.level(c.ranks, "plan")?;
        let wire = level
            .try_collective_time(&c, self.options.collective_algorithm)
            .map_err(|e| crate::network::level_error(i, e))?
            .0;
        perfcast_core::units::ensure_finite("collective time", wire)?;
        let fixed = self.options.collective_overhead_us * 1e-6;
        let host = if pass.eager {
            self.options.host_launch_us * 1e-6
        } else {
            0.0
        };
        acc.comm += wire;
        acc.overhead += fixed + (host - wire - fixed).max(0.0);
        acc.kernels += 1.0;
        Ok(())
    }

    fn add_compute(
        &self,
        class: OpClass,
        op: &ComputeOp,
        pass: Pass,
        acc: &mut Acc,
    ) -> Result<(), ModelError> {
        let t = self.compute(op, pass)?;
        match class {
            OpClass::Gemm(_) => acc.gemm += t.busy,
            OpClass::Other => acc.other += t.busy,
        }
        acc.overhead += t.overhead;
        acc.flops += t.flops;
        acc.bytes += t.bytes;
        acc.kernels += op.launches() as f64;
        Ok(())
    }

    /// One forward pass of a replica (all stages in sequence) without the attention cores.
    fn pass_without_attention(
        &self,
        sh: &Shard,
        plan: &InferencePlan,
        pass: Pass,
    ) -> Result<Acc, ModelError> {
        let m = pass.tokens;
        let act_bytes = m as f64 * sh.hidden as f64 * sh.base.bytes();
        let tp = plan.tp;

        let mut layer = Acc::default();
        for (class, op) in sh.layer_ops(m) {
            self.add_compute(class, &op, pass, &mut layer)?;
        }
        let all_reduce = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: perfcast_core::Bytes(act_bytes),
            ranks: tp,
        };
        // After the attention output projection and after the MLP down projection.
        self.collective(all_reduce, pass, &mut layer)?;
        self.collective(all_reduce, pass, &mut layer)?;

        let mut acc = Acc::default();
        acc.add_scaled(&layer, sh.layers as f64);
        for (class, op) in sh.edge_ops(m, pass.logits) {
            self.add_compute(class, &op, pass, &mut acc)?;
        }
        // Vocab-parallel embedding: partial lookups summed across TP.
        self.collective(all_reduce, pass, &mut acc)?;
        // Logits gathered across TP (fp32).
        self.collective(
            Collective {
                kind: CollectiveKind::AllGather,
                bytes: perfcast_core::Bytes(pass.logits as f64 * sh.vocab_full as f64 * 4.0),
                ranks: tp,
            },
            pass,
            &mut acc,
        )?;
        // Pipeline hand-offs, one per stage boundary.
        if plan.pp > 1 {
            let mut p2p = Acc::default();
            self.collective(
                Collective {
                    kind: CollectiveKind::SendRecv,
                    bytes: perfcast_core::Bytes(act_bytes),
                    ranks: plan.gpus_per_replica(),
                },
                pass,
                &mut p2p,
            )?;
            acc.add_scaled(&p2p, (plan.pp - 1) as f64);
        }
        acc.overhead += self.options.step_overhead_us * 1e-6;
        Ok(acc)
    }

    /// Passes over each KV head a decode attention kernel makes (`q_len == 1`).
    fn kv_passes(&self, sh: &Shard, q_len: u64) -> f64 {
        if q_len == 1 {
            1.0 + self.options.decode_kv_group_reread * (sh.group() - 1) as f64
        } else {
            1.0
        }
    }

    /// One layer's attention core, as the op handed to the plugin and its time.
    ///
    /// Prefill: the core `Attention` op. Decode (one query row per head): the query heads
    /// that share a KV head are folded into the M dimension (`q_len = group`, one "head" per
    /// KV head, no causal mask), as GQA decode kernels do (TensorRT-LLM XQA, FlashInfer); the
    /// dot products run on the matrix engine or on the vector units, whichever is faster
    /// (masked multi-head attention kernels use CUDA cores for a single query row). The
    /// device-memory time is rescaled to the KV-cache format and to `kv_passes` passes.
    fn attention_timed(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q_len: u64,
        kv_len: u64,
    ) -> Result<(ComputeOp, Timed), ModelError> {
        let decode = q_len == 1;
        let a = if decode {
            let mut a = sh.attention_op(batch, sh.group(), kv_len);
            a.heads = sh.kv_heads;
            a.causal = false;
            a
        } else {
            sh.attention_op(batch, q_len, kv_len)
        };
        let op = ComputeOp::Attention(a);
        let op_bytes = op.min_bytes().0;
        let mem_scale = if op_bytes > 0.0 {
            sh.attention_bytes(&a, self.kv_passes(sh, q_len)) / op_bytes
        } else {
            1.0
        };
        let compute = if decode {
            self.vector_time(a.flops().0, sh.base, batch * sh.q_heads * kv_len)
        } else {
            None
        };
        let t = self.compute_adjusted(&op, pass, Adjust { mem_scale, compute })?;
        Ok((op, t))
    }

    /// One layer's attention core, accumulated.
    fn attention(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        q_len: u64,
        kv_len: u64,
    ) -> Result<Acc, ModelError> {
        let (op, t) = self.attention_timed(sh, pass, batch, q_len, kv_len)?;
        Ok(Acc {
            attention: t.busy,
            overhead: t.overhead,
            flops: t.flops,
            bytes: t.bytes,
            kernels: op.launches() as f64,
            ..Acc::default()
        })
    }

    /// Attention of one layer summed over decode steps j = 1..=n (context input_len + j), in
    /// `decode_segments` segments; within a segment the sum of an affine function over
    /// integer points is `count x (first + last) / 2`, exact.
    fn decode_attention_sum(
        &self,
        sh: &Shard,
        pass: Pass,
        batch: u64,
        input_len: u64,
        n: u64,
    ) -> Result<Acc, ModelError> {
        let segments = (self.options.decode_segments as u64).min(n).max(1);
        let mut acc = Acc::default();
        let mut lo = 1u64;
        for i in 0..segments {
            let hi = n * (i + 1) / segments;
            if hi < lo {
                continue;
            }
            let count = (hi - lo + 1) as f64;
            let first = self.attention(sh, pass, batch, 1, input_len + lo)?;
            if hi == lo {
                acc.add_scaled(&first, 1.0);
            } else {
                let last = self.attention(sh, pass, batch, 1, input_len + hi)?;
                acc.add_scaled(&first, count / 2.0);
                acc.add_scaled(&last, count / 2.0);
            }
            lo = hi + 1;
        }
        Ok(acc)
    }
}
