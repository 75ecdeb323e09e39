//! The sub-tables of `[software]`.

use perfcast_core::parallel::CpComm;
use perfcast_core::AttentionKind;
use perfcast_engine::software::{CastCostsOverride, SelectiveRecompute};
use perfcast_engine::training::Fp8Recipe;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The attention kernel a stack runs: a kernel family of the plan's `attention`
/// ([`AttentionKind`]).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKernel {
    /// Scores materialised in device memory (Megatron-LM before FlashAttention).
    Plain,
    /// FlashAttention-2 and kernels of its generation (the engines' default `flash`).
    #[default]
    Flash,
    /// The same family as `flash`, named after FlashAttention-2 (also PyTorch SDPA's flash
    /// backend).
    Flash2,
    /// FlashAttention-3 (Hopper).
    Flash3,
    /// cuDNN fused attention (Transformer Engine `FusedAttention`, PyTorch SDPA's cuDNN
    /// backend).
    Cudnn,
}

impl AttentionKernel {
    /// The plan's attention kind.
    pub fn kind(self) -> AttentionKind {
        match self {
            AttentionKernel::Plain => AttentionKind::Plain,
            AttentionKernel::Flash | AttentionKernel::Flash2 => AttentionKind::Flash,
            AttentionKernel::Flash3 => AttentionKind::Flash3,
            AttentionKernel::Cudnn => AttentionKind::Cudnn,
        }
    }
}

/// A GPU architecture generation, for what a stack picks by generation (Transformer Engine
/// prefers cuDNN attention on Hopper and later, FlashAttention on Ampere). A configuration
/// names it as `device.generation`; the validation harness takes it from the accelerator
/// catalog's `arch`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum GpuGeneration {
    /// sm70 (V100).
    Volta,
    /// sm80 (A100, A10, A30).
    Ampere,
    /// sm89 (L4, L40S).
    Ada,
    /// sm90 (H100, H200, H800, GH200).
    Hopper,
    /// sm100 and later (B200, GB200, B300).
    Blackwell,
}

impl GpuGeneration {
    /// Every generation, oldest first.
    pub const ALL: [GpuGeneration; 5] = [
        GpuGeneration::Volta,
        GpuGeneration::Ampere,
        GpuGeneration::Ada,
        GpuGeneration::Hopper,
        GpuGeneration::Blackwell,
    ];
    /// The name configurations use.
    pub const fn name(self) -> &'static str {
        match self {
            GpuGeneration::Volta => "volta",
            GpuGeneration::Ampere => "ampere",
            GpuGeneration::Ada => "ada",
            GpuGeneration::Hopper => "hopper",
            GpuGeneration::Blackwell => "blackwell",
        }
    }
    /// The generation named `name` (case-insensitive).
    pub fn parse(name: &str) -> Option<GpuGeneration> {
        GpuGeneration::ALL
            .into_iter()
            .find(|g| g.name().eq_ignore_ascii_case(name))
    }
}

/// `[software.attention]`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AttentionSw {
    /// `plain`, `flash` (FlashAttention-2 class; default), `flash2` (the same), `flash3`,
    /// `cudnn`.
    pub kernel: AttentionKernel,
    /// The fused kernel on a GPU generation where the framework picks another one
    /// (`{ ampere = "flash2" }`); `plain` is not allowed here.
    pub by_generation: BTreeMap<GpuGeneration, AttentionKernel>,
}

impl AttentionSw {
    /// The kernel on a device of `generation` (the stack's `kernel` when the generation is
    /// unknown or has no entry).
    pub fn on(&self, generation: Option<GpuGeneration>) -> AttentionKind {
        generation
            .and_then(|g| self.by_generation.get(&g))
            .unwrap_or(&self.kernel)
            .kind()
    }
}

