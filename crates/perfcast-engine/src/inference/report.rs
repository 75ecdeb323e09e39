//! What an evaluation returns.

use super::plan::InferencePlan;
use perfcast_core::workload::LayerSpans;
use perfcast_core::{Bytes, DType, Seconds, TimeBound};
use serde::Serialize;

/// Time of one phase split by what it is spent on. Buckets add up to `total`.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseBreakdown {
    /// Wall time of the phase (prefill: one pass; decode: all decode steps).
    pub total: Seconds,
    /// Linear layers and the LM head (device busy time, launch excluded).
    pub gemm: Seconds,
    /// Attention cores (score and context products, softmax).
    pub attention: Seconds,
    /// Norms, activations, rotary embedding, embedding lookup, sampling.
    pub other_ops: Seconds,
    /// Interconnect time of collectives and pipeline hand-offs (alpha-beta of the network).
    pub communication: Seconds,
    /// Fixed costs: device kernel launch, exposed host launch, per-collective software
    /// overhead, graph launch and per-step overhead.
    pub overheads: Seconds,
    /// Forward passes in the phase (1 for prefill, `output_len - 1` for decode).
    pub steps: u32,
    /// Floating-point operations of one tensor-parallel shard over the phase, summed over
    /// the pipeline stages (the work of one device when `pp = 1`).
    pub flops: f64,
    /// Device-memory bytes moved by one tensor-parallel shard over the phase, summed over
    /// the pipeline stages.
    pub device_bytes: f64,
}

impl PhaseBreakdown {
    /// Mean time of one step of the phase.
    pub fn per_step(&self) -> Seconds {
        if self.steps == 0 {
            Seconds::ZERO
        } else {
            self.total / self.steps as f64
        }
    }
}

/// Device memory of the most loaded device.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct MemoryReport {
    /// Weights of the largest pipeline stage's shard (plus embedding or LM head).
    pub weights: Bytes,
    /// KV cache for `batch x (input_len + output_len)` tokens.
    pub kv_cache: Bytes,
    /// Peak activation workspace (largest prefill chunk, logits).
    pub workspace: Bytes,
    /// Runtime reserve (CUDA context, libraries, communication buffers).
    pub reserve: Bytes,
    pub total: Bytes,
    /// Usable capacity: device tier capacity x `usable_memory_fraction`.
    pub capacity: Bytes,
    pub fits: bool,
    /// How much is missing when it does not fit (zero otherwise).
    pub shortfall: Bytes,
    /// KV cache per token on this device, were every layer caching it.
    pub kv_per_token: Bytes,
    /// What the largest stage's layers attend over, when some keep only a window or a chunk
    /// of each sequence (left out of the JSON when every layer attends fully).
    #[serde(skip_serializing_if = "LayerSpans::all_full")]
    pub kv_spans: LayerSpans,
}

/// Prefill or decode.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prefill,
    Decode,
}

impl Phase {
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }
}

/// One matmul of a phase on the roofline of the device.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct GemmPoint {
    pub phase: Phase,
    /// `qkv_proj`, `out_proj`, `mlp_up`, `mlp_down`, `lm_head`, or `attention` (score and
    /// context products together; m = query rows, n = key positions, k = head_dim).
    pub name: &'static str,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Times the op runs in one forward pass of a replica (layers, or 1).
    pub count: u64,
    /// Format of the matrix engine.
    pub dtype: DType,
    /// Format of the weights (B operand).
    pub weight_dtype: DType,
    /// FLOPs of one instance.
    pub flops: f64,
    /// Device-memory bytes of one instance.
    pub bytes: f64,
    /// FLOP per device-memory byte.
    pub intensity: f64,
    /// Ridge point of the device for this format: matrix peak over peak device bandwidth
    /// (FLOP/B), as rooflines are drawn (seed digest §2.9: A100 fp16 153, H100 fp16 295).
    pub ridge: f64,
    /// Time of one instance, launch included.
    pub time: Seconds,
    /// What limits the time in the model (efficiencies and fixed costs included).
    pub bound: TimeBound,
    /// `bound` in words: `compute`, `overhead`, or `memory:<tier kind>`.
    pub limiter: String,
    /// `count x time` over the phase's pass time (decode: the mean step).
    pub share_of_phase_time: f64,
}

/// The result of evaluating one plan.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct InferenceReport {
    pub model: String,
    pub system: String,
    pub plan: InferencePlan,
    /// Devices of the whole deployment (`tp x pp x replicas`).
    pub gpus: u32,
    /// Time to first token: the prefill pass (which samples the first token).
    pub ttft: Seconds,
    /// Time per output token after the first: mean decode step.
    pub tpot: Seconds,
    /// End to end: prefill plus every decode step.
    pub latency: Seconds,
    /// Output tokens per second of one replica's batch.
    pub tokens_per_s_batch: f64,
    /// Output tokens per second of the deployment (all replicas).
    pub tokens_per_s: f64,
    /// Output tokens per second per device.
    pub tokens_per_s_per_gpu: f64,
    pub prefill: PhaseBreakdown,
    pub decode: PhaseBreakdown,
    pub memory: MemoryReport,
    /// Kernels plus collectives launched per decode step.
    pub kernels_per_decode_step: u32,
    /// Prefill FLOPs over (TTFT x matrix peak of the GEMM format), per device: the prefill's
    /// model FLOP utilisation.
    pub prefill_mfu: f64,
    /// Device-memory bytes of the decode steps over (decode time x peak device bandwidth):
    /// how much of the bandwidth decode uses (low at small batch: seed digest §1.2, §7.4).
    pub decode_bandwidth_utilization: f64,
}
