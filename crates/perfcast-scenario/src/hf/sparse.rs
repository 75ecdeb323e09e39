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
//! Layer kinds (`layer_pattern`, the shortest period of the per-layer list): `layer_types`
//! where the config has it (`"full_attention"`, `"sliding_attention"` with
//! `sliding_window`, `"chunked_attention"` with `attention_chunk_size`: GPT-OSS, Gemma 3,
//! recent Llama 4 and Qwen configs); else Llama 4's `attention_chunk_size` on its rotary
//! layers (`no_rope_layers`, by default all but every fourth), and with `sliding_window`:
//! every layer for Mistral/Mixtral, every other layer for Gemma 2, all but every
//! `sliding_window_pattern`-th for Gemma 3, and for Qwen only with `use_sliding_window` (the
//! layers from `max_window_layers` on). A window of another family is an error (which of
//! its layers slide is not known).

use super::{boolean, positive_int, required, HfError};
use perfcast_core::workload::{AttentionLayout, AttentionSpan, MlaSpec, MoeSpec};
use serde_json::Value;

/// The layers' attention spans [`read`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Spans {
    pub sliding_window: Option<u64>,
    pub attention_chunk: Option<u64>,
    pub layer_pattern: Option<Vec<AttentionSpan>>,
}

/// What [`read`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Sparse {
    pub moe: Option<MoeSpec>,
    pub attention: Option<AttentionLayout>,
    pub mla: Option<MlaSpec>,
    pub spans: Spans,
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
    sp.spans = spans(cfg, model_type, layers)?;
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

/// Layer kinds of a `layers`-long list, as its shortest repeating pattern (`None` when every
/// layer is full).
fn shortest_period(kinds: &[AttentionSpan]) -> Option<Vec<AttentionSpan>> {
    if kinds.iter().all(|k| *k == AttentionSpan::Full) {
        return None;
    }
    let n = kinds.len();
    let p = (1..=n)
        .find(|&p| (0..n).all(|i| kinds[i] == kinds[i % p]))
        .unwrap_or(n);
    Some(kinds[..p].to_vec())
}