/// Whether a framework overlaps tensor-parallel collectives with GEMMs.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TpComm {
    /// The framework has no such overlap: plans default to none and the search does not try
    /// it.
    Off,
    /// The framework offers it, off unless asked for (Megatron-Core `--tp-comm-overlap`): plans
    /// default to none, the search tries both, the validation harness reads the flag from a
    /// case's notes. Default.
    #[default]
    Available,
    /// On by default (torchtitan async TP, NeMo's performance recipes).
    On,
}

fn yes() -> bool {
    true
}

/// `[software.overlap]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OverlapSw {
    /// TP collectives behind GEMMs: `off`, `available` (default), `on`.
    #[serde(default)]
    pub tp_comm: TpComm,
    /// The gradient reduction overlapped with the backward (bucketed DDP). Default true.
    #[serde(default = "yes")]
    pub grad_reduce: bool,
    /// Parameter all-gathers overlapped with the forward. Default true.
    #[serde(default = "yes")]
    pub param_gather: bool,
    /// Context-parallel K/V exchange: `p2p` (ring, overlapped; default) or `all_gather`
    /// (exposed).
    #[serde(default)]
    pub cp_exchange: CpComm,
    /// Fraction of the GEMM time that hides TP collectives when overlapped (`tensor`'s
    /// `overlap_efficiency`; unset: the plugin default).
    #[serde(default)]
    pub tp_comm_efficiency: Option<f64>,
    /// `data`'s `overlap_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub grad_reduce_efficiency: Option<f64>,
    /// `zero`/`fsdp`'s `prefetch_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub param_gather_efficiency: Option<f64>,
    /// `context`'s `overlap_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub cp_exchange_efficiency: Option<f64>,
    /// Pipeline hand-offs of interleaved schedules overlapped with compute (`pipeline`'s
    /// `overlap_p2p`; unset: the plugin default).
    #[serde(default)]
    pub pp_p2p: Option<bool>,
}

impl Default for OverlapSw {
    fn default() -> Self {
        OverlapSw {
            tp_comm: TpComm::Available,
            grad_reduce: true,
            param_gather: true,
            cp_exchange: CpComm::P2p,
            tp_comm_efficiency: None,
            grad_reduce_efficiency: None,
            param_gather_efficiency: None,
            cp_exchange_efficiency: None,
            pp_p2p: None,
        }
    }
}

/// `[software.host]`: unset times keep each engine's own default (training: 0, the host
/// always ahead; inference: `InferenceOptions`' fitted values).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct HostSw {
    /// CUDA graphs: training replays captured layer graphs; inference captures decode steps.
    pub cuda_graphs: bool,
    /// Host time to issue one kernel outside a graph, µs.
    pub kernel_launch_us: Option<f64>,
    /// Host time to launch one captured graph, µs.
    pub graph_launch_us: Option<f64>,
    /// Fixed host time per training step or per inference forward pass, µs.
    pub step_overhead_us: Option<f64>,
}

/// `[software.fp8]`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Fp8Sw {
    /// The recipe low-precision training uses when the plan names none (of the plan's
    /// format: an fp8 recipe for `precision = "fp8"`, `nvfp4` for `fp4`).
    pub recipe: Option<Fp8Recipe>,
    /// Parameters all-gathered in fp8.
    pub param_gather: bool,
    /// The GEMM inputs kept for the weight gradient in the recipe's format (Transformer
    /// Engine saves the quantised input) rather than in 16 bits (torchao).
    pub saved_inputs: bool,
    /// Each weight quantised once per step and reused by its micro-batches (Transformer
    /// Engine's `is_first_microbatch` cache) rather than once per micro-batch.
    pub weight_cache: bool,
    /// The framework's own quantisation costs per recipe, where they differ from the fused
    /// kernels' compulsory traffic (`[software.fp8.recipes.NAME]`, each field optional).
    pub recipes: BTreeMap<Fp8Recipe, CastCostsOverride>,
}

fn one() -> u32 {
    1
}

