//! The sparse and attention-variant parts of a Hugging Face `config.json`.
//!
//! | ModelSpec | Mixtral / GPT-OSS | Qwen2/3-MoE | DeepSeek-V2/V3, Kimi K2 | Llama 4 (`text_config`) |
//! |---|---|---|---|---|
//! | `moe.experts` | `num_local_experts` | `num_experts` | `n_routed_experts` | `num_local_experts` |
//! | `moe.top_k` | `num_experts_per_tok` (`experts_per_token`) | `num_experts_per_tok` | `num_experts_per_tok` | `num_experts_per_tok` |
//! | `moe.expert_ffn_hidden` | `intermediate_size` | `moe_intermediate_size` | `moe_intermediate_size` | `intermediate_size` |
//! | `moe.shared_experts` | – | 1 if `shared_expert_intermediate_size` | `n_shared_experts` | 1 |
//! | `moe.dense_layers` | – | `mlp_only_layers` (count) | `first_k_dense_replace` | – |
//! | `moe.moe_layer_freq` | – | `decoder_sparse_step` | `moe_layer_freq` | `interleave_moe_layer_step` |
//! | `moe.expert_groups` / `group_top_k` | – | – | `n_group` / `topk_group` (when > 1) | – |
//! | `ffn_hidden` (dense layers) | `intermediate_size` | `intermediate_size` | `intermediate_size` | `intermediate_size_mlp` |
//! | `mla` | – | – | `q_lora_rank` (null: 0), `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim` | – |
//! | `mtp_layers` | – | – | `num_nextn_predict_layers` | – |
//!
//! Sliding windows: `sliding_window` with `layer_types` (the `"sliding_attention"` entries
//! counted: GPT-OSS, Gemma 3), all layers for Mistral/Mixtral, every other layer for Gemma 2,
//! all but every `sliding_window_pattern`-th for Gemma 3, and for Qwen only with
//! `use_sliding_window` (the layers from `max_window_layers` on). A window of another family
//! is an error (which of its layers slide is not known).

use super::{boolean, positive_int, required, HfError};
use perfcast_core::workload::{AttentionLayout, MlaSpec, MoeSpec};
use serde_json::Value;

/// What [`read`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Sparse {
    pub moe: Option<MoeSpec>,
    pub attention: Option<AttentionLayout>,
    pub mla: Option<MlaSpec>,
    pub sliding_window: Option<u64>,
    pub sliding_window_layers: Option<u64>,
    pub mtp_layers: u64,
    /// The dense layers' MLP width when `intermediate_size` is the experts' (Llama 4).
    pub dense_ffn_hidden: Option<u64>,
}

fn non_negative(cfg: &Value, key: &str) -> Result<Option<u64>, HfError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| HfError::BadValue {
            key: key.into(),
            value: v.to_string(),
            expected: "a non-negative integer".into(),
        }),
    }
}

/// The MoE, MLA, sliding-window and MTP fields of `cfg` (a language model's config),
/// `layers` and `ffn_hidden` as the dense reader found them.
pub(super) fn read(
    cfg: &Value,
    model_type: &str,
    layers: u64,
    ffn_hidden: u64,
) -> Result<Sparse, HfError> {
    let mut sp = Sparse {
        moe: moe(cfg, model_type, ffn_hidden)?,
        mtp_layers: non_negative(cfg, "num_nextn_predict_layers")?.unwrap_or(0),
        ..Sparse::default()
    };
    if model_type.starts_with("llama4") && sp.moe.is_some() {
        sp.dense_ffn_hidden = positive_int(cfg, "intermediate_size_mlp")?;
    }
    if let Some(kv_rank) = positive_int(cfg, "kv_lora_rank")? {
        sp.attention = Some(AttentionLayout::Mla);
        sp.mla = Some(MlaSpec {
            q_lora_rank: non_negative(cfg, "q_lora_rank")?.unwrap_or(0),
            kv_lora_rank: kv_rank,
            qk_nope_head_dim: required(cfg, &["qk_nope_head_dim"])?,
            qk_rope_head_dim: required(cfg, &["qk_rope_head_dim"])?,
            v_head_dim: required(cfg, &["v_head_dim"])?,
        });
    }
    let (window, count) = sliding(cfg, model_type, layers)?;
    sp.sliding_window = window;
    sp.sliding_window_layers = count;
    Ok(sp)
}

