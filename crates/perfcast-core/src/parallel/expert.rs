//! What the execution traits carry for mixture-of-experts layers: the token dispatcher a
//! plan uses, the MoE dimensions the strategies see, and the routing a dispatch collective
//! carries for the engine to place it.

use serde::{Deserialize, Serialize};

/// How an MoE layer's tokens reach their experts and come back (Megatron-Core
/// `--moe-token-dispatcher-type`, and the flex dispatcher's backends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dispatcher {
    /// NCCL all-to-all of the permuted tokens (a copy per routed expert), then a local sort
    /// by expert; combine the reverse, then a weighted un-permute (Megatron-Core `alltoall`).
    #[default]
    Alltoall,
    /// All-gather every rank's tokens over the expert-parallel group, each rank keeping its
    /// experts' share; reduce-scatter the outputs (Megatron-Core `allgather`).
    Allgather,
    /// DeepEP's kernels (DeepSeek 2025, github.com/deepseek-ai/DeepEP): tokens read in place
    /// and sent once per destination node over RDMA, forwarded inside the node over NVLink;
    /// the combine reduces in the kernel.
    Deepep,
    /// NVIDIA's HybridEP (Megatron-Core flex dispatcher backend): the same hierarchical
    /// scheme as DeepEP.
    Hybridep,
}

impl Dispatcher {
    /// The name configurations use.
    pub const fn name(self) -> &'static str {
        match self {
            Dispatcher::Alltoall => "alltoall",
            Dispatcher::Allgather => "allgather",
            Dispatcher::Deepep => "deepep",
            Dispatcher::Hybridep => "hybridep",
        }
    }
    /// Tokens are read in place and combined in the kernel (no separate permute before the
    /// dispatch or weighted un-permute after the combine).
    pub const fn fused_permute(self) -> bool {
        matches!(self, Dispatcher::Deepep | Dispatcher::Hybridep)
    }
    /// Sent once per destination scale-up domain and forwarded inside it.
    pub const fn hierarchical(self) -> bool {
        self.fused_permute()
    }
}

/// Dimensions of the MoE layers as the strategies see them, on one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MoeDims {
    /// Routed experts (the whole model's).
    pub experts: u64,
    /// Experts per token.
    pub top_k: u64,
    /// Expert groups of group-limited routing and the groups per token (0: none).
    pub expert_groups: u64,
    /// Groups a token's experts come from (with `expert_groups`).
    pub group_top_k: u64,
    /// Tokens of one micro-batch entering an MoE layer on one rank (after context and
    /// sequence parallelism split them).
    pub tokens: f64,
    /// Token copies the busiest rank sends and receives per dispatch: `tokens x top_k` times
    /// the load imbalance on the slowest rank.
    pub routed: f64,
    /// Bytes of one dispatched token element (the activation format).
    pub dispatch_bytes: f64,
    /// Expert parameters of one MoE layer on one device (its share of the routed experts,
    /// after EP and ETP).
    pub expert_layer_params: f64,
    /// Expert parameters on one device of the stage with the most.
    pub expert_params: f64,
}

/// What the engine needs to know of an MoE all-to-all: a buffer of `tokens x top_k` rows,
/// each token's rows going to the ranks that hold its experts (spread evenly over the
/// group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    /// Experts per token.
    pub top_k: u32,
    /// Routed experts (over the whole group).
    pub experts: u32,
    /// Expert groups of group-limited routing (0: none) and the groups per token.
    pub expert_groups: u32,
    /// Groups a token's experts come from.
    pub group_top_k: u32,
    /// Sent once per destination scale-up domain and forwarded inside it (DeepEP, HybridEP);
    /// otherwise every row crosses on its own (NCCL all-to-all).
    pub hierarchical: bool,
}
