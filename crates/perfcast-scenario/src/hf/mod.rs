//! Read a Hugging Face `config.json` into a [`ModelSpec`].
//!
//! Field names (transformers `PretrainedConfig` subclasses):
//!
//! | ModelSpec | Llama / Mistral / Qwen / GPT-NeoX / Nemotron | GPT-2 |
//! |---|---|---|
//! | `hidden` | `hidden_size` | `n_embd` |
//! | `layers` | `num_hidden_layers` | `n_layer` |
//! | `heads` | `num_attention_heads` | `n_head` |
//! | `kv_heads` | `num_key_value_heads` (default: heads) | = heads |
//! | `head_dim` | `head_dim` (default: hidden / heads) | – |
//! | `ffn_hidden` | `intermediate_size` | `n_inner` (null: 4·n_embd) |
//! | `vocab` | `vocab_size` | `vocab_size` |
//! | `max_context` | `max_position_embeddings` | `n_positions` (or `n_ctx`) |
//! | `seq_len` | the smaller of `max_context` and 8,192 | the same |
//! | `ffn_act` | `hidden_act` + `model_type` (gated families -> swiglu) | `activation_function` |
//! | `tied_embeddings` | `tie_word_embeddings` (transformers' default: true) | always tied |
//!
//! A config gives the longest context, not the length the model was trained at: the training
//! sequence length defaults to [`TRAINING_SEQ_LEN`] where the context allows it (Llama 3 and
//! 3.1 pre-trained at 8,192 before extending the context, Dubey et al. 2024 §3.4; DeepSeek-V3
//! at 4,096), so a training run of a long-context model is not a 131,072-token one unless
//! `model.seq_len` says so.
//!
//! Architecture defaults the config does not spell out (norm, positions, biases) follow the
//! model family: GPT-2 LayerNorm + learned positions + biases; GPT-NeoX LayerNorm + rotary +
//! biases; Nemotron LayerNorm + rotary, no biases; Llama-like RMSNorm + rotary, no biases.
//! Mixture-of-experts, latent attention, sliding windows and multi-token prediction are read
//! by `sparse` (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3 and Kimi K2, GPT-OSS, Llama 4 keys).
//! A Llama 4-style config nests the language model under `text_config`; it is read from
//! there.

mod sparse;

/// The training sequence length a config's model defaults to (capped by its context):
/// today's common pre-training length of open models (Llama 3: 8,192).
pub const TRAINING_SEQ_LEN: u64 = 8192;

use perfcast_core::workload::{FfnAct, ModelSpec, NormKind, PositionKind};
use serde_json::Value;
use thiserror::Error;

/// Why a `config.json` could not be read.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum HfError {
    #[error("config.json is not a JSON object")]
    NotAnObject,
    #[error("config.json: missing key `{key}`{}", if alternatives.is_empty() { String::new() } else { format!(" (or {})", alternatives.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")) })]
    Missing {
        key: String,
        alternatives: Vec<String>,
    },
    #[error("config.json: `{key}` = {value}: expected {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: String,
    },
    #[error("config.json: {what} is not supported: {why}")]
    Unsupported { what: String, why: String },
    #[error("config.json: the model it describes is invalid: {0}")]
    Invalid(String),
}

/// Model families whose MLP is gated (3 matrices) whatever the activation is called.
const GATED: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo",
    "olmo2",
    "granite",
    "cohere",
    "internlm2",
    "yi",
    "baichuan",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "gpt_oss",
    "llama4",
    "llama4_text",
];

pub(crate) fn positive_int(cfg: &Value, key: &str) -> Result<Option<u64>, HfError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(HfError::BadValue {
                key: key.into(),
                value: v.to_string(),
                expected: "a positive integer".into(),
            }),
        },
    }
}

/// The first key present among `keys` (the first is the canonical name in messages).
pub(crate) fn required(cfg: &Value, keys: &[&str]) -> Result<u64, HfError> {
    for k in keys {
        if let Some(v) = positive_int(cfg, k)? {
            return Ok(v);
        }
    }
    Err(HfError::Missing {
        key: keys[0].into(),
        alternatives: keys[1..].iter().map(|s| s.to_string()).collect(),
    })
}

