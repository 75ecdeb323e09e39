//! The workload: a dense or mixture-of-experts decoder-only transformer, with grouped-query
//! or latent attention, sliding-window layers and multi-token-prediction modules.

mod moe;
mod spans;
#[cfg(test)]
mod tests;

pub use moe::{AttentionLayout, MlaSpec, MoeSpec, DEFAULT_LOAD_IMBALANCE};
pub use spans::{AttentionSpan, LayerSpans};

use crate::error::{Key, ModelError};
use serde::{Deserialize, Serialize};

/// MLP type (the validation schema's `ffn_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnAct {
    /// 2-matrix GeLU MLP (GPT, Megatron, BLOOM).
    Gelu,
    /// 3-matrix gated SiLU MLP (Llama, Qwen, Mistral).
    Swiglu,
    /// 2-matrix squared-ReLU MLP (Nemotron).
    Relu2,
}

impl FfnAct {
    /// Weight matrices in the MLP.
    pub const fn matrices(self) -> u64 {
        match self {
            FfnAct::Swiglu => 3,
            FfnAct::Gelu | FfnAct::Relu2 => 2,
        }
    }
}

/// Normalisation layers (two per layer, one final).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// LayerNorm: scale and shift, `2·hidden` parameters.
    LayerNorm,
    /// RMSNorm: scale only, `hidden` parameters.
    RmsNorm,
}

/// Position encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionKind {
    /// Learned absolute position embeddings (GPT-2/3): `seq_len x hidden` parameters.
    Learned,
    /// Rotary embeddings (Llama): no parameters, an elementwise op on Q and K.
    Rope,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A decoder-only transformer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Name for reports.
    #[serde(default)]
    pub name: String,
    /// Transformer layers.
    pub layers: u64,
    /// Hidden size `h` (the residual stream's width).
    pub hidden: u64,
    /// Query heads `a`.
    pub heads: u64,
    /// Key/value heads (query groups); defaults to `heads` (multi-head attention).
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// Defaults to `hidden / heads`.
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// MLP inner width (with MoE: of the dense layers).
    pub ffn_hidden: u64,
    /// MLP type.
    pub ffn_act: FfnAct,
    /// Vocabulary size (padded where the source pads it).
    pub vocab: u64,
    /// Training sequence length: what a training step's samples hold.
    pub seq_len: u64,
    /// The longest context the model takes (its `max_position_embeddings`): what an inference
    /// request (prompt plus output) may reach and the rows of a learned position table.
    /// Default: `seq_len`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context: Option<u64>,
    /// The LM head shares the input embedding's table.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Defaults: LayerNorm for GeLU/ReLU² models, RMSNorm for SwiGLU models.
    #[serde(default)]
    pub norm: Option<NormKind>,
    /// Defaults: learned for GeLU/ReLU² models, rotary for SwiGLU models.
    #[serde(default)]
    pub position: Option<PositionKind>,
    /// Linear layers carry biases (default: true for GeLU/ReLU² GPT-style models).
    #[serde(default)]
    pub bias: Option<bool>,
    /// Mixture-of-experts MLP; `None` for a dense model.
    #[serde(default)]
    pub moe: Option<MoeSpec>,
    /// Attention layout (informational for `mha`/`gqa`/`mqa`, which `kv_heads` already
    /// says; checked against it when given); `mla` needs the `mla` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionLayout>,
    /// Multi-head latent attention (with `attention = "mla"`); `kv_heads` is then the
    /// query head count (every head has its own key and value after the up-projection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaSpec>,
    /// Sliding-window attention: layers that use it attend over at most this many previous
    /// positions (Mistral 7B; GPT-OSS's alternating 128-token windows). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    /// How many layers use the window, spread evenly (default: all, with `sliding_window`);
    /// the older form of `layer_pattern`, which says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window_layers: Option<u64>,
    /// What each layer attends over, repeated from the first layer: `full`, `sliding`
    /// (`sliding_window`), `chunked` (`attention_chunk`). GPT-OSS: `["sliding", "full"]`;
    /// Llama 4: `["chunked", "chunked", "chunked", "full"]`. Default: every layer full, or
    /// `sliding_window_layers` sliding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_pattern: Option<Vec<AttentionSpan>>,
    /// Positions of one chunk of a `chunked` layer (Llama 4: 8,192, the Hugging Face
    /// config's `attention_chunk_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_chunk: Option<u64>,
    /// Multi-token-prediction modules trained beside the model (DeepSeek-V3: 1, DeepSeek 2024
    /// §2.2): each one more transformer layer of the model's kind (MoE when the model's
    /// layers are), a `2h -> h` projection and two RMSNorms, sharing the embedding and the
    /// LM head; its prediction adds one more LM head and loss per token. Not counted in
    /// [`ModelSpec::params`]'s published totals' convention: see [`ModelSpec::mtp_params`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_layers: u64,
}

