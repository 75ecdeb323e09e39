//! The types of a cases file's `[[case]]` (serde, `deny_unknown_fields` throughout), the
//! metrics of `[case.measured]`, and the degrees of a checked case.

use perfcast_core::workload::{FfnAct, MoeSpec};
use perfcast_core::DType;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// `kind` of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Training,
    Inference,
}

impl Kind {
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Training => "training",
            Kind::Inference => "inference",
        }
    }
}

/// `model.attention`: the core's attention layout.
pub use perfcast_core::workload::AttentionLayout as AttentionType;

/// `[case.model.mla]` (multi-head latent attention, DeepSeek-V2/V3): the core's latent
/// attention.
pub use perfcast_core::workload::MlaSpec;

/// `[case.model]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseModel {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    #[serde(default)]
    pub head_dim: Option<u64>,
    pub ffn_hidden: u64,
    pub ffn_act: FfnAct,
    pub vocab: u64,
    #[serde(default)]
    pub seq_len: Option<u64>,
    #[serde(default)]
    pub tied_embeddings: Option<bool>,
    #[serde(default)]
    pub attention: Option<AttentionType>,
    #[serde(default)]
    pub params_b: Option<f64>,
    #[serde(default)]
    pub moe: Option<MoeSpec>,
    #[serde(default)]
    pub mla: Option<MlaSpec>,
}

/// `[case.system]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSystem {
    /// An `id` of the accelerator catalog (`configs/validation/accelerators.toml`).
    pub gpu: String,
    pub num_gpus: u64,
    pub gpus_per_node: u64,
    #[serde(default)]
    pub scaleout_gbps_per_gpu: Option<f64>,
}

/// `[case.parallel]`: every field optional here; which are required depends on the kind
/// (checked after parsing, with an error naming the missing key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseParallel {
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub dp: Option<u64>,
    pub cp: Option<u64>,
    pub ep: Option<u64>,
    pub sp: Option<bool>,
    pub vpp: Option<u64>,
    pub zero_stage: Option<u64>,
    pub micro_batch: Option<u64>,
    pub global_batch: Option<u64>,
    /// Expert tensor parallelism (Megatron `--expert-tensor-parallel-size`; inference: the
    /// MoE tensor-parallel degree). Default 1.
    pub etp: Option<u64>,
    /// MoE token dispatch/combine implementation.
    pub moe_dispatcher: Option<MoeDispatcher>,
    /// FSDP/HSDP sharding-group size when it differs from `dp` (training).
    pub fsdp_shard: Option<u64>,
    /// Attention data-parallel across the TP ranks (inference, MoE).
    pub attention_dp: Option<bool>,
    /// Under `attention_dp`, the tensor parallelism inside each attention group (inference;
    /// SGLang `--tp N --dp D --enable-dp-attention`: N / D). Default 1.
    pub attention_tp: Option<u64>,
    /// Tensor-parallel communication overlapped with the GEMMs (Megatron
    /// `--tp-comm-overlap`, Transformer Engine userbuffers). Default false.
    pub tp_comm_overlap: Option<bool>,
    /// MoE dispatch and combine of one micro-batch overlapped with another's compute
    /// (Megatron-Core `--overlap-moe-expert-parallel-comm`, DeepSeek's DualPipe). Default
    /// false; MoE models only.
    pub ep_comm_overlap: Option<bool>,
    /// The pipeline schedule where the source names one (absent: 1F1B, interleaved with
    /// `vpp` > 1).
    pub schedule: Option<CaseSchedule>,
    /// How tokens were routed to the experts. Default learned; MoE models only.
    pub moe_routing: Option<MoeRouting>,
}

/// `parallel.schedule`: the schedules a case may name (SCHEMA.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseSchedule {
    #[serde(rename = "1f1b")]
    OneFOneB,
    #[serde(rename = "interleaved")]
    Interleaved,
    #[serde(rename = "gpipe")]
    Gpipe,
    #[serde(rename = "dualpipe")]
    DualPipe,
    #[serde(rename = "zb-h1")]
    ZbH1,
    #[serde(rename = "zb-v")]
    ZbV,
}

