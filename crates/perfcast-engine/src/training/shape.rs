//! The shapes of one layer on one device that the op program is built from: the dense
//! layer ([`LayerShape`]), latent attention's widths ([`MlaShape`]) and the MoE block
//! ([`MoeShape`]). The programs that time them are `ops` and `ops_moe`.

use super::recipe::CastCosts;
use crate::software::FusedOps;
use perfcast_core::op::GemmScaling;
use perfcast_core::workload::NormKind;
use perfcast_core::{AttentionKind, DType};

/// Everything the layer program needs, on one device.
#[derive(Debug, Clone, Copy)]
pub struct LayerShape {
    /// Sequences per micro-batch.
    pub b: u64,
    /// Local query length (`s / cp`).
    pub sq: u64,
    /// Full key length (`s`).
    pub s: u64,
    pub h: u64,
    pub a_dev: u64,
    pub kv_dev: u64,
    pub d: u64,
    pub f_dev: u64,
    /// MLP matrices (2 or 3).
    pub mat: u64,
    /// Divisor of the pointwise ops (TP degree with SP).
    pub ps: u64,
    pub vocab_dev: u64,
    pub gemm_dtype: DType,
    /// How the low-precision GEMM inputs are scaled (tensor for 16-bit GEMMs).
    pub scaling: GemmScaling,
    /// Quantisation traffic of the low-precision recipe (none for 16-bit GEMMs).
    pub cast: Option<CastCosts>,
    pub act_dtype: DType,
    pub fp32_grads: bool,
    pub dropout: bool,
    pub norm: NormKind,
    pub rope: bool,
    pub learned_positions: bool,
    pub swiglu: bool,
    pub attention: AttentionKind,
    /// Which element-wise ops run as one fused kernel (the rest as the framework's separate
    /// kernels: [`super::ops::Pointwise`]).
    pub fused: FusedOps,
    /// `selective` recompute is torchtitan's per-op SAC (what it reruns: [`super::ops::layer`]) rather than
    /// the attention core alone.
    pub op_sac: bool,
    /// Module-level selective recompute (`plan.recompute_modules`): overrides `op_sac`.
    pub modules: Option<super::modules::RecomputeModules>,
    /// Latent attention's projections (`None`: the fused QKV projection of `a_dev`,
    /// `kv_dev` heads of `d`).
    pub mla: Option<MlaShape>,
    /// The MoE block of an MoE layer (`None`: the dense MLP of `f_dev`).
    pub moe: Option<MoeShape>,
    /// Sliding-window attention: the share of the layers that use it and the window.
    pub window: Option<(f64, u64)>,
    /// Chunked local attention: the share of the layers that use it and the chunk.
    pub chunk: Option<(f64, u64)>,
    /// Micro-batches that share one quantisation of the weights under a low-precision
    /// recipe: 1 (each micro-batch casts them), or a step's micro-batches where the stack
    /// caches them (`EngineParams::fp8_weight_cache`).
    pub weight_casts: u64,
    /// LoRA's adapters on the layer's projections (`None`: none; `Some`: the base weights
    /// are frozen, [`LayerShape::frozen`]).
    pub lora: Option<super::lora::LoraShape>,
}

impl LayerShape {
    /// The base weights are frozen (`task = "lora"`, the only plan with adapters): no weight
    /// gradients for them.
    pub fn frozen(&self) -> bool {
        self.lora.is_some()
    }
}

/// Latent attention's widths on one device (MLA, DeepSeek-V2 §2.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MlaShape {
    /// Query latent rank (0: a full-rank query projection).
    pub q_rank: u64,
    /// Key/value latent rank.
    pub kv_rank: u64,
    pub nope: u64,
    pub rope: u64,
    pub v: u64,
}

impl MlaShape {
    /// The projections of `t` tokens with `heads` query heads on this device, forward `(m, n,
    /// k)`: query down and up (or the full projection), key/value down (latent and rotary
    /// key), key/value up, output. The down-projections are replicated across tensor-parallel
    /// ranks (Megatron-Core's MLA duplicates them); the rest split by heads.
    pub fn gemms(&self, t: u64, h: u64, heads: u64) -> impl Iterator<Item = (u64, u64, u64)> {
        let qk = self.nope + self.rope;
        let q: [Option<(u64, u64, u64)>; 2] = if self.q_rank > 0 {
            [
                Some((t, self.q_rank, h)),
                Some((t, heads * qk, self.q_rank)),
            ]
        } else {
            [Some((t, heads * qk, h)), None]
        };
        q.into_iter().flatten().chain([
            (t, self.kv_rank + self.rope, h),
            (t, heads * (self.nope + self.v), self.kv_rank),
            (t, h, heads * self.v),
        ])
    }
}

/// The MoE block of a layer on one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeShape {
    /// Tokens entering the block on this rank (the sequence-parallel shard).
    pub tokens: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
    /// Routed experts (the router's width).
    pub experts: u64,
    /// Routed experts on this rank.
    pub local_experts: u64,
    /// Token copies this (the busiest) rank's experts process: its share of the routed
    /// copies, load imbalance and the expert tensor-parallel gather included.
    pub routed: u64,
    /// Rows per local expert (`routed / local_experts`, rounded up).
    pub rows_per_expert: u64,
    /// One expert's inner width on this rank (after expert tensor parallelism).
    pub f_dev: u64,
    /// The shared experts' combined inner width on this rank (after tensor parallelism; 0:
    /// none) and the tokens they see (the layer's, the tensor-parallel region's).
    pub shared_f_dev: u64,
    pub shared_tokens: u64,
    /// The dispatcher reads the tokens in place and combines in its kernel (DeepEP,
    /// HybridEP): no separate permute before nor weighted un-permute after.
    pub fused_permute: bool,
}