fn moe(cfg: &Value, model_type: &str, ffn_hidden: u64) -> Result<Option<MoeSpec>, HfError> {
    let top_k = || required(cfg, &["num_experts_per_tok", "experts_per_token"]);
    if let Some(experts) = positive_int(cfg, "n_routed_experts")? {
        // DeepSeek-V2/V3, Kimi K2.
        let mut m = MoeSpec::new(
            experts,
            top_k()?,
            required(cfg, &["moe_intermediate_size"])?,
        );
        m.shared_experts = non_negative(cfg, "n_shared_experts")?.unwrap_or(0);
        m.dense_layers = non_negative(cfg, "first_k_dense_replace")?.unwrap_or(0);
        m.moe_layer_freq = positive_int(cfg, "moe_layer_freq")?.unwrap_or(1);
        if let (Some(g), Some(k)) = (
            positive_int(cfg, "n_group")?,
            positive_int(cfg, "topk_group")?,
        ) {
            if g > 1 {
                m.expert_groups = Some(g);
                m.group_top_k = Some(k);
            }
        }
        return Ok(Some(m));
    }
    if let Some(experts) = positive_int(cfg, "num_local_experts")? {
        // Mixtral, GPT-OSS, Llama 4: the experts' width is intermediate_size.
        let mut m = MoeSpec::new(experts, top_k()?, ffn_hidden);
        if model_type.starts_with("llama4") {
            m.shared_experts = 1;
            m.moe_layer_freq = positive_int(cfg, "interleave_moe_layer_step")?.unwrap_or(1);
        }
        return Ok(Some(m));
    }
    if let Some(experts) = positive_int(cfg, "num_experts")? {
        // Qwen2-MoE / Qwen3-MoE.
        let mut m = MoeSpec::new(
            experts,
            top_k()?,
            required(cfg, &["moe_intermediate_size"])?,
        );
        if let Some(w) = positive_int(cfg, "shared_expert_intermediate_size")? {
            m.shared_experts = 1;
            m.shared_expert_ffn_hidden = Some(w);
        }
        m.moe_layer_freq = positive_int(cfg, "decoder_sparse_step")?.unwrap_or(1);
        m.dense_layers = match cfg.get("mlp_only_layers") {
            None | Some(Value::Null) => 0,
            Some(Value::Array(a)) => a.len() as u64,
            Some(v) => {
                return Err(HfError::BadValue {
                    key: "mlp_only_layers".into(),
                    value: v.to_string(),
                    expected: "a list of layer indices".into(),
                })
            }
        };
        return Ok(Some(m));
    }
    Ok(None)
}

