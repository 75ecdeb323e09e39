//! Sparse and latent parts of a model: the mixture-of-experts MLP ([`MoeSpec`]), multi-head
//! latent attention ([`MlaSpec`]) and the attention layout that names them
//! ([`AttentionLayout`]).

use serde::{Deserialize, Serialize};

/// Default of [`MoeSpec::load_imbalance`]: a router that balances its experts on average.
///
/// Wang et al. 2024 ("Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts",
/// arXiv:2408.15664, Table 1; the router DeepSeek-V3 trains with, DeepSeek 2024 §2.1.2) measure
/// a global-batch maximal violation `max load / mean load - 1` of 0.04 per expert with
/// auxiliary-loss-free balancing (0.52-0.72 with an auxiliary loss of weight 0.001); an expert-
/// parallel rank holds many experts, whose violations average out, so the systematic part is
/// taken as none. The engine adds the statistical part (finite tokens per rank) on its own.
pub const DEFAULT_LOAD_IMBALANCE: f64 = 1.0;

/// Mixture-of-experts MLP (the validation schema's `[case.model.moe]`).
///
/// Layers: the first `dense_layers` have a dense MLP of `ffn_hidden`; of the rest, one in
/// `moe_layer_freq` is an MoE layer (`moe_layer_freq = 2`: every other layer, Llama 4
/// Maverick's `interleave_moe_layer_step`), the others dense. An MoE layer has a router
/// (`hidden x experts`), `experts` routed experts of which each token uses `top_k`, and
/// `shared_experts` every token passes through; each expert is an MLP of the model's
/// `ffn_act` type, `expert_ffn_hidden` wide (shared experts `shared_expert_ffn_hidden` wide
/// when given).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub experts: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
    /// MLP inner width of one expert (MLP type `ffn_act`).
    pub expert_ffn_hidden: u64,
    /// Experts every token passes through (default 0).
    #[serde(default)]
    pub shared_experts: u64,
    /// Inner width of each shared expert (default `expert_ffn_hidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_expert_ffn_hidden: Option<u64>,
    /// Leading layers with a dense MLP of `ffn_hidden` (default 0).
    #[serde(default)]
    pub dense_layers: u64,
    /// One layer in this many of the rest is MoE (default 1: all of them).
    #[serde(default = "one")]
    pub moe_layer_freq: u64,
    /// Group-limited routing (DeepSeek-V2/V3 `n_group`): the experts form this many groups
    /// and a token's experts come from `group_top_k` of them (DeepSeek-V3: 8 groups, 4 per
    /// token, "each token will be sent to at most 4 nodes", DeepSeek 2024 §2.1.2). Default:
    /// no groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_groups: Option<u64>,
    /// Groups a token's experts come from (`topk_group`; with `expert_groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_top_k: Option<u64>,
    /// Tokens an expert may take, as a multiple of its fair share `tokens x top_k /
    /// experts` (GShard/Switch capacity factor; the rest are dropped). Default: dropless
    /// (no limit; Megatron-Core's default and MegaBlocks').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_factor: Option<f64>,
    /// The router's systematic imbalance: tokens the busiest expert-parallel rank receives
    /// over the mean (>= 1). Default [`DEFAULT_LOAD_IMBALANCE`]; 1 for forced-balanced
    /// routing. The slowest rank sets the time of every MoE layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_imbalance: Option<f64>,
}

fn one() -> u64 {
    1
}

impl MoeSpec {
    /// `experts` routed experts of `expert_ffn_hidden`, `top_k` per token, every layer MoE,
    /// no shared experts, the defaults elsewhere.
    pub fn new(experts: u64, top_k: u64, expert_ffn_hidden: u64) -> MoeSpec {
        MoeSpec {
            experts,
            top_k,
            expert_ffn_hidden,
            shared_experts: 0,
            shared_expert_ffn_hidden: None,
            dense_layers: 0,
            moe_layer_freq: 1,
            expert_groups: None,
            group_top_k: None,
            capacity_factor: None,
            load_imbalance: None,
        }
    }
    /// Width of one shared expert in effect.
    pub fn shared_ffn_hidden(&self) -> u64 {
        self.shared_expert_ffn_hidden
            .unwrap_or(self.expert_ffn_hidden)
    }
    /// The router's systematic imbalance in effect.
    pub fn load_imbalance(&self) -> f64 {
        self.load_imbalance.unwrap_or(DEFAULT_LOAD_IMBALANCE)
    }
}

/// How a layer's attention projects its keys and values (the validation schema's
/// `attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionLayout {
    /// Multi-head attention: one key/value head per query head.
    Mha,
    /// Grouped-query attention (Ainslie et al. 2023): `kv_heads` dividing `heads`.
    Gqa,
    /// Multi-query attention (Shazeer 2019): one key/value head.
    Mqa,
    /// Multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024 §2.1): keys and values
    /// from a shared low-rank latent; needs the `[model.mla]` table.
    Mla,
}

impl AttentionLayout {
    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            AttentionLayout::Mha => "mha",
            AttentionLayout::Gqa => "gqa",
            AttentionLayout::Mqa => "mqa",
            AttentionLayout::Mla => "mla",
        }
    }
}

/// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 §2.1; the HF config's
/// `q_lora_rank`, `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`).
///
/// Per token: the query is `h -> q_lora_rank` (RMSNorm) `-> heads x (nope + rope)` (or
/// `h -> heads x (nope + rope)` without `q_lora_rank`); keys and values come from one latent
/// `h -> kv_lora_rank + rope` (RMSNorm on the latent), expanded `kv_lora_rank -> heads x
/// (nope + v)`; the rotary key part (`rope` wide) is shared by all heads; the output
/// projection is `heads x v -> h`. The KV cache holds the latent and the rotary key,
/// `kv_lora_rank + rope` elements per token and layer, whatever the head count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// Rank of the query's down-projection (0: a full-rank query projection, as in
    /// DeepSeek-V2-Lite).
    #[serde(default)]
    pub q_lora_rank: u64,
    /// Rank of the key/value latent.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u64,
    /// Per-head query/key width with rotary embedding (the key part is shared by the heads).
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
}

impl MlaSpec {
    /// Query/key width per head (`nope + rope`).
    pub const fn qk_head_dim(&self) -> u64 {
        self.qk_nope_head_dim + self.qk_rope_head_dim
    }
    /// Matmul weights of one layer's attention with `heads` query heads over `hidden`:
    /// query down/up (or the full projection), key/value down (latent and rotary key),
    /// key/value up, output.
    pub const fn weights(&self, hidden: u64, heads: u64) -> u64 {
        let q = if self.q_lora_rank > 0 {
            hidden * self.q_lora_rank + self.q_lora_rank * heads * self.qk_head_dim()
        } else {
            hidden * heads * self.qk_head_dim()
        };
        let kv_down = hidden * (self.kv_lora_rank + self.qk_rope_head_dim);
        let kv_up = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim);
        q + kv_down + kv_up + heads * self.v_head_dim * hidden
    }
    /// The latent RMSNorms' scales (query latent, key/value latent).
    pub const fn norm_params(&self) -> u64 {
        self.q_lora_rank + self.kv_lora_rank
    }
    /// KV-cache elements per token and layer: the latent and the shared rotary key.
    pub const fn cache_elements(&self) -> u64 {
        self.kv_lora_rank + self.qk_rope_head_dim
    }
}