impl CaseSchedule {
    pub const fn name(self) -> &'static str {
        match self {
            CaseSchedule::OneFOneB => "1f1b",
            CaseSchedule::Interleaved => "interleaved",
            CaseSchedule::Gpipe => "gpipe",
            CaseSchedule::DualPipe => "dualpipe",
            CaseSchedule::ZbH1 => "zb-h1",
            CaseSchedule::ZbV => "zb-v",
        }
    }
}

/// `parallel.moe_routing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoeRouting {
    /// The model's trained router.
    #[default]
    Learned,
    /// Tokens forced evenly over the experts for benchmarking (Megatron
    /// `--moe-router-force-load-balancing`, NeMo AutoModel's fake balanced gate).
    Balanced,
}

/// `parallel.moe_dispatcher`: how MoE tokens reach their experts and come back (the core's
/// dispatcher: `alltoall`, `allgather`, `deepep`, `hybridep`).
pub use perfcast_core::parallel::Dispatcher as MoeDispatcher;

/// `training.recompute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    Selective,
    Full,
    /// Not published.
    Unknown,
}

/// `training.precision` / `inference.precision` / `inference.kv_precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp16,
    Bf16,
    Fp8,
    Int8,
    Int4,
    Fp4,
}

impl Precision {
    pub const fn dtype(self) -> DType {
        match self {
            Precision::Fp16 => DType::Fp16,
            Precision::Bf16 => DType::Bf16,
            Precision::Fp8 => DType::Fp8,
            Precision::Int8 => DType::Int8,
            Precision::Int4 => DType::Int4,
            Precision::Fp4 => DType::Fp4,
        }
    }
}

/// `training.fp8_recipe`: the engine's recipes, by the same names.
pub use perfcast_engine::training::Fp8Recipe;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    Adam,
}

/// `[case.training] task`: the engine's own (`pretrain`, `sft`, `lora`).
pub use perfcast_engine::training::Task;

/// `[case.training]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseTraining {
    pub recompute: Recompute,
    #[serde(default)]
    pub recompute_layers: Option<u64>,
    pub precision: Precision,
    #[serde(default)]
    pub fp8_recipe: Option<Fp8Recipe>,
    pub optimizer: Optimizer,
    #[serde(default)]
    pub task: Task,
}

/// `inference.batch`: a count or `"max"` (engine-chosen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Batch {
    Fixed(u64),
    Max,
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Batch;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive integer or \"max\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Batch, E> {
                if v >= 1 {
                    Ok(Batch::Fixed(v as u64))
                } else {
                    Err(E::custom(format!(
                        "invalid batch {v}: expected a positive integer or \"max\""
                    )))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Batch, E> {
                self.visit_i64(v.min(i64::MAX as u64) as i64)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Batch, E> {
                if v == "max" {
                    Ok(Batch::Max)
                } else {
                    Err(E::custom(format!(
                        "invalid batch \"{v}\": expected a positive integer or \"max\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `inference.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Static,
    OfflineMaxThroughput,
    Server,
    Latency,
}

impl Mode {
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::OfflineMaxThroughput => "offline-max-throughput",
            Mode::Server => "server",
            Mode::Latency => "latency",
        }
    }
}

/// `[case.inference]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseInference {
    pub batch: Batch,
    pub input_len: u64,
    pub output_len: u64,
    pub precision: Precision,
    #[serde(default)]
    pub kv_precision: Option<Precision>,
    pub mode: Mode,
    /// Offered load, requests/s (mode `server` only).
    #[serde(default)]
    pub request_rate: Option<f64>,
    /// Requests in the benchmark run.
    #[serde(default)]
    pub num_requests: Option<u64>,
    /// Closed-loop clients / requests in flight imposed by the load generator.
    #[serde(default)]
    pub concurrency: Option<u64>,
    /// Engine limit on concurrently scheduled sequences.
    #[serde(default)]
    pub max_batch: Option<u64>,
}

/// `measured.flops_convention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlopsConvention {
    /// Useful FLOPs; recompute not counted.
    Model,
    /// Recomputed forward counted.
    Hardware,
}

/// `measured.attention_flops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionFlops {
    /// Full s x s score/context GEMMs counted (the schema's default formulas).
    #[default]
    Noncausal,
    /// Halved.
    Causal,
}

/// `[case.measured]`: published metrics plus the metadata that says how they were counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub iteration_time_s: Option<f64>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
    pub mfu: Option<f64>,
    pub hfu: Option<f64>,
    pub memory_gib_per_gpu: Option<f64>,
    pub layer_fwd_ms: Option<f64>,
    pub layer_bwd_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub latency_s: Option<f64>,
    pub time_to_train_min: Option<f64>,
    pub requests_per_s: Option<f64>,
    pub gpu_hours_per_trillion_tokens: Option<f64>,
    pub flops_convention: Option<FlopsConvention>,
    pub peak_tflops_basis: Option<f64>,
    pub attention_flops: Option<AttentionFlops>,
    /// What `layer_fwd_ms` / `layer_bwd_ms` time.
    pub layer_scope: Option<LayerScope>,
    /// Which statistic over a serving run's requests `ttft_ms`, `tpot_ms` and `latency_s`
    /// are (default the mean).
    pub statistic: Option<Statistic>,
}

