//! The execution plan of a training run and the engine's shared parameters.

use super::lora::{LoraPlan, Task};
use super::recipe::{CastCosts, Fp8Recipe};
use crate::software::{
    CastCostsOverride, EfficiencyScales, FsdpParams, FusedOps, HostCosts, SelectiveRecompute,
};
use perfcast_core::parallel::{CpComm, Dispatcher, PlanShape};
use perfcast_core::{AttentionKind, DType, ModelError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn is_one(v: &u32) -> bool {
    *v == 1
}
fn is_false(v: &bool) -> bool {
    !*v
}
fn is_alltoall(d: &Dispatcher) -> bool {
    *d == Dispatcher::Alltoall
}
fn d_recompute() -> String {
    "none".to_string()
}
fn d_precision() -> DType {
    DType::Bf16
}
fn d_attention() -> AttentionKind {
    AttentionKind::Flash
}

/// How one training run is laid out on the devices (the validation schema's
/// `[case.parallel]` and `[case.training]`, plus a few switches).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrainingPlan {
    /// Tensor-parallel degree.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline-parallel degree (stages).
    #[serde(default = "one")]
    pub pp: u32,
    /// Data-parallel degree (replicas).
    #[serde(default = "one")]
    pub dp: u32,
    /// Context-parallel degree (sequence split for attention).
    #[serde(default = "one")]
    pub cp: u32,
    /// Expert-parallel degree (mixture-of-experts only; must be 1 for dense models): the
    /// routed experts of each MoE layer split over `ep` ranks carved out of `tp x cp x dp`.
    #[serde(default = "one")]
    pub ep: u32,
    /// Expert tensor-parallel degree: each expert's matrices split over `etp` ranks
    /// (`ep x etp` divides `tp x cp x dp`). Default 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub etp: u32,
    /// MoE token dispatcher: `alltoall` (default, NCCL), `allgather`, `deepep`, `hybridep`.
    #[serde(default, skip_serializing_if = "is_alltoall")]
    pub moe_dispatcher: Dispatcher,
    /// Overlap the MoE dispatch and combine of one micro-batch with another's compute
    /// (Megatron-Core `--overlap-moe-expert-parallel-comm`, DeepSeek's DualPipe). Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ep_comm_overlap: bool,
    /// Virtual pipeline stages (model chunks) per device; > 1 means interleaved 1F1B.
    #[serde(default = "one")]
    pub vpp: u32,
    /// Megatron sequence parallelism (with tp > 1).
    #[serde(default)]
    pub sp: bool,
    /// ZeRO stage 0..3 over the data-parallel (x context-parallel) ranks.
    #[serde(default)]
    pub zero_stage: u8,
    /// Sequences per micro-batch.
    #[serde(default = "one")]
    pub micro_batch: u32,
    /// Sequences per optimizer step.
    pub global_batch: u32,
    /// Recompute policy (registry name): `none`, `selective`, `full`.
    #[serde(default = "d_recompute")]
    pub recompute: String,
    /// With `full`: only this many layers per pipeline stage are recomputed.
    #[serde(default)]
    pub recompute_layers: Option<u32>,
    /// With `selective`: the modules rerun in the backward (Megatron-Core
    /// `--recompute-modules`: `core_attn`, `layernorm`, `mla_up_proj`, `mlp`, `moe_act`,
    /// `shared_experts`; `training::modules`). Default: the stack's `selective`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute_modules: Option<super::modules::RecomputeModules>,
    /// Pipeline schedule (registry name): `1f1b`, `gpipe`, `interleaved-1f1b`.
    /// Default: `interleaved-1f1b` when `vpp > 1`, else `1f1b`. The interleaved schedules
    /// with `pp > 1` need `vpp >= 2` (a stack's `parallel.stages_per_rank` supplies it when
    /// the user gives none; otherwise the plan is refused, naming `plan.vpp`).
    #[serde(default)]
    pub schedule: Option<String>,
    /// GEMM precision: `bf16`, `fp16` (mixed precision, fp32 master weights), `fp8` (fp8
    /// GEMM inputs, bf16 activations elsewhere) or `fp4` (NVFP4 GEMMs).
    #[serde(default = "d_precision")]
    pub precision: DType,
    /// The low-precision recipe of `fp8`/`fp4` GEMMs ([`Fp8Recipe`]: `delayed`, `current`,
    /// `tensorwise`, `rowwise`, `block`, `mx`, `nvfp4`). Default: `delayed` for fp8
    /// (Transformer Engine's default), `nvfp4` for fp4.
    #[serde(default)]
    pub fp8_recipe: Option<Fp8Recipe>,
    /// Gradients accumulated and reduced in fp32 (18 instead of 16 bytes per parameter).
    #[serde(default)]
    pub fp32_grad_accum: bool,
    /// Attention kernel: `flash` (default; FlashAttention, as Megatron-Core/TE/NeMo run it) or
    /// `plain` (scores materialised: Megatron-LM before 2023).
    #[serde(default = "d_attention")]
    pub attention: AttentionKind,
    /// Dropout layers present (masks kept, dropout kernels run). Default: GPT-style models
    /// (GeLU MLP) train with dropout, Llama-style (SwiGLU) and squared-ReLU models without.
    #[serde(default)]
    pub dropout: Option<bool>,
    /// Overlap TP collectives with GEMMs (Megatron-Core `--tp-comm-overlap`).
    #[serde(default)]
    pub tp_comm_overlap: bool,
    /// Context-parallel K/V exchange (Megatron-Core `--cp-comm-type`): `p2p` (default; ring,
    /// overlapped with attention) or `all_gather` (Llama 3; exposed).
    #[serde(default)]
    pub cp_comm: CpComm,
    /// Overlap the gradient reduction with the last backward (`--overlap-grad-reduce`).
    #[serde(default = "yes")]
    pub overlap_grad_reduce: bool,
    /// Overlap parameter all-gathers with the forward (`--overlap-param-gather`).
    #[serde(default = "yes")]
    pub overlap_param_gather: bool,
    /// Degrees of the axes the strategies in use declare, by name (`plan.axes.NAME = N`;
    /// an axis left out has degree 1).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub axes: BTreeMap<String, u32>,
    /// What the step trains: `pretrain` (default), `sft` (every weight, the same program) or
    /// `lora` (frozen base weights and low-rank adapters: [`super::lora`]).
    #[serde(default, skip_serializing_if = "Task::is_pretrain")]
    pub task: Task,
    /// With `task = "lora"`: the adapters' rank and targets (default: the stack's,
    /// `EngineParams::lora`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraPlan>,
}