impl ModelSpec {
    /// A dense decoder: `layers` layers of width `hidden` with `heads` attention heads, an MLP
    /// of `ffn_hidden` (`ffn_act`), a vocabulary of `vocab` and sequences of `seq_len`; no
    /// name, multi-head attention, untied embeddings, the architecture's defaults for norm,
    /// positions and biases, no MoE, latent attention, windows or MTP. Anything else by struct
    /// update: `ModelSpec { kv_heads: Some(8), ..ModelSpec::dense(80, 8192, 64, 28672,
    /// FfnAct::Swiglu, 32000, 4096) }`.
    pub fn dense(
        layers: u64,
        hidden: u64,
        heads: u64,
        ffn_hidden: u64,
        ffn_act: FfnAct,
        vocab: u64,
        seq_len: u64,
    ) -> ModelSpec {
        ModelSpec {
            name: String::new(),
            layers,
            hidden,
            heads,
            kv_heads: None,
            head_dim: None,
            ffn_hidden,
            ffn_act,
            vocab,
            seq_len,
            max_context: None,
            tied_embeddings: false,
            norm: None,
            position: None,
            bias: None,
            moe: None,
            attention: None,
            mla: None,
            sliding_window: None,
            sliding_window_layers: None,
            layer_pattern: None,
            attention_chunk: None,
            mtp_layers: 0,
        }
    }

    /// The longest context the model takes: `max_context`, else `seq_len`.
    pub fn context_limit(&self) -> u64 {
        self.max_context.unwrap_or(self.seq_len)
    }

    /// Key/value heads in effect (`kv_heads`, else `heads`).
    pub fn kv_heads(&self) -> u64 {
        self.kv_heads.unwrap_or(self.heads)
    }
    /// Head size in effect (`head_dim`, else `hidden / heads`).
    pub fn head_dim(&self) -> u64 {
        self.head_dim.unwrap_or(self.hidden / self.heads.max(1))
    }
    /// Normalisation in effect (`norm`, else RMSNorm for SwiGLU models, LayerNorm otherwise).
    pub fn norm(&self) -> NormKind {
        self.norm.unwrap_or(match self.ffn_act {
            FfnAct::Swiglu => NormKind::RmsNorm,
            _ => NormKind::LayerNorm,
        })
    }
    /// Position encoding in effect (`position`, else rotary for SwiGLU models, learned
    /// otherwise).
    pub fn position(&self) -> PositionKind {
        self.position.unwrap_or(match self.ffn_act {
            FfnAct::Swiglu => PositionKind::Rope,
            _ => PositionKind::Learned,
        })
    }
    /// Whether linear layers carry biases (`bias`, else all but SwiGLU models).
    pub fn bias(&self) -> bool {
        self.bias.unwrap_or(self.ffn_act != FfnAct::Swiglu)
    }

    /// Width of the Q projection output (heads x head_dim).
    pub fn q_width(&self) -> u64 {
        self.heads * self.head_dim()
    }
    /// Width of the K (or V) projection output.
    pub fn kv_width(&self) -> u64 {
        self.kv_heads() * self.head_dim()
    }
    /// Query/key width per head (`head_dim`, or MLA's `nope + rope`).
    pub fn qk_head_dim(&self) -> u64 {
        match &self.mla {
            Some(m) => m.qk_head_dim(),
            None => self.head_dim(),
        }
    }
    /// Value width per head (`head_dim`, or MLA's `v_head_dim`).
    pub fn v_head_dim(&self) -> u64 {
        match &self.mla {
            Some(m) => m.v_head_dim,
            None => self.head_dim(),
        }
    }

    /// Matmul weights of one layer's attention (QKV and output projections; MLA: its down-
    /// and up-projections, [`MlaSpec::weights`]).
    pub fn attention_weights(&self) -> u64 {
        if let Some(m) = &self.mla {
            return m.weights(self.hidden, self.heads);
        }
        let h = self.hidden;
        h * (self.q_width() + 2 * self.kv_width()) + self.q_width() * h
    }

    /// Matmul weights of a dense MLP.
    pub fn mlp_weights(&self) -> u64 {
        self.ffn_act.matrices() * self.hidden * self.ffn_hidden
    }