fn sliding(
    cfg: &Value,
    model_type: &str,
    layers: u64,
) -> Result<(Option<u64>, Option<u64>), HfError> {
    let Some(window) = positive_int(cfg, "sliding_window")? else {
        return Ok((None, None));
    };
    if let Some(types) = cfg.get("layer_types").filter(|v| !v.is_null()) {
        let Some(list) = types.as_array() else {
            return Err(HfError::BadValue {
                key: "layer_types".into(),
                value: types.to_string(),
                expected: "a list of layer kinds".into(),
            });
        };
        let n = list
            .iter()
            .filter(|t| t.as_str() == Some("sliding_attention"))
            .count() as u64;
        return Ok(if n == 0 {
            (None, None)
        } else {
            (Some(window), Some(n.min(layers)))
        });
    }
    match model_type {
        "mistral" | "mixtral" => Ok((Some(window), None)),
        t if t.starts_with("qwen") => {
            if boolean(cfg, "use_sliding_window")?.unwrap_or(false) {
                let from = non_negative(cfg, "max_window_layers")?.unwrap_or(0);
                let n = layers.saturating_sub(from);
                Ok(if n == 0 {
                    (None, None)
                } else {
                    (Some(window), Some(n))
                })
            } else {
                Ok((None, None))
            }
        }
        // Gemma 2 alternates local and global layers, the first local (transformers'
        // Gemma2DecoderLayer: `is_sliding = not bool(layer_idx % 2)`).
        "gemma2" => Ok((Some(window), Some(layers.div_ceil(2)))),
        // Gemma 3: every `sliding_window_pattern`-th layer is global.
        "gemma3_text" | "gemma3" => {
            let n = positive_int(cfg, "sliding_window_pattern")?.unwrap_or(6);
            Ok((Some(window), Some(layers - layers / n)))
        }
        _ => {
            // A family whose window pattern is not read here: say so rather than time full
            // attention silently.
            Err(HfError::Unsupported {
                what: format!("`sliding_window` of model_type \"{model_type}\""),
                why: "which layers use the window is not known (no `layer_types`); set \
                      model.sliding_window and model.sliding_window_layers by hand"
                    .into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::model_from_hf_config;
    use perfcast_core::workload::AttentionLayout;
    use serde_json::json;

    /// deepseek-ai/DeepSeek-V3 config.json (public), abridged to the fields that matter.
    fn deepseek_v3() -> serde_json::Value {
        json!({
            "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
            "n_group": 8, "topk_group": 4, "num_hidden_layers": 61,
            "num_attention_heads": 128, "num_key_value_heads": 128,
            "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 1,
            "max_position_embeddings": 163840, "vocab_size": 129280,
            "tie_word_embeddings": false
        })
    }

    #[test]
    fn deepseek_v3_reads_and_counts() {
        let m = model_from_hf_config(&deepseek_v3()).unwrap();
        assert_eq!(m.attention, Some(AttentionLayout::Mla));
        let mla = m.mla.unwrap();
        assert_eq!(
            (mla.q_lora_rank, mla.kv_lora_rank, mla.v_head_dim),
            (1536, 512, 128)
        );
        let moe = m.moe.unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.shared_experts), (256, 8, 1));
        assert_eq!((moe.dense_layers, moe.expert_groups), (3, Some(8)));
        assert_eq!(m.mtp_layers, 1);
        let p = m.params() as f64;
        assert!((p - 671e9).abs() / 671e9 < 0.005, "{p}");
        // DeepSeek-V2-Lite: no query compression.
        let mut lite = deepseek_v3();
        lite["q_lora_rank"] = json!(null);
        assert_eq!(
            model_from_hf_config(&lite)
                .unwrap()
                .mla
                .unwrap()
                .q_lora_rank,
            0
        );
    }

    #[test]
    fn qwen_gpt_oss_llama4_mixtral() {
        let qwen = json!({
            "model_type": "qwen3_moe", "hidden_act": "silu", "hidden_size": 4096,
            "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4,
            "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
            "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
            "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
            "tie_word_embeddings": false, "sliding_window": null, "use_sliding_window": false
        });
        let m = model_from_hf_config(&qwen).unwrap();
        assert_eq!(m.moe.unwrap().expert_ffn_hidden, 1536);
        assert!((m.params() as f64 - 235e9).abs() / 235e9 < 0.005);
        let types: Vec<&str> = (0..36)
            .map(|i| {
                if i % 2 == 0 {
                    "sliding_attention"
                } else {
                    "full_attention"
                }
            })
            .collect();
        let oss = json!({
            "model_type": "gpt_oss", "hidden_act": "silu", "hidden_size": 2880,
            "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
            "experts_per_token": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
            "sliding_window": 128, "layer_types": types, "attention_bias": true,
            "tie_word_embeddings": false
        });
        let m = model_from_hf_config(&oss).unwrap();
        assert_eq!(m.sliding(), (18, 128));
        assert!(m.bias() && m.moe.unwrap().top_k == 4);
        assert!((m.params() as f64 - 116.8e9).abs() / 116.8e9 < 0.005);
        let maverick = json!({
            "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
            "text_config": {
                "model_type": "llama4_text", "hidden_act": "silu", "hidden_size": 5120,
                "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
                "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                "num_local_experts": 128, "num_experts_per_tok": 1,
                "interleave_moe_layer_step": 2, "vocab_size": 202048,
                "max_position_embeddings": 1048576, "tie_word_embeddings": false
            }
        });
        let m = model_from_hf_config(&maverick).unwrap();
        assert_eq!((m.ffn_hidden, m.moe_layers()), (16384, 24));
        assert!((m.params() as f64 - 400e9).abs() / 400e9 < 0.005);
        assert!((m.active_params() as f64 - 17e9).abs() / 17e9 < 0.015);
        let mixtral = json!({
            "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2,
            "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": null,
            "tie_word_embeddings": false
        });
        let m = model_from_hf_config(&mixtral).unwrap();
        assert_eq!(m.sliding_window, None);
        assert!((m.active_params() as f64 - 12.9e9).abs() / 12.9e9 < 0.005);
    }

    #[test]
    fn bad_sparse_fields_name_the_key() {
        let table = [
            ("num_experts_per_tok", json!(300), "moe.top_k"),
            (
                "moe_intermediate_size",
                json!(null),
                "moe_intermediate_size",
            ),
            ("qk_rope_head_dim", json!(null), "qk_rope_head_dim"),
            ("first_k_dense_replace", json!(-1), "first_k_dense_replace"),
        ];
        for (key, value, want) in table {
            let mut c = deepseek_v3();
            if value.is_null() {
                c.as_object_mut().unwrap().remove(key);
            } else {
                c[key] = value;
            }
            let e = model_from_hf_config(&c).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
        }
        let gemma = json!({
            "model_type": "phi3", "hidden_act": "silu", "hidden_size": 2304,
            "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000,
            "max_position_embeddings": 8192, "sliding_window": 4096
        });
        let e = model_from_hf_config(&gemma).unwrap_err().to_string();
        assert!(e.contains("sliding_window"), "{e}");
    }
}