impl Default for TrainingPlan {
    fn default() -> Self {
        TrainingPlan {
            tp: 1,
            pp: 1,
            dp: 1,
            cp: 1,
            ep: 1,
            etp: 1,
            moe_dispatcher: Dispatcher::Alltoall,
            ep_comm_overlap: false,
            vpp: 1,
            sp: false,
            zero_stage: 0,
            micro_batch: 1,
            global_batch: 1,
            recompute: d_recompute(),
            recompute_layers: None,
            recompute_modules: None,
            schedule: None,
            precision: d_precision(),
            fp8_recipe: None,
            fp32_grad_accum: false,
            attention: d_attention(),
            dropout: None,
            tp_comm_overlap: false,
            cp_comm: CpComm::P2p,
            overlap_grad_reduce: true,
            overlap_param_gather: true,
            axes: BTreeMap::new(),
            task: Task::Pretrain,
            lora: None,
        }
    }
}

impl TrainingPlan {
    /// The low-precision recipe the GEMMs run (none for 16-bit plans).
    pub fn recipe(&self) -> Option<Fp8Recipe> {
        self.fp8_recipe.or(Fp8Recipe::default_for(self.precision))
    }
    /// The plain-data view the execution plugins see, declared axes left at degree 1 (the
    /// engine numbers and fills them: `Training::shape`).
    pub fn shape(&self) -> PlanShape {
        PlanShape {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            cp: self.cp,
            ep: self.ep,
            etp: self.etp,
            moe_dispatcher: self.moe_dispatcher,
            ep_comm_overlap: self.ep_comm_overlap,
            vpp: self.vpp,
            sp: self.sp && self.tp > 1,
            zero_stage: self.zero_stage,
            micro_batch: self.micro_batch,
            global_batch: self.global_batch,
            tp_comm_overlap: self.tp_comm_overlap,
            overlap_grad_reduce: self.overlap_grad_reduce,
            overlap_param_gather: self.overlap_param_gather,
            fp32_grad_accum: self.fp32_grad_accum,
            cp_comm: self.cp_comm,
            ..PlanShape::default()
        }
    }

    /// The schedule name in effect.
    pub fn schedule_name(&self) -> &str {
        match &self.schedule {
            Some(s) => s,
            None if self.vpp > 1 => "interleaved-1f1b",
            None => "1f1b",
        }
    }

    /// Devices the plan uses: `tp x pp x dp x cp`, times the degrees of its declared axes.
    pub fn devices(&self) -> u64 {
        let declared: u64 = self.axes.values().map(|&d| d as u64).product();
        self.tp as u64 * self.pp as u64 * self.dp as u64 * self.cp as u64 * declared
    }
}

fn d_reserve() -> f64 {
    1.0
}