pub(crate) fn string<'a>(cfg: &'a Value, key: &str) -> Result<Option<&'a str>, HfError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(HfError::BadValue {
            key: key.into(),
            value: v.to_string(),
            expected: "a string".into(),
        }),
    }
}

pub(crate) fn boolean(cfg: &Value, key: &str) -> Result<Option<bool>, HfError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(HfError::BadValue {
            key: key.into(),
            value: v.to_string(),
            expected: "true or false".into(),
        }),
    }
}

/// Read a Hugging Face `config.json` (already parsed) into a model.
pub fn model_from_hf_config(cfg: &Value) -> Result<ModelSpec, HfError> {
    if !cfg.is_object() {
        return Err(HfError::NotAnObject);
    }
    // Multimodal configs (Llama 4) nest the language model's fields.
    let outer = cfg;
    let cfg = match cfg.get("text_config") {
        Some(t) if t.is_object() && cfg.get("hidden_size").is_none() => t,
        _ => cfg,
    };
    let model_type = string(cfg, "model_type")?
        .unwrap_or("")
        .to_ascii_lowercase();
    let is_gpt2 =
        model_type == "gpt2" || (cfg.get("n_embd").is_some() && cfg.get("hidden_size").is_none());
    let name = string(outer, "_name_or_path")?
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| {
            outer
                .get("architectures")
                .and_then(|a| a.get(0))
                .and_then(|a| a.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| model_type.clone());

    let (hidden, layers, heads, kv_heads, ffn_hidden, seq_len, act_key, tied) = if is_gpt2 {
        let hidden = required(cfg, &["n_embd", "hidden_size"])?;
        let layers = required(cfg, &["n_layer", "num_hidden_layers"])?;
        let heads = required(cfg, &["n_head", "num_attention_heads"])?;
        let ffn = positive_int(cfg, "n_inner")?.unwrap_or(4 * hidden);
        let seq = required(cfg, &["n_positions", "n_ctx", "max_position_embeddings"])?;
        // GPT-2 always ties the LM head to the token embedding.
        let tied = boolean(cfg, "tie_word_embeddings")?.unwrap_or(true);
        (
            hidden,
            layers,
            heads,
            heads,
            ffn,
            seq,
            "activation_function",
            tied,
        )
    } else {
        let hidden = required(cfg, &["hidden_size", "n_embd", "d_model"])?;
        let layers = required(cfg, &["num_hidden_layers", "n_layer", "num_layers"])?;
        let heads = required(cfg, &["num_attention_heads", "n_head"])?;
        let kv = positive_int(cfg, "num_key_value_heads")?.unwrap_or(heads);
        let ffn = required(cfg, &["intermediate_size", "ffn_hidden_size", "n_inner"])?;
        let seq = required(
            cfg,
            &["max_position_embeddings", "n_positions", "seq_length"],
        )?;
        // transformers' PretrainedConfig default is true; Llama-family configs set false.
        let tied = boolean(cfg, "tie_word_embeddings")?.unwrap_or(true);
        (hidden, layers, heads, kv, ffn, seq, "hidden_act", tied)
    };
    let vocab = required(cfg, &["vocab_size", "padded_vocab_size"])?;
    let head_dim = positive_int(cfg, "head_dim")?;

    let ffn_act = ffn_act(cfg, act_key, GATED.contains(&model_type.as_str()))?;

    let (norm, position, bias) = match model_type.as_str() {
        "gpt2" => (NormKind::LayerNorm, PositionKind::Learned, true),
        "gpt_neox" => (NormKind::LayerNorm, PositionKind::Rope, true),
        "nemotron" => (NormKind::LayerNorm, PositionKind::Rope, false),
        _ if is_gpt2 => (NormKind::LayerNorm, PositionKind::Learned, true),
        _ => {
            let bias = boolean(cfg, "attention_bias")?.unwrap_or(false)
                || boolean(cfg, "mlp_bias")?.unwrap_or(false);
            (NormKind::RmsNorm, PositionKind::Rope, bias)
        }
    };

    let sp = sparse::read(cfg, &model_type, layers, ffn_hidden)?;
    // GPT-OSS and other MoE families with biases say so per module.
    let bias = bias || boolean(cfg, "attention_bias")?.unwrap_or(false);

    let m = ModelSpec {
        name,
        kv_heads: Some(kv_heads),
        head_dim,
        tied_embeddings: tied,
        norm: Some(norm),
        position: Some(position),
        bias: Some(bias),
        moe: sp.moe,
        attention: sp.attention,
        mla: sp.mla,
        sliding_window: sp.spans.sliding_window,
        attention_chunk: sp.spans.attention_chunk,
        layer_pattern: sp.spans.layer_pattern,
        max_context: Some(seq_len),
        mtp_layers: sp.mtp_layers,
        ..ModelSpec::dense(
            layers,
            hidden,
            heads,
            sp.dense_ffn_hidden.unwrap_or(ffn_hidden),
            ffn_act,
            vocab,
            seq_len.min(TRAINING_SEQ_LEN),
        )
    };
    m.validate().map_err(|e| HfError::Invalid(e.to_string()))?;
    Ok(m)
}

/// The MLP activation of `cfg[act_key]` (or `hidden_activation`); gated families keep three
/// matrices whatever the activation.
fn ffn_act(cfg: &Value, act_key: &str, gated: bool) -> Result<FfnAct, HfError> {
    let act = string(cfg, act_key)?
        .or(string(cfg, "hidden_activation")?)
        .ok_or_else(|| HfError::Missing {
            key: act_key.into(),
            alternatives: vec!["hidden_activation".into()],
        })?
        .to_ascii_lowercase();
    Ok(match act.as_str() {
        "relu2" | "squared_relu" | "squared-relu" => FfnAct::Relu2,
        "silu" | "swish" | "swiglu" => FfnAct::Swiglu,
        // Gated families (Gemma's GeGLU) keep three matrices whatever the activation.
        "gelu" | "gelu_new" | "gelu_fast" | "gelu_pytorch_tanh" | "gelu_python" | "quick_gelu"
        | "relu"
            if gated =>
        {
            FfnAct::Swiglu
        }
        "gelu" | "gelu_new" | "gelu_fast" | "gelu_pytorch_tanh" | "gelu_python" | "quick_gelu"
        | "relu" => FfnAct::Gelu,
        other => {
            return Err(HfError::BadValue {
                key: act_key.into(),
                value: format!("\"{other}\""),
                expected: "silu/swish (gated MLP), gelu* or relu (2-matrix MLP), or relu2".into(),
            })
        }
    })
}

/// Read a `config.json` file.
pub fn model_from_hf_file(path: &std::path::Path) -> Result<ModelSpec, String> {
    let text = perfcast_config::input::read_text(path, perfcast_config::input::MAX_TEXT_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    model_from_hf_config(&v).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// meta-llama/Llama-2-7b-hf config.json (public), abridged to the fields that matter.
    fn llama2_7b() -> Value {
        json!({
            "_name_or_path": "meta-llama/Llama-2-7b-hf",
            "architectures": ["LlamaForCausalLM"],
            "bos_token_id": 1, "eos_token_id": 2,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 11008,
            "max_position_embeddings": 4096,
            "model_type": "llama",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "pretraining_tp": 1,
            "rms_norm_eps": 1e-05,
            "rope_scaling": null,
            "tie_word_embeddings": false,
            "torch_dtype": "float16",
            "vocab_size": 32000
        })
    }

    /// openai-community/gpt2 config.json (public), abridged.
    fn gpt2() -> Value {
        json!({
            "activation_function": "gelu_new",
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "n_ctx": 1024,
            "n_embd": 768,
            "n_head": 12,
            "n_inner": null,
            "n_layer": 12,
            "n_positions": 1024,
            "vocab_size": 50257
        })
    }

    /// A config gives the longest context; training defaults to at most 8,192 tokens.
    #[test]
    fn a_long_context_config_trains_at_8192_and_serves_its_context() {
        let mut v = llama2_7b();
        v["max_position_embeddings"] = json!(131072);
        let m = model_from_hf_config(&v).unwrap();
        assert_eq!((m.seq_len, m.context_limit()), (8192, 131072));
        let m = model_from_hf_config(&llama2_7b()).unwrap();
        assert_eq!((m.seq_len, m.context_limit()), (4096, 4096));
    }

    #[test]
    fn llama2_7b_reads_and_counts() {
        let m = model_from_hf_config(&llama2_7b()).unwrap();
        assert_eq!(
            (
                m.layers,
                m.hidden,
                m.heads,
                m.kv_heads(),
                m.ffn_hidden,
                m.vocab,
                m.seq_len
            ),
            (32, 4096, 32, 32, 11008, 32000, 4096)
        );
        assert_eq!(m.ffn_act, FfnAct::Swiglu);
        assert!(!m.tied_embeddings && !m.bias());
        assert_eq!(m.norm(), NormKind::RmsNorm);
        // Touvron et al. 2023: 6.74e9 parameters.
        let p = m.params() as f64;
        assert!((p - 6.738e9).abs() / 6.738e9 < 1e-3, "{p}");
    }

    #[test]
    fn gpt2_reads_and_counts() {
        let m = model_from_hf_config(&gpt2()).unwrap();
        assert_eq!(
            (m.layers, m.hidden, m.heads, m.ffn_hidden),
            (12, 768, 12, 3072)
        );
        assert_eq!((m.vocab, m.seq_len), (50257, 1024));
        assert_eq!(m.ffn_act, FfnAct::Gelu);
        assert!(m.tied_embeddings && m.bias());
        assert_eq!(m.position(), PositionKind::Learned);
        // GPT-2 small: 124,439,808 parameters (the Hugging Face checkpoint).
        assert_eq!(m.params(), 124_439_808);
    }

    #[test]
    fn gqa_head_dim_and_relu2() {
        // Llama-3-8B-like: GQA with 8 KV heads.
        let mut c = llama2_7b();
        c["num_key_value_heads"] = json!(8);
        c["intermediate_size"] = json!(14336);
        c["vocab_size"] = json!(128256);
        let m = model_from_hf_config(&c).unwrap();
        assert_eq!(m.kv_heads(), 8);
        // Llama 3 8B: 8.03e9.
        let p = m.params() as f64;
        assert!((p - 8.03e9).abs() / 8.03e9 < 2e-3, "{p}");
        // Nemotron: squared ReLU, explicit head_dim.
        let n = json!({
            "model_type": "nemotron", "hidden_act": "relu2", "hidden_size": 6144,
            "num_hidden_layers": 32, "num_attention_heads": 48, "num_key_value_heads": 8,
            "head_dim": 128, "intermediate_size": 24576, "vocab_size": 256000,
            "max_position_embeddings": 4096, "tie_word_embeddings": false
        });
        let m = model_from_hf_config(&n).unwrap();
        assert_eq!(m.ffn_act, FfnAct::Relu2);
        assert_eq!(m.head_dim(), 128);
        assert!(!m.bias());
    }

    #[test]
    fn errors_name_the_key() {
        let table: [(&str, Value, &str); 5] = [
            ("hidden_size", json!(null), "hidden_size"),
            ("num_hidden_layers", json!(null), "num_hidden_layers"),
            ("hidden_size", json!(-1), "hidden_size"),
            ("hidden_act", json!("tanhshrink"), "hidden_act"),
            ("tie_word_embeddings", json!("no"), "tie_word_embeddings"),
        ];
        for (key, value, want) in table {
            let mut c = llama2_7b();
            if value.is_null() {
                c.as_object_mut().unwrap().remove(key);
            } else {
                c[key] = value;
            }
            let e = model_from_hf_config(&c).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
        }
        let mut g = gpt2();
        g.as_object_mut().unwrap().remove("n_head");
        let e = model_from_hf_config(&g).unwrap_err().to_string();
        assert!(e.contains("n_head"), "{e}");
        assert_eq!(
            model_from_hf_config(&json!([1, 2])).unwrap_err(),
            HfError::NotAnObject
        );
        // Heads that do not divide: the model's own validation, named.
        let mut c = llama2_7b();
        c["num_key_value_heads"] = json!(5);
        let e = model_from_hf_config(&c).unwrap_err().to_string();
        assert!(e.contains("kv_heads"), "{e}");
    }
}
