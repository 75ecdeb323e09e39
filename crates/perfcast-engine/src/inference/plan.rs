//! What to evaluate (`InferencePlan`) and the serving-stack parameters shared by every
//! evaluation (`InferenceOptions`).

use crate::software::EfficiencyScales;
use perfcast_core::{AttentionKind, CollectiveAlgorithm, DType, Key, ModelError};
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}
fn bf16() -> DType {
    DType::Bf16
}
fn flash() -> AttentionKind {
    AttentionKind::Flash
}

/// One serving scenario: parallel degrees, batch, lengths, formats.
///
/// Static batching: `batch` requests of `input_len` prompt tokens each are prefilled together,
/// then decoded together for `output_len` tokens (the first output token comes out of the
/// prefill, the other `output_len - 1` out of decode steps).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InferencePlan {
    /// Tensor-parallel degree (Megatron column/row split; two all-reduces per layer).
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline stages (layers split evenly, the last stage takes the remainder).
    #[serde(default = "one")]
    pub pp: u32,
    /// Independent model replicas (data-parallel serving): throughput scales, latency does not.
    #[serde(default = "one", alias = "dp")]
    pub replicas: u32,
    /// Concurrent sequences per replica.
    pub batch: u32,
    /// Prompt tokens per sequence.
    pub input_len: u32,
    /// Generated tokens per sequence (including the first, which the prefill produces).
    pub output_len: u32,
    /// Format of the linear-layer weights (int4/int8/fp8 for weight-only or W8A8 quantisation).
    #[serde(default = "bf16")]
    pub weight_dtype: DType,
    /// Format of activations, and of the matrix engine unless the weights are wider.
    #[serde(default = "bf16")]
    pub activation_dtype: DType,
    /// Format of the KV cache.
    #[serde(default = "bf16")]
    pub kv_dtype: DType,
    /// Attention kernels: `flash` (fused; TensorRT-LLM, vLLM, FasterTransformer use fused
    /// kernels, hence the default) or `plain` (scores materialised in device memory).
    #[serde(default = "flash")]
    pub attention: AttentionKind,
    /// Decode steps replayed as a captured CUDA graph: no host-side launch cost per kernel,
    /// one graph launch per step. Prefill is never captured (vLLM and TensorRT-LLM capture
    /// decode only). Default false, as in the validation cases (TensorRT-LLM 0.5/0.6
    /// gptSessionBenchmark and NeMo runs without CUDA graphs).
    #[serde(default)]
    pub graph_capture: bool,
    /// Expert parallelism of a mixture-of-experts model inside a replica's `tp` ranks: the
    /// routed experts are spread over `ep` ranks, and each expert's inner width over the
    /// other `tp / ep` (expert tensor parallelism; TensorRT-LLM's `moe_ep_size` x
    /// `moe_tp_size` = `tp_size`). Must divide `tp` and the experts. Default 1.
    #[serde(default = "one")]
    pub ep: u32,
    /// Attention data parallelism (TensorRT-LLM `enable_attention_dp`, SGLang
    /// `--enable-dp-attention`: "DEP" with `ep = tp`): each of the `tp` ranks runs attention,
    /// the dense layers, the embedding and the LM head for its own sequences with the whole
    /// weights (no tensor parallelism there, no all-reduce), and only the experts are
    /// shared, their tokens dispatched to the expert's rank and combined back (two
    /// all-to-alls per MoE layer). Default false.
    #[serde(default)]
    pub attention_dp: bool,
    /// Under attention data parallelism, the tensor parallelism inside each attention group
    /// (SGLang `--tp N --dp D --enable-dp-attention`: N / D ranks per group; TensorRT-LLM's
    /// `enable_attention_dp` has 1): the `tp` ranks form `tp / attention_tp` groups, each
    /// running attention, the dense layers, the embedding and the LM head for its own
    /// sequences with those weights split over its `attention_tp` ranks (an all-reduce among
    /// them, as under plain tensor parallelism), the experts spread over all `tp` ranks; each
    /// rank of a group dispatches its `1 / attention_tp` share of the group's tokens to the
    /// experts. Must divide `tp`; only with `attention_dp`. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_tp: Option<u32>,
    /// Format of the routed experts' weights where it differs from `weight_dtype` (GPT-OSS
    /// ships MXFP4 experts beside bf16 attention). Default: `weight_dtype`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_dtype: Option<DType>,
}

impl InferencePlan {
    /// A single-device bf16 plan with flash attention and no graph capture.
    pub fn new(batch: u32, input_len: u32, output_len: u32) -> Self {
        InferencePlan {
            tp: 1,
            pp: 1,
            replicas: 1,
            batch,
            input_len,
            output_len,
            weight_dtype: DType::Bf16,
            activation_dtype: DType::Bf16,
            kv_dtype: DType::Bf16,
            attention: AttentionKind::Flash,
            graph_capture: false,
            ep: 1,
            attention_dp: false,
            attention_tp: None,
            expert_dtype: None,
        }
    }