/// Engine parameters shared by every scenario (documented defaults; never per case).
/// Overlap efficiencies live with the strategies that overlap (plugin parameters of
/// `tensor`, `context`, `data`, `zero`).
///
/// The fields after `overlap_compute_share` describe the software stack (set by a stack
/// profile, `stack = "NAME"`, beneath the user's `[options.engine]`; [`crate::software`]).
/// Their defaults are the engine's behaviour without a stack; several are not modelled yet
/// (their types say which).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EngineParams {
    /// Device memory the runtime holds before the model allocates anything: CUDA context,
    /// cuBLAS/NCCL workspaces, allocator fragmentation. GiB. Default 1.0 (the CUDA context
    /// and library handles of PyTorch take about 0.5-1 GiB on A100/H100).
    #[serde(default = "d_reserve")]
    pub runtime_reserve_gib: f64,
    /// Fraction of the device's compute a collective's kernels take while they run beside
    /// compute (overlap is not free: NCCL runs one thread block per channel on an SM, and
    /// Transformer Engine's userbuffers kernels use up to 32 SMs, `UB_MAX_SM`): compute
    /// overlapped by a collective for a time `t` is slowed by `share x t`. Default 0.12: 16
    /// thread blocks of a 132-SM H100, between the 8 CTAs MLPerf's TP-overlap configurations
    /// give NCCL (`NCCL_MIN_CTAS=8`) and userbuffers' 32 (a modelling default). 0 for
    /// collectives driven by copy engines.
    #[serde(default = "d_overlap_share")]
    pub overlap_compute_share: f64,
    /// Multipliers on the framework's kernel throughput, per op class. Default 1.
    #[serde(default)]
    pub efficiency: EfficiencyScales,
    /// Host-side costs: per step, per kernel, CUDA graphs (not modelled yet). Default 0, none.
    #[serde(default)]
    pub host: HostCosts,
    /// Which element-wise ops run fused (the rest as eager PyTorch's separate kernels).
    /// Default: Megatron-LM's fused kernels.
    #[serde(default)]
    pub fused: FusedOps,
    /// Per recipe, a framework's own quantisation costs where they differ from the fused
    /// kernels' compulsory traffic of [`Fp8Recipe::costs`] (each field optional; set by a
    /// stack, e.g. eager PyTorch's separate amax and cast kernels). Default none.
    #[serde(default)]
    pub fp8_recipes: BTreeMap<Fp8Recipe, CastCostsOverride>,
    /// Parameters all-gathered in fp8 (torchtitan `enable_fsdp_float8_all_gather`,
    /// Megatron-Core `--fp8-param-gather`) instead of 16 bits, for recipes with one scale per
    /// tensor. Default false.
    #[serde(default)]
    pub fp8_param_gather: bool,
    /// Under a low-precision recipe, the GEMM inputs the weight gradient needs are kept in
    /// the recipe's format (Transformer Engine's `Linear` saves its quantised input;
    /// DeepSeek-V3 §3.3.1: "the FP8 Wgrad GEMM allows activations to be stored in FP8 for use
    /// in the backward pass") instead of 16 bits (torchao's float8 saves the high-precision
    /// input and casts again). Default false.
    #[serde(default)]
    pub fp8_saved_inputs: bool,
    /// Under a low-precision recipe, each weight's quantised copy (and its transposed one) is
    /// made once per step and reused by the step's other micro-batches (Transformer Engine's
    /// `is_first_microbatch`, which Megatron-Core passes: "caching of fp8 versions of the
    /// weights and the weight transposes" between micro-batches, whose weights do not change)
    /// instead of once per micro-batch. Default false.
    #[serde(default)]
    pub fp8_weight_cache: bool,
    /// What `plan.recompute = "selective"` saves and reruns. Default `attention_core`.
    #[serde(default)]
    pub selective_recompute: SelectiveRecompute,
    /// FSDP implementation details (not modelled yet).
    #[serde(default)]
    pub fsdp: FsdpParams,
    /// The LoRA adapters of a `task = "lora"` plan that names none (`plan.lora`). Default:
    /// NeMo 2.0's (rank 32 on the four linear projections).
    #[serde(default)]
    pub lora: LoraPlan,
}

fn d_overlap_share() -> f64 {
    0.12
}

impl Default for EngineParams {
    fn default() -> Self {
        EngineParams {
            runtime_reserve_gib: d_reserve(),
            overlap_compute_share: d_overlap_share(),
            efficiency: EfficiencyScales::default(),
            host: HostCosts::default(),
            fused: FusedOps::default(),
            fp8_recipes: BTreeMap::new(),
            fp8_param_gather: false,
            fp8_saved_inputs: false,
            fp8_weight_cache: false,
            selective_recompute: SelectiveRecompute::default(),
            fsdp: FsdpParams::default(),
            lora: LoraPlan::default(),
        }
    }
}

impl EngineParams {
    /// The quantisation costs of `recipe`: the compulsory traffic of fused kernels with the
    /// stack's overrides ([`EngineParams::fp8_recipes`]) applied.
    pub fn recipe_costs(&self, recipe: Fp8Recipe) -> CastCosts {
        let base = recipe.costs();
        match self.fp8_recipes.get(&recipe) {
            Some(o) => o.apply(base),
            None => base,
        }
    }

    /// Reject the software fields' values outside their documented ranges, naming the key.
    pub fn validate_software(&self) -> Result<(), ModelError> {
        self.efficiency.validate("engine.")?;
        self.host.validate()?;
        for (recipe, o) in &self.fp8_recipes {
            o.validate(&format!("engine.fp8_recipes.{recipe}"))?;
        }
        if self.fsdp.prefetch_depth == 0 {
            return Err(ModelError::invalid(
                perfcast_core::Key::options("engine.fsdp.prefetch_depth"),
                0,
                "must be >= 1",
            ));
        }
        Ok(())
    }
}