    /// Non-matmul parameters of one dense layer: biases and norm scales/shifts (MLA adds its
    /// latent norms).
    pub fn layer_small_params(&self) -> u64 {
        let h = self.hidden;
        let biases = if self.bias() {
            (self.ffn_act.matrices() - 1) * self.ffn_hidden + h
        } else {
            0
        };
        self.attention_small_params() + biases
    }

    /// Non-matmul parameters of one layer's attention and its two norms: norm
    /// scales/shifts, projection biases, MLA's latent norms.
    fn attention_small_params(&self) -> u64 {
        let h = self.hidden;
        let norms = match self.norm() {
            NormKind::LayerNorm => 2 * 2 * h,
            NormKind::RmsNorm => 2 * h,
        };
        let biases = if self.bias() {
            (self.q_width() + 2 * self.kv_width()) + h
        } else {
            0
        };
        let latent = self.mla.map_or(0, |m| m.norm_params());
        norms + biases + latent
    }

    /// Parameters of one dense layer.
    pub fn layer_params(&self) -> u64 {
        self.attention_weights() + self.mlp_weights() + self.layer_small_params()
    }

    /// MoE layers (0 for a dense model): of the layers after the `dense_layers`, one in
    /// `moe_layer_freq`.
    pub fn moe_layers(&self) -> u64 {
        match &self.moe {
            None => 0,
            Some(m) => self.layers.saturating_sub(m.dense_layers) / m.moe_layer_freq.max(1),
        }
    }

    /// Layers with a dense MLP.
    pub fn dense_layers(&self) -> u64 {
        self.layers - self.moe_layers().min(self.layers)
    }

    /// Parameters of one routed expert (its MLP's matrices, and biases when the model has
    /// them).
    pub fn expert_params(&self) -> u64 {
        let Some(m) = &self.moe else { return 0 };
        let f = m.expert_ffn_hidden;
        let bias = if self.bias() {
            (self.ffn_act.matrices() - 1) * f + self.hidden
        } else {
            0
        };
        self.ffn_act.matrices() * self.hidden * f + bias
    }

    /// Parameters of an MoE layer that every token uses besides attention: the shared
    /// experts and the router (and its bias when the model has biases).
    pub fn moe_dense_params(&self) -> u64 {
        let Some(m) = &self.moe else { return 0 };
        let f = m.shared_ffn_hidden();
        let bias = if self.bias() {
            (self.ffn_act.matrices() - 1) * f + self.hidden
        } else {
            0
        };
        let shared = m.shared_experts * (self.ffn_act.matrices() * self.hidden * f + bias);
        let router_bias = if self.bias() { m.experts } else { 0 };
        shared + self.hidden * m.experts + router_bias
    }

    /// Parameters of one MoE layer: attention, norms, every routed expert, the shared
    /// experts and the router.
    pub fn moe_layer_params(&self) -> u64 {
        let Some(m) = &self.moe else { return 0 };
        self.attention_weights()
            + self.attention_small_params()
            + m.experts * self.expert_params()
            + self.moe_dense_params()
    }

    /// Embedding parameters: token table, learned positions, and the LM head when untied.
    pub fn embedding_params(&self) -> u64 {
        let tok = self.vocab * self.hidden;
        let pos = match self.position() {
            PositionKind::Learned => self.context_limit() * self.hidden,
            PositionKind::Rope => 0,
        };
        let head = if self.tied_embeddings { 0 } else { tok };
        tok + pos + head
    }

    fn final_norm(&self) -> u64 {
        match self.norm() {
            NormKind::LayerNorm => 2 * self.hidden,
            NormKind::RmsNorm => self.hidden,
        }
    }

    /// Parameters of the multi-token-prediction modules (`mtp_layers` x: one layer of the
    /// model's kind, the `2h -> h` projection, two RMSNorms; embedding and head shared).
    pub fn mtp_params(&self) -> u64 {
        let layer = if self.moe.is_some() && self.moe_layers() > 0 {
            self.moe_layer_params()
        } else {
            self.layer_params()
        };
        self.mtp_layers * (layer + 2 * self.hidden * self.hidden + 2 * self.hidden)
    }