    /// Ranks a pass's tokens split over on the attention side (the attention data-parallel
    /// degree): `tp / attention_tp` with attention data parallelism, else 1.
    pub fn attention_ranks(&self) -> u32 {
        if self.attention_dp {
            self.tp / self.attention_tp.unwrap_or(1).clamp(1, self.tp.max(1))
        } else {
            1
        }
    }

    /// Devices one replica uses.
    pub fn gpus_per_replica(&self) -> u32 {
        self.tp.saturating_mul(self.pp)
    }

    /// Devices of the whole deployment.
    pub fn gpus(&self) -> u32 {
        self.gpus_per_replica().saturating_mul(self.replicas)
    }
}

fn d_host_launch() -> f64 {
    18.0
}
fn d_graph_launch() -> f64 {
    20.0
}
fn d_collective() -> f64 {
    11.0
}
fn d_step() -> f64 {
    0.0
}
fn d_overlap() -> f64 {
    0.74
}
fn d_reread() -> f64 {
    0.5
}
fn d_reserve() -> f64 {
    1.0
}
fn d_usable() -> f64 {
    0.95
}
fn d_prefill_tokens() -> u32 {
    8192
}
fn d_segments() -> u32 {
    4
}
fn yes() -> bool {
    true
}

/// Serving-stack parameters: fixed costs that are not properties of the hardware plugins
/// (those come from the `ComputeUnit`, `MemoryTier` and `Interconnect` of the `System`), shared
/// by every plan evaluated.
///
/// The defaults of `host_launch_us`, `collective_overhead_us`, `step_overhead_us` and
/// `compute_memory_overlap` were fitted jointly by `perfcast calibrate` (default set,
/// configs/validation/CALIBRATION.md, 2026-12-04) with the hardware presets timing their GEMMs
/// from the kernel tables, on the 34 static public inference cases of
/// `configs/validation/cases.toml` (groups llama2-e2e-latency-a100, trtllm-v05-ttft,
/// trtllm-v061-static: Llama-2 7B/13B/70B, A100 and H100, fp16 and fp8, batch 1 to 1,280),
/// then rounded; the serving groups, not fitted on, moved from 21.2% / 6.8% (trtllm-v014-online
/// / -v017-offline) at the previous defaults to 11.1% / 10.5%. `decode_kv_group_reread` was
/// fitted before (`decode_kv_group_reread = 0` breaks the GQA 70B throughput cases, up to 90%,
/// the evidence for the re-read term). Never set per case.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InferenceOptions {
    /// Host-side (CPU) cost of launching one kernel or collective when the step is not
    /// graph-captured, microseconds. The GPU runs ahead of the CPU only while kernels take
    /// longer than this; a kernel shorter than it leaves the GPU idle, so each kernel costs
    /// `max(device time, host_launch_us)`. CUDA launch latency is 2-5 µs per kernel
    /// (NVIDIA CUDA Graphs blog, 2019); framework dispatch (TensorRT enqueue, PyTorch
    /// operator dispatch) adds 5-20 µs (vLLM and SGLang motivate CUDA graphs with this).
    /// Default 18 µs (fitted; the seed digest §3.2 derives ~80 µs of fixed cost per
    /// all-reduce-plus-kernels at TP 8, i.e. per ~5 kernels).
    #[serde(default = "d_host_launch")]
    pub host_launch_us: f64,
    /// Cost of launching one captured graph (one per graph-captured decode step), µs.
    #[serde(default = "d_graph_launch")]
    pub graph_launch_us: f64,
    /// Fixed cost per collective call beyond the interconnect's alpha-beta time, µs: NCCL
    /// kernel launch, proxy hand-shake and the barrier-like synchronisation of a small
    /// all-reduce (nccl-tests report 10-25 µs for 8 KB all-reduces on 8 GPUs with NVSwitch,
    /// of which the interconnect plugin's alpha terms model part). Default 11 µs (fitted).
    #[serde(default = "d_collective")]
    pub collective_overhead_us: f64,
    /// Fixed cost per forward pass (prefill or decode step): sampling set-up, host
    /// synchronisation, scheduling, µs. Default 0 (fitted: the per-kernel and per-collective
    /// costs carry the fixed costs the public cases show).
    #[serde(default = "d_step")]
    pub step_overhead_us: f64,
    /// How much of a kernel's compute and memory time overlap, in [0, 1]: 1 is the roofline
    /// (`max(compute, memory)`), 0 adds them. Applied to every compute op as
    /// `max + (1 - overlap) * min`. Near the ridge point a kernel cannot keep both the
    /// tensor cores and the memory system saturated (both pipelines stall on each other), so
    /// measured times of such GEMMs (a 128-token prefill) sit above the roofline; far from
    /// the ridge the `min` term is negligible. Default 0.74 (fitted: the 128-token TTFT
    /// cases need it, the 2,048-token ones are insensitive).
    #[serde(default = "d_overlap")]
    pub compute_memory_overlap: f64,
    /// Decode attention with grouped KV heads (GQA/MQA): fraction of the extra per-query-head
    /// passes over the KV cache that reach device memory, in [0, 1]. 0: the kernel reads each
    /// KV head once for its whole query group (FlashDecoding, TensorRT-LLM XQA, FlashInfer);
    /// 1: one pass per query head (masked multi-head attention kernels that map one query
    /// head to one thread block, e.g. TensorRT-LLM up to 0.6); in between: the L2 cache
    /// catches part of the re-reads. Default 0.5 (fitted on the GQA Llama-2 70B static-batch
    /// cases run with TensorRT-LLM 0.6.1, before its XQA kernel); set 0 for current runtimes.
    #[serde(default = "d_reread")]
    pub decode_kv_group_reread: f64,
    /// Device memory the runtime keeps for itself (CUDA context, cuBLAS workspaces, NCCL
    /// buffers), GiB.
    #[serde(default = "d_reserve")]
    pub runtime_reserve_gib: f64,
    /// Fraction of the device capacity that allocations may fill (fragmentation headroom;
    /// vLLM's `gpu_memory_utilization` defaults to 0.9, TensorRT-LLM gives the KV cache 0.9
    /// of what is free after weights).
    #[serde(default = "d_usable")]
    pub usable_memory_fraction: f64,
    /// Tokens one prefill pass processes at most, for the activation workspace (TensorRT-LLM
    /// `max_num_tokens`, vLLM `max_num_batched_tokens`); a single prompt longer than this is
    /// processed whole.
    #[serde(default = "d_prefill_tokens")]
    pub max_prefill_tokens: u32,
    /// Segments of the closed-form decode sum (attention time is affine in the context length
    /// within a segment; the sum over a segment is exact for an affine function).
    #[serde(default = "d_segments")]
    pub decode_segments: u32,
    /// Collective algorithm asked of the interconnect (`auto` lets it pick ring or tree).
    #[serde(default)]
    pub collective_algorithm: CollectiveAlgorithm,
    /// Time a MoE layer's routed experts from the device's measured fused-MoE blocks where it
    /// has them ([`perfcast_core::ComputeUnit::routed_experts_time`]; the tables time
    /// TensorRT-LLM 1.x's fused MoE); `false` times the grouped GEMMs op by op, as for a
    /// runtime whose MoE kernels the tables do not time (TensorRT-LLM's engine plugin of the
    /// 0.x releases). Default true.
    #[serde(default = "yes")]
    pub measured_moe: bool,
    /// Time multi-head and grouped-query attention cores (prefill and decode) from the
    /// device's measured attention kernels where it has them
    /// ([`perfcast_core::ComputeUnit::inference_attention_time`]; the tables time TensorRT-LLM
    /// 1.x's context FMHA and XQA decode kernels); `false` times them with the analytical
    /// model. Default true.
    #[serde(default = "yes")]
    pub measured_attention: bool,
    /// Multipliers on the runtime's kernel throughput (set by a stack; not modelled yet).
    /// Default 1.
    #[serde(default)]
    pub efficiency: EfficiencyScales,
}