/// `measured.statistic`: a statistic over a serving run's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// The mean (what benchmark clients report first).
    #[default]
    Mean,
    /// The median.
    Median,
    /// The 90th percentile.
    P90,
    /// The 99th percentile.
    P99,
}

impl Statistic {
    /// Its name in the schema.
    pub const fn name(self) -> &'static str {
        match self {
            Statistic::Mean => "mean",
            Statistic::Median => "median",
            Statistic::P90 => "p90",
            Statistic::P99 => "p99",
        }
    }
}

/// `measured.layer_scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerScope {
    /// One whole transformer layer.
    #[default]
    Transformer,
    /// Only the MoE block: router, dispatch/combine, expert GEMMs and shared experts.
    Moe,
}

/// A metric of the schema (the names of `[case.measured]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    IterationTimeS,
    TokensPerSPerGpu,
    TokensPerS,
    TflopsPerGpu,
    Mfu,
    Hfu,
    MemoryGibPerGpu,
    LayerFwdMs,
    LayerBwdMs,
    TtftMs,
    TpotMs,
    LatencyS,
    TimeToTrainMin,
    RequestsPerS,
    GpuHoursPerTrillionTokens,
}

impl Metric {
    pub const ALL: [Metric; 15] = [
        Metric::IterationTimeS,
        Metric::TokensPerSPerGpu,
        Metric::TokensPerS,
        Metric::TflopsPerGpu,
        Metric::Mfu,
        Metric::Hfu,
        Metric::MemoryGibPerGpu,
        Metric::LayerFwdMs,
        Metric::LayerBwdMs,
        Metric::TtftMs,
        Metric::TpotMs,
        Metric::LatencyS,
        Metric::TimeToTrainMin,
        Metric::RequestsPerS,
        Metric::GpuHoursPerTrillionTokens,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Metric::IterationTimeS => "iteration_time_s",
            Metric::TokensPerSPerGpu => "tokens_per_s_per_gpu",
            Metric::TokensPerS => "tokens_per_s",
            Metric::TflopsPerGpu => "tflops_per_gpu",
            Metric::Mfu => "mfu",
            Metric::Hfu => "hfu",
            Metric::MemoryGibPerGpu => "memory_gib_per_gpu",
            Metric::LayerFwdMs => "layer_fwd_ms",
            Metric::LayerBwdMs => "layer_bwd_ms",
            Metric::TtftMs => "ttft_ms",
            Metric::TpotMs => "tpot_ms",
            Metric::LatencyS => "latency_s",
            Metric::TimeToTrainMin => "time_to_train_min",
            Metric::RequestsPerS => "requests_per_s",
            Metric::GpuHoursPerTrillionTokens => "gpu_hours_per_trillion_tokens",
        }
    }

    /// Metrics the schema allows for a kind (`check_schema.py` TRAIN_METRICS / INFER_METRICS).
    pub fn allowed(self, kind: Kind) -> bool {
        use Metric::*;
        match kind {
            Kind::Training => !matches!(self, TtftMs | TpotMs | LatencyS | RequestsPerS),
            Kind::Inference => matches!(
                self,
                TokensPerS
                    | TokensPerSPerGpu
                    | TtftMs
                    | TpotMs
                    | LatencyS
                    | MemoryGibPerGpu
                    | TflopsPerGpu
                    | Mfu
                    | RequestsPerS
            ),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Measured {
    pub fn get(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::IterationTimeS => self.iteration_time_s,
            Metric::TokensPerSPerGpu => self.tokens_per_s_per_gpu,
            Metric::TokensPerS => self.tokens_per_s,
            Metric::TflopsPerGpu => self.tflops_per_gpu,
            Metric::Mfu => self.mfu,
            Metric::Hfu => self.hfu,
            Metric::MemoryGibPerGpu => self.memory_gib_per_gpu,
            Metric::LayerFwdMs => self.layer_fwd_ms,
            Metric::LayerBwdMs => self.layer_bwd_ms,
            Metric::TtftMs => self.ttft_ms,
            Metric::TpotMs => self.tpot_ms,
            Metric::LatencyS => self.latency_s,
            Metric::TimeToTrainMin => self.time_to_train_min,
            Metric::RequestsPerS => self.requests_per_s,
            Metric::GpuHoursPerTrillionTokens => self.gpu_hours_per_trillion_tokens,
        }
    }

    /// Published metrics, in the schema's order.
    pub fn metrics(&self) -> impl Iterator<Item = (Metric, f64)> + '_ {
        Metric::ALL
            .into_iter()
            .filter_map(|m| self.get(m).map(|v| (m, v)))
    }
}