    /// Total parameters of the model (every expert counted; the multi-token-prediction
    /// modules left out, as the published totals leave them: DeepSeek-V3's 671B excludes
    /// its 14B MTP module, DeepSeek 2024 §1 and README_WEIGHTS).
    pub fn params(&self) -> u64 {
        let layers = match &self.moe {
            None => self.layers * self.layer_params(),
            Some(_) => {
                self.dense_layers() * self.layer_params()
                    + self.moe_layers() * self.moe_layer_params()
            }
        };
        layers + self.embedding_params() + self.final_norm()
    }

    /// Parameters one token activates: every dense parameter, `top_k` routed experts per
    /// MoE layer, the embedding tables (the convention of Mixtral's 12.9B of 46.7B, Jiang et
    /// al. 2024 §2).
    pub fn active_params(&self) -> u64 {
        let Some(m) = &self.moe else {
            return self.params();
        };
        let inactive = (m.experts - m.top_k.min(m.experts)) * self.expert_params();
        self.params() - self.moe_layers() * inactive
    }

    /// Matmul weights a token passes through (the schema's `P_mm`): projections, MLP (MoE:
    /// `top_k` routed and the shared experts, plus the router) and the logit layer; not the
    /// input embedding, norms or biases, nor the multi-token-prediction modules.
    pub fn matmul_params_per_token(&self) -> u64 {
        let mlp = match &self.moe {
            None => self.layers * self.mlp_weights(),
            Some(m) => {
                let mat = self.ffn_act.matrices() * self.hidden;
                let routed = m.top_k * mat * m.expert_ffn_hidden;
                let shared = m.shared_experts * mat * m.shared_ffn_hidden();
                self.dense_layers() * self.mlp_weights()
                    + self.moe_layers() * (routed + shared + self.hidden * m.experts)
            }
        };
        self.layers * self.attention_weights() + mlp + self.vocab * self.hidden
    }

    /// What layer `i` (0-based) attends over.
    pub fn span_of(&self, i: u64) -> AttentionSpan {
        let sliding = self
            .sliding_window
            .map(|_| self.sliding_window_layers.unwrap_or(self.layers));
        spans::kind_of(self.layer_pattern.as_deref(), sliding, self.layers, i)
    }

    /// How the `count` layers from layer `first` on attend (a pipeline stage's, or all).
    pub fn layer_spans(&self, first: u64, count: u64) -> LayerSpans {
        if self.sliding_window.is_none() && self.attention_chunk.is_none() {
            return LayerSpans::full(count);
        }
        let mut s = LayerSpans {
            window: self.sliding_window.unwrap_or(0),
            chunk: self.attention_chunk.unwrap_or(0),
            ..LayerSpans::default()
        };
        for i in first..first + count {
            match self.span_of(i) {
                AttentionSpan::Full => s.full += 1,
                AttentionSpan::Sliding => s.sliding += 1,
                AttentionSpan::Chunked => s.chunked += 1,
            }
        }
        s
    }

    /// Reject sizes that are zero or inconsistent.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (k, v) in [
            (Key::model("layers"), self.layers),
            (Key::model("hidden"), self.hidden),
            (Key::model("heads"), self.heads),
            (Key::model("ffn_hidden"), self.ffn_hidden),
            (Key::model("vocab"), self.vocab),
            (Key::model("seq_len"), self.seq_len),
            (Key::model("kv_heads"), self.kv_heads()),
            (Key::model("head_dim"), self.head_dim()),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(k, v, "must be a positive integer"));
            }
        }
        if let Some(c) = self.max_context {
            if c < self.seq_len {
                return Err(ModelError::invalid(
                    Key::model("max_context"),
                    c,
                    format!(
                        "must be at least model.seq_len = {} (the longest context the model takes)",
                        self.seq_len
                    ),
                ));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads()) {
            return Err(ModelError::invalid(
                Key::model("kv_heads"),
                self.kv_heads(),
                format!("must divide model.heads = {}", self.heads),
            ));
        }
        if self.head_dim.is_none() && !self.hidden.is_multiple_of(self.heads) {
            return Err(ModelError::invalid(
                Key::model("heads"),
                self.heads,
                format!(
                    "must divide model.hidden = {} (or set model.head_dim)",
                    self.hidden
                ),
            ));
        }
        self.validate_moe()?;
        self.validate_attention()?;
        if self.mtp_layers > 64 {
            return Err(ModelError::invalid(
                Key::model("mtp_layers"),
                self.mtp_layers,
                "must be at most 64 (multi-token-prediction modules; DeepSeek-V3 trains 1)",
            ));
        }
        Ok(())
    }
}

