//! The workload: a dense (or mixture-of-experts) decoder-only transformer.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    LayerNorm,
    RmsNorm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionKind {
    /// Learned absolute position embeddings (GPT-2/3): `seq_len x hidden` parameters.
    Learned,
    /// Rotary embeddings (Llama): no parameters, an elementwise op on Q and K.
    Rope,
}

/// Mixture-of-experts MLP (the validation schema's `[case.model.moe]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn_hidden: u64,
    #[serde(default)]
    pub shared_experts: u64,
    #[serde(default)]
    pub dense_layers: u64,
    #[serde(default = "one")]
    pub moe_layer_freq: u64,
}

fn one() -> u64 {
    1
}

/// A decoder-only transformer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default)]
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    /// Key/value heads (query groups); defaults to `heads` (multi-head attention).
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// Defaults to `hidden / heads`.
    #[serde(default)]
    pub head_dim: Option<u64>,
    pub ffn_hidden: u64,
    pub ffn_act: FfnAct,
    pub vocab: u64,
    /// Training sequence length (or context length for inference).
    pub seq_len: u64,
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
    #[serde(default)]
    pub moe: Option<MoeSpec>,
}

impl ModelSpec {
    pub fn kv_heads(&self) -> u64 {
        self.kv_heads.unwrap_or(self.heads)
    }
    pub fn head_dim(&self) -> u64 {
        self.head_dim.unwrap_or(self.hidden / self.heads.max(1))
    }
    pub fn norm(&self) -> NormKind {
        self.norm.unwrap_or(match self.ffn_act {
            FfnAct::Swiglu => NormKind::RmsNorm,
            _ => NormKind::LayerNorm,
        })
    }
    pub fn position(&self) -> PositionKind {
        self.position.unwrap_or(match self.ffn_act {
            FfnAct::Swiglu => PositionKind::Rope,
            _ => PositionKind::Learned,
        })
    }
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

    /// Matmul weights of one layer's attention (QKV and output projections).
    pub fn attention_weights(&self) -> u64 {
        let h = self.hidden;
        h * (self.q_width() + 2 * self.kv_width()) + self.q_width() * h
    }

    /// Matmul weights of a dense MLP.
    pub fn mlp_weights(&self) -> u64 {
        self.ffn_act.matrices() * self.hidden * self.ffn_hidden
    }

    /// Non-matmul parameters of one layer: biases and norm scales/shifts.
    pub fn layer_small_params(&self) -> u64 {
        let h = self.hidden;
        let norms = match self.norm() {
            NormKind::LayerNorm => 2 * 2 * h,
            NormKind::RmsNorm => 2 * h,
        };
        let biases = if self.bias() {
            (self.q_width() + 2 * self.kv_width())
                + h
                + (self.ffn_act.matrices() - 1) * self.ffn_hidden
                + h
        } else {
            0
        };
        norms + biases
    }

    /// Parameters of one dense layer.
    pub fn layer_params(&self) -> u64 {
        self.attention_weights() + self.mlp_weights() + self.layer_small_params()
    }

    /// Embedding parameters: token table, learned positions, and the LM head when untied.
    pub fn embedding_params(&self) -> u64 {
        let tok = self.vocab * self.hidden;
        let pos = match self.position() {
            PositionKind::Learned => self.seq_len * self.hidden,
            PositionKind::Rope => 0,
        };
        let head = if self.tied_embeddings { 0 } else { tok };
        tok + pos + head
    }

    /// Total parameters (dense models; MoE counts every expert).
    pub fn params(&self) -> u64 {
        let final_norm = match self.norm() {
            NormKind::LayerNorm => 2 * self.hidden,
            NormKind::RmsNorm => self.hidden,
        };
        let layers = match &self.moe {
            None => self.layers * self.layer_params(),
            Some(m) => {
                let moe_layers = self.moe_layers(m);
                let dense = self.layers - moe_layers;
                let expert = self.ffn_act.matrices() * self.hidden * m.expert_ffn_hidden;
                let moe_layer = self.attention_weights()
                    + self.layer_small_params()
                    + (m.experts + m.shared_experts) * expert
                    + self.hidden * m.experts;
                dense * self.layer_params() + moe_layers * moe_layer
            }
        };
        layers + self.embedding_params() + final_norm
    }

    fn moe_layers(&self, m: &MoeSpec) -> u64 {
        let rest = self.layers.saturating_sub(m.dense_layers);
        rest / m.moe_layer_freq.max(1)
    }

    /// Matmul weights a token passes through (the schema's `P_mm`): projections, MLP and
    /// the logit layer; not the input embedding, norms or biases. Dense models only.
    pub fn matmul_params_per_token(&self) -> u64 {
        self.layers * (self.attention_weights() + self.mlp_weights()) + self.vocab * self.hidden
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
        if let Some(m) = &self.moe {
            if m.experts == 0 || m.top_k == 0 || m.top_k > m.experts || m.expert_ffn_hidden == 0 {
                return Err(ModelError::invalid(
                    Key::model("moe"),
                    format!("experts={}, top_k={}", m.experts, m.top_k),
                    "needs experts >= top_k >= 1 and expert_ffn_hidden > 0",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt(layers: u64, hidden: u64, heads: u64) -> ModelSpec {
        ModelSpec {
            name: String::new(),
            layers,
            hidden,
            heads,
            kv_heads: None,
            head_dim: None,
            ffn_hidden: 4 * hidden,
            ffn_act: FfnAct::Gelu,
            vocab: 51200,
            seq_len: 2048,
            tied_embeddings: true,
            norm: None,
            position: None,
            bias: None,
            moe: None,
        }
    }

    /// Megatron's count 12·L·h²·(1 + 13/(12h) + (V+s)/(12·L·h)) (Narayanan 2021 §5.1),
    /// tied embeddings; published 175B -> 174.6e9, 530B -> 529.6e9, 1T -> 1008e9.
    #[test]
    fn megatron_parameter_counts() {
        let table = [
            (96, 12288, 96, 174.6e9),
            (105, 20480, 128, 529.6e9),
            (128, 25600, 160, 1008.0e9),
        ];
        for (l, h, a, want) in table {
            let m = gpt(l, h, a);
            let p = m.params() as f64;
            assert!((p - want).abs() / want < 1e-3, "L={l}: {p} vs {want}");
        }
    }

    /// Llama 2 7B: 6.74e9 parameters (Touvron et al. 2023), untied, SwiGLU, RMSNorm.
    #[test]
    fn llama2_7b_count() {
        let m = ModelSpec {
            ffn_hidden: 11008,
            ffn_act: FfnAct::Swiglu,
            vocab: 32000,
            seq_len: 4096,
            tied_embeddings: false,
            ..gpt(32, 4096, 32)
        };
        let p = m.params() as f64;
        assert!((p - 6.738e9).abs() / 6.738e9 < 1e-3, "{p}");
    }

    #[test]
    fn validation_names_key() {
        let mut m = gpt(2, 64, 3);
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("model.heads"), "{e}");
        m.heads = 4;
        m.kv_heads = Some(3);
        assert!(m
            .validate()
            .unwrap_err()
            .to_string()
            .contains("model.kv_heads"));
        m.kv_heads = Some(2);
        m.layers = 0;
        assert!(m
            .validate()
            .unwrap_err()
            .to_string()
            .contains("model.layers"));
    }
}