/// `[case.reference]`: a step time derived from published values. Not a measurement: shown,
/// never scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub iteration_time_s: f64,
    pub derived_from: String,
}

/// One `[[case]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    pub kind: Kind,
    pub group: String,
    pub source: String,
    /// The framework and version that produced the measurement (what the software-stack
    /// table maps to a stack profile).
    #[serde(default)]
    pub software: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub derived: Vec<String>,
    #[serde(default)]
    pub assumed: Vec<String>,
    #[serde(default)]
    pub source_inconsistency: Option<String>,
    pub model: CaseModel,
    pub system: CaseSystem,
    pub parallel: CaseParallel,
    #[serde(default)]
    pub training: Option<CaseTraining>,
    #[serde(default)]
    pub inference: Option<CaseInference>,
    pub measured: Measured,
    #[serde(default)]
    pub reference: Option<Reference>,
}

/// The training plan of a case, all degrees present (after
/// [`CasesFile::parse`](super::CasesFile::parse) checked them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainingParallel {
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    pub cp: u64,
    pub ep: u64,
    pub sp: bool,
    pub vpp: u64,
    pub zero_stage: u64,
    pub micro_batch: u64,
    pub global_batch: u64,
}

/// The inference plan of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferenceParallel {
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    pub ep: u64,
}

impl Case {
    /// The training degrees (`None` for an inference case).
    pub fn training_parallel(&self) -> Option<TrainingParallel> {
        let p = &self.parallel;
        Some(TrainingParallel {
            tp: p.tp?,
            pp: p.pp?,
            dp: p.dp?,
            cp: p.cp?,
            ep: p.ep?,
            sp: p.sp?,
            vpp: p.vpp?,
            zero_stage: p.zero_stage?,
            micro_batch: p.micro_batch?,
            global_batch: p.global_batch?,
        })
        .filter(|_| self.kind == Kind::Training)
    }

    /// The inference degrees (`None` for a training case).
    pub fn inference_parallel(&self) -> Option<InferenceParallel> {
        let p = &self.parallel;
        Some(InferenceParallel {
            tp: p.tp?,
            pp: p.pp?,
            dp: p.dp?,
            ep: p.ep.unwrap_or(1),
        })
        .filter(|_| self.kind == Kind::Inference)
    }

    /// Tokens processed per training step (`global_batch x seq_len`).
    pub fn tokens_per_step(&self) -> Option<f64> {
        Some(self.parallel.global_batch? as f64 * self.model.seq_len? as f64)
    }
}