impl ModelSpec {
    fn validate_moe(&self) -> Result<(), ModelError> {
        let Some(m) = &self.moe else { return Ok(()) };
        for (k, v) in [
            (Key::model("moe.experts"), m.experts),
            (Key::model("moe.top_k"), m.top_k),
            (Key::model("moe.expert_ffn_hidden"), m.expert_ffn_hidden),
            (Key::model("moe.moe_layer_freq"), m.moe_layer_freq),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(k, v, "must be a positive integer"));
            }
        }
        if m.top_k > m.experts {
            return Err(ModelError::invalid(
                Key::model("moe.top_k"),
                m.top_k,
                format!(
                    "must not exceed model.moe.experts = {} (a token is routed to top_k \
                     distinct experts)",
                    m.experts
                ),
            ));
        }
        if m.shared_expert_ffn_hidden == Some(0) {
            return Err(ModelError::invalid(
                Key::model("moe.shared_expert_ffn_hidden"),
                0,
                "must be a positive integer",
            ));
        }
        if m.dense_layers >= self.layers {
            return Err(ModelError::invalid(
                Key::model("moe.dense_layers"),
                m.dense_layers,
                format!(
                    "must be below model.layers = {} (at least one MoE layer)",
                    self.layers
                ),
            ));
        }
        if self.moe_layers() == 0 {
            return Err(ModelError::invalid(
                Key::model("moe.moe_layer_freq"),
                m.moe_layer_freq,
                format!(
                    "leaves no MoE layer among the {} layers after model.moe.dense_layers",
                    self.layers - m.dense_layers
                ),
            ));
        }
        match (m.expert_groups, m.group_top_k) {
            (None, None) => {}
            (Some(g), Some(k)) => {
                if g == 0 || !m.experts.is_multiple_of(g) {
                    return Err(ModelError::invalid(
                        Key::model("moe.expert_groups"),
                        g,
                        format!("must divide model.moe.experts = {}", m.experts),
                    ));
                }
                if k == 0 || k > g || k * (m.experts / g) < m.top_k {
                    return Err(ModelError::invalid(
                        Key::model("moe.group_top_k"),
                        k,
                        format!(
                            "must be in 1..={g} (model.moe.expert_groups) and its groups must \
                             hold model.moe.top_k = {} experts",
                            m.top_k
                        ),
                    ));
                }
            }
            (Some(_), None) => {
                return Err(ModelError::invalid(
                    Key::model("moe.group_top_k"),
                    "missing",
                    "must be given with model.moe.expert_groups",
                ))
            }
            (None, Some(k)) => {
                return Err(ModelError::invalid(
                    Key::model("moe.group_top_k"),
                    k,
                    "needs model.moe.expert_groups",
                ))
            }
        }
        if let Some(c) = m.capacity_factor {
            if !(c.is_finite() && c > 0.0) {
                return Err(ModelError::invalid(
                    Key::model("moe.capacity_factor"),
                    c,
                    "must be a finite number > 0 (leave it out for dropless routing)",
                ));
            }
        }
        if let Some(i) = m.load_imbalance {
            if !(i.is_finite() && i >= 1.0) {
                return Err(ModelError::invalid(
                    Key::model("moe.load_imbalance"),
                    i,
                    "must be a finite number >= 1 (the busiest rank's tokens over the mean)",
                ));
            }
        }
        Ok(())
    }

    fn validate_attention(&self) -> Result<(), ModelError> {
        let kv = self.kv_heads();
        match (self.attention, &self.mla) {
            (Some(AttentionLayout::Mla), None) => {
                return Err(ModelError::invalid(
                    Key::model("attention"),
                    "mla",
                    "needs the [model.mla] table (q_lora_rank, kv_lora_rank, \
                     qk_nope_head_dim, qk_rope_head_dim, v_head_dim)",
                ))
            }
            (a, Some(_)) if a != Some(AttentionLayout::Mla) => {
                return Err(ModelError::invalid(
                    Key::model("mla"),
                    "set",
                    format!(
                        "latent-attention fields need model.attention = \"mla\" (it is {})",
                        a.map_or("not set".to_string(), |a| format!("\"{}\"", a.name()))
                    ),
                ))
            }
            (Some(AttentionLayout::Mha), _) if kv != self.heads => {
                return Err(ModelError::invalid(
                    Key::model("kv_heads"),
                    kv,
                    format!(
                        "must equal model.heads = {} with model.attention = \"mha\"",
                        self.heads
                    ),
                ))
            }
            (Some(AttentionLayout::Mqa), _) if kv != 1 => {
                return Err(ModelError::invalid(
                    Key::model("kv_heads"),
                    kv,
                    "must be 1 with model.attention = \"mqa\"",
                ))
            }
            _ => {}
        }
        if let Some(m) = &self.mla {
            for (k, v) in [
                (Key::model("mla.kv_lora_rank"), m.kv_lora_rank),
                (Key::model("mla.qk_nope_head_dim"), m.qk_nope_head_dim),
                (Key::model("mla.qk_rope_head_dim"), m.qk_rope_head_dim),
                (Key::model("mla.v_head_dim"), m.v_head_dim),
            ] {
                if v == 0 {
                    return Err(ModelError::invalid(k, v, "must be a positive integer"));
                }
            }
            if kv != self.heads {
                return Err(ModelError::invalid(
                    Key::model("kv_heads"),
                    kv,
                    format!(
                        "must equal model.heads = {} with latent attention (each head gets its \
                         own keys and values from the latent)",
                        self.heads
                    ),
                ));
            }
        }
        self.validate_spans()?;
        Ok(())
    }
}

