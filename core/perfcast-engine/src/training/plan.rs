//! The execution plan of a training run and the engine's shared parameters.

use perfcast_core::parallel::{CpComm, PlanShape};
use perfcast_core::{AttentionKind, DType};
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
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
    /// Expert-parallel degree (mixture-of-experts only; must be 1 for dense models).
    #[serde(default = "one")]
    pub ep: u32,
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
    /// Pipeline schedule (registry name): `1f1b`, `gpipe`, `interleaved-1f1b`.
    /// Default: `interleaved-1f1b` when `vpp > 1`, else `1f1b`.
    #[serde(default)]
    pub schedule: Option<String>,
    /// GEMM precision: `bf16`, `fp16` (mixed precision, fp32 master weights) or `fp8`
    /// (Transformer Engine: fp8 GEMM inputs, bf16 activations elsewhere).
    #[serde(default = "d_precision")]
    pub precision: DType,
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
}

impl Default for TrainingPlan {
    fn default() -> Self {
        TrainingPlan {
            tp: 1,
            pp: 1,
            dp: 1,
            cp: 1,
            ep: 1,
            vpp: 1,
            sp: false,
            zero_stage: 0,
            micro_batch: 1,
            global_batch: 1,
            recompute: d_recompute(),
            recompute_layers: None,
            schedule: None,
            precision: d_precision(),
            fp32_grad_accum: false,
            attention: d_attention(),
            dropout: None,
            tp_comm_overlap: false,
            cp_comm: CpComm::P2p,
            overlap_grad_reduce: true,
            overlap_param_gather: true,
        }
    }
}

impl TrainingPlan {
    /// The plain-data view the execution plugins see.
    pub fn shape(&self) -> PlanShape {
        PlanShape {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            cp: self.cp,
            ep: self.ep,
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

    /// Devices the plan uses: `tp x pp x dp x cp`.
    pub fn devices(&self) -> u64 {
        self.tp as u64 * self.pp as u64 * self.dp as u64 * self.cp as u64
    }
}

fn d_reserve() -> f64 {
    1.0
}

/// Engine parameters shared by every scenario (documented defaults; never per case).
/// Overlap efficiencies live with the strategies that overlap (plugin parameters of
/// `tensor`, `context`, `data`, `zero`).
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
}

fn d_overlap_share() -> f64 {
    0.12
}

impl Default for EngineParams {
    fn default() -> Self {
        EngineParams {
            runtime_reserve_gib: d_reserve(),
            overlap_compute_share: d_overlap_share(),
        }
    }
}