/// `[software.fsdp]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FsdpSw {
    /// Per-parameter sharding (FSDP2) rather than one flat parameter per unit (FSDP1).
    #[serde(default)]
    pub per_parameter: bool,
    /// Units gathered ahead of the one computing. Default 1.
    #[serde(default = "one")]
    pub prefetch_depth: u32,
    /// ZeRO-3/FSDP weights freed after the forward and gathered again for the backward
    /// (unset: the `zero`/`fsdp` strategy's default, true).
    #[serde(default)]
    pub reshard_after_forward: Option<bool>,
}

impl Default for FsdpSw {
    fn default() -> Self {
        FsdpSw {
            per_parameter: false,
            prefetch_depth: 1,
            reshard_after_forward: None,
        }
    }
}

/// `[software.recompute]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RecomputeSw {
    /// What `recompute = "selective"` means: `attention_core` (Megatron; default) or `op_sac`
    /// (torchtitan's per-op SAC).
    pub selective: SelectiveRecompute,
}

/// `[software.parallel]`: which parallelisation features the framework offers (unset: all),
/// read by the search (a plan a configuration gives explicitly is evaluated as given), and
/// its default interleaving.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ParallelSw {
    /// The ZeRO / distributed-optimizer / FSDP sharding stages it implements (e.g. `[0]` for a
    /// framework without any).
    pub zero_stages: Option<Vec<u8>>,
    /// Whether it has Megatron-style sequence parallelism.
    pub sequence_parallel: Option<bool>,
    /// The recompute policies it implements (registry names).
    pub recompute: Option<Vec<String>>,
    /// The model chunks per pipeline rank (interleaving degree) it runs an interleaved
    /// schedule with when the user gives none: a plan with `schedule = "interleaved-1f1b"` and
    /// no `vpp` runs it, and validation models a case whose source names an interleaved
    /// schedule but not its degree (`parallel.vpp` assumed) with it; unset (a framework that
    /// needs the degree given, e.g. Megatron's `--num-layers-per-virtual-pipeline-stage`):
    /// such a plan keeps `vpp` 1, and validation takes the fastest degree that fits.
    pub stages_per_rank: Option<u32>,
}

/// `[software.moe]`: what the framework's mixture-of-experts layers do beyond the plan.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MoeSw {
    /// How its benchmarking "balanced" router (a case's `moe_routing = "balanced"`) places
    /// a token's experts.
    pub balanced_gate: BalancedGate,
}

/// `software.moe.balanced_gate`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BalancedGate {
    /// Experts drawn evenly at random (Megatron-Core `--moe-router-force-load-balancing`:
    /// random logits): balanced, a token's experts anywhere.
    #[default]
    Uniform,
    /// Token `i` to experts `i·k .. i·k + k - 1` (mod E) (NeMo AutoModel's
    /// `FakeBalancedGate`, nemo_automodel/components/moe/layers.py): a token's experts are
    /// `k` consecutive ones, i.e. one group of `k` (group-limited routing with `E / k` groups).
    Consecutive,
}

/// `[software.serving]`: inference-runtime options (unset: `InferenceOptions`' defaults).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ServingSw {
    /// Fixed cost per collective call beyond alpha-beta, µs.
    pub collective_overhead_us: Option<f64>,
    /// Fraction of GQA decode KV re-reads that reach memory (0: grouped kernels, XQA,
    /// FlashDecoding; 1: one pass per query head).
    pub decode_kv_group_reread: Option<f64>,
    /// Fraction of device memory allocations may fill.
    pub usable_memory_fraction: Option<f64>,
    /// Tokens per prefill pass at most (`max_num_tokens`, `max_num_batched_tokens`).
    pub max_prefill_tokens: Option<u32>,
    /// Whether the runtime's fused MoE kernels are the ones the devices' MoE tables time.
    pub measured_moe: Option<bool>,
    /// Whether the runtime's attention kernels are the ones the devices' attention tables
    /// time.
    pub measured_attention: Option<bool>,
}