impl ModelSpec {
    /// The window, the chunk and the layer pattern agree with each other and the context.
    fn validate_spans(&self) -> Result<(), ModelError> {
        let ctx = self.context_limit();
        for (key, v) in [
            ("sliding_window", self.sliding_window),
            ("attention_chunk", self.attention_chunk),
        ] {
            match v {
                Some(0) => {
                    return Err(ModelError::invalid(
                        Key::model(key),
                        0,
                        "must be a positive number of positions",
                    ))
                }
                Some(w) if w > ctx => {
                    return Err(ModelError::invalid(
                        Key::model(key),
                        w,
                        format!(
                            "is longer than the model's context ({ctx} positions: \
                             model.max_context, else model.seq_len)"
                        ),
                    ))
                }
                _ => {}
            }
        }
        if let Some(n) = self.sliding_window_layers {
            if self.sliding_window.is_none() {
                return Err(ModelError::invalid(
                    Key::model("sliding_window_layers"),
                    n,
                    "needs model.sliding_window",
                ));
            }
            if n > self.layers {
                return Err(ModelError::invalid(
                    Key::model("sliding_window_layers"),
                    n,
                    format!("must not exceed model.layers = {}", self.layers),
                ));
            }
            if self.layer_pattern.is_some() {
                return Err(ModelError::invalid(
                    Key::model("sliding_window_layers"),
                    n,
                    "cannot be given with model.layer_pattern, which says which layers slide: \
                     give one of them",
                ));
            }
        }
        let has = |k: AttentionSpan| self.layer_pattern.as_ref().is_some_and(|p| p.contains(&k));
        if let Some(p) = &self.layer_pattern {
            let shown = || {
                let names: Vec<_> = p.iter().map(|k| format!("\"{}\"", k.name())).collect();
                format!("[{}]", names.join(", "))
            };
            if p.is_empty() {
                return Err(ModelError::invalid(
                    Key::model("layer_pattern"),
                    "[]",
                    "must name at least one layer kind (full, sliding or chunked)",
                ));
            }
            if p.len() as u64 > self.layers {
                return Err(ModelError::invalid(
                    Key::model("layer_pattern"),
                    shown(),
                    format!(
                        "has {} entries, more than model.layers = {}",
                        p.len(),
                        self.layers
                    ),
                ));
            }
            for (kind, key) in [
                (AttentionSpan::Sliding, "sliding_window"),
                (AttentionSpan::Chunked, "attention_chunk"),
            ] {
                let set = match kind {
                    AttentionSpan::Sliding => self.sliding_window.is_some(),
                    _ => self.attention_chunk.is_some(),
                };
                if has(kind) && !set {
                    return Err(ModelError::invalid(
                        Key::model("layer_pattern"),
                        shown(),
                        format!("has {} layers but model.{key} is not set", kind.name()),
                    ));
                }
            }
            if self.sliding_window.is_some() && !has(AttentionSpan::Sliding) {
                return Err(ModelError::invalid(
                    Key::model("sliding_window"),
                    self.sliding_window.unwrap_or(0),
                    format!(
                        "is set but model.layer_pattern = {} has no sliding layer",
                        shown()
                    ),
                ));
            }
        }
        if let Some(c) = self.attention_chunk {
            if !has(AttentionSpan::Chunked) {
                return Err(ModelError::invalid(
                    Key::model("attention_chunk"),
                    c,
                    "needs model.layer_pattern with chunked layers (which layers attend \
                     within their chunk)",
                ));
            }
        }
        Ok(())
    }
}