impl Default for InferenceOptions {
    fn default() -> Self {
        InferenceOptions {
            host_launch_us: d_host_launch(),
            graph_launch_us: d_graph_launch(),
            collective_overhead_us: d_collective(),
            step_overhead_us: d_step(),
            compute_memory_overlap: d_overlap(),
            decode_kv_group_reread: d_reread(),
            runtime_reserve_gib: d_reserve(),
            usable_memory_fraction: d_usable(),
            max_prefill_tokens: d_prefill_tokens(),
            decode_segments: d_segments(),
            collective_algorithm: CollectiveAlgorithm::Auto,
            measured_moe: true,
            measured_attention: true,
            efficiency: EfficiencyScales::default(),
        }
    }
}

impl InferenceOptions {
    /// Reject values outside their documented ranges, naming the key.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (key, v) in [
            (Key::options("host_launch_us"), self.host_launch_us),
            (Key::options("graph_launch_us"), self.graph_launch_us),
            (
                Key::options("collective_overhead_us"),
                self.collective_overhead_us,
            ),
            (Key::options("step_overhead_us"), self.step_overhead_us),
            (
                Key::options("runtime_reserve_gib"),
                self.runtime_reserve_gib,
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ModelError::invalid(key, v, "must be a finite number >= 0"));
            }
        }
        for (key, v) in [
            (
                Key::options("compute_memory_overlap"),
                self.compute_memory_overlap,
            ),
            (
                Key::options("decode_kv_group_reread"),
                self.decode_kv_group_reread,
            ),
        ] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err(ModelError::invalid(key, v, "must be in [0, 1]"));
            }
        }
        let u = self.usable_memory_fraction;
        if !(u.is_finite() && u > 0.0 && u <= 1.0) {
            return Err(ModelError::invalid(
                Key::options("usable_memory_fraction"),
                u,
                "must be in (0, 1]",
            ));
        }
        if self.max_prefill_tokens == 0 {
            return Err(ModelError::invalid(
                Key::options("max_prefill_tokens"),
                0,
                "must be >= 1",
            ));
        }
        self.efficiency.validate("")?;
        if !(1..=64).contains(&self.decode_segments) {
            return Err(ModelError::invalid(
                Key::options("decode_segments"),
                self.decode_segments,
                "must be in 1..=64",
            ));
        }
        Ok(())
    }
}