/// The window, the chunk and the layer pattern (see the module documentation).
fn spans(cfg: &Value, model_type: &str, layers: u64) -> Result<Spans, HfError> {
    let window = positive_int(cfg, "sliding_window")?;
    let chunk = positive_int(cfg, "attention_chunk_size")?;
    let kinds: Option<Vec<AttentionSpan>> = if let Some(types) =
        cfg.get("layer_types").filter(|v| !v.is_null())
    {
        let bad = |value: &Value| HfError::BadValue {
            key: "layer_types".into(),
            value: value.to_string(),
            expected: "a list of \"full_attention\", \"sliding_attention\" or \
                           \"chunked_attention\""
                .into(),
        };
        let list = types.as_array().ok_or_else(|| bad(types))?;
        let kinds = list
            .iter()
            .map(|t| match t.as_str() {
                Some("full_attention") => Ok(AttentionSpan::Full),
                Some("sliding_attention") => Ok(AttentionSpan::Sliding),
                Some("chunked_attention") => Ok(AttentionSpan::Chunked),
                _ => Err(bad(t)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Some(kinds)
    } else if let (Some(_), true) = (chunk, model_type.starts_with("llama4")) {
        // Llama 4: the layers with rotary positions attend within their chunk, the
        // others (NoPE) globally; `no_rope_layers` says which (1: rotary), by default
        // all but every fourth (transformers' Llama4TextConfig).
        let rope = match cfg.get("no_rope_layers").and_then(Value::as_array) {
            Some(l) if !l.is_empty() => l.iter().map(|v| v.as_u64() != Some(0)).collect(),
            _ => (0..layers).map(|i| (i + 1) % 4 != 0).collect::<Vec<_>>(),
        };
        Some(
            rope.into_iter()
                .map(|r| {
                    if r {
                        AttentionSpan::Chunked
                    } else {
                        AttentionSpan::Full
                    }
                })
                .collect(),
        )
    } else if window.is_some() {
        let every = |p: &[AttentionSpan]| (0..layers).map(|i| p[i as usize % p.len()]).collect();
        use AttentionSpan::{Full, Sliding};
        match model_type {
            "mistral" | "mixtral" => Some(every(&[Sliding])),
            t if t.starts_with("qwen") => {
                if boolean(cfg, "use_sliding_window")?.unwrap_or(false) {
                    let from = non_negative(cfg, "max_window_layers")?.unwrap_or(0);
                    Some(
                        (0..layers)
                            .map(|i| if i < from { Full } else { Sliding })
                            .collect(),
                    )
                } else {
                    None
                }
            }
            // Gemma 2 alternates local and global layers, the first local (transformers'
            // Gemma2DecoderLayer: `is_sliding = not bool(layer_idx % 2)`).
            "gemma2" => Some(every(&[Sliding, Full])),
            // Gemma 3: every `sliding_window_pattern`-th layer is global.
            "gemma3_text" | "gemma3" => {
                let n = positive_int(cfg, "sliding_window_pattern")?.unwrap_or(6);
                Some(
                    (0..layers)
                        .map(|i| if (i + 1) % n == 0 { Full } else { Sliding })
                        .collect(),
                )
            }
            _ => {
                // A family whose window pattern is not read here: say so rather than
                // time full attention silently.
                return Err(HfError::Unsupported {
                    what: format!("`sliding_window` of model_type \"{model_type}\""),
                    why: "which layers use the window is not known (no `layer_types`); \
                              set model.sliding_window and model.layer_pattern by hand"
                        .into(),
                });
            }
        }
    } else {
        None
    };
    let Some(kinds) = kinds else {
        return Ok(Spans::default());
    };
    let kinds = &kinds[..kinds.len().min(layers as usize)];
    let pattern = shortest_period(kinds);
    let has = |k| pattern.as_ref().is_some_and(|p| p.contains(&k));
    let need = |k, key: &str, v: Option<u64>| match v {
        None if has(k) => Err(HfError::BadValue {
            key: key.into(),
            value: "null".into(),
            expected: format!(
                "a positive number of positions (`layer_types` has {} layers)",
                AttentionSpan::name(k)
            ),
        }),
        v => Ok(v.filter(|_| has(k))),
    };
    Ok(Spans {
        sliding_window: need(AttentionSpan::Sliding, "sliding_window", window)?,
        attention_chunk: need(AttentionSpan::Chunked, "attention_chunk_size", chunk)?,
        layer_pattern: pattern,
    })
}

#[cfg(test)]
mod tests {
    use super::super::model_from_hf_config;
    use perfcast_core::workload::{AttentionLayout, AttentionSpan};
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
        assert_eq!(
            m.layer_pattern,
            Some(vec![AttentionSpan::Sliding, AttentionSpan::Full])
        );
        let s = m.layer_spans(0, 36);
        assert_eq!((s.sliding, s.window, s.full), (18, 128, 18));
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
                "max_position_embeddings": 1048576, "tie_word_embeddings": false,
                "attention_chunk_size": 8192
            }
        });
        let m = model_from_hf_config(&maverick).unwrap();
        use AttentionSpan::{Chunked, Full};
        assert_eq!(m.layer_pattern, Some(vec![Chunked, Chunked, Chunked, Full]));
        assert_eq!(m.attention_chunk, Some(8192));
        // The same from `layer_types` (newer transformers write it), and from
        // `no_rope_layers`.
        let mut typed = maverick.clone();
        let types: Vec<&str> = (0..48)
            .map(|i| {
                if (i + 1) % 4 == 0 {
                    "full_attention"
                } else {
                    "chunked_attention"
                }
            })
            .collect();
        typed["text_config"]["layer_types"] = json!(types);
        let t = model_from_hf_config(&typed).unwrap();
        assert_eq!(t.layer_pattern, m.layer_pattern);
        let mut nope = maverick.clone();
        let rope: Vec<u64> = (0..48).map(|i| u64::from((i + 1) % 4 != 0)).collect();
        nope["text_config"]["no_rope_layers"] = json!(rope);
        assert_eq!(
            model_from_hf_config(&nope).unwrap().layer_pattern,
            m.layer_pattern
        );
        // A kind the reader does not know, and chunked layers without a chunk: errors
        // naming the key.
        let mut odd = typed.clone();
        odd["text_config"]["layer_types"][5] = json!("linear_attention");
        let e = model_from_hf_config(&odd).unwrap_err().to_string();
        assert!(
            e.contains("layer_types") && e.contains("linear_attention"),
            "{e}"
        );
        let mut no_chunk = typed.clone();
        no_chunk["text_config"]["attention_chunk_size"] = json!(null);
        let e = model_from_hf_config(&no_chunk).unwrap_err().to_string();
        assert!(e.contains("attention_chunk_size"), "{e}");
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
