use super::*;

fn gpt(layers: u64, hidden: u64, heads: u64) -> ModelSpec {
    ModelSpec {
        tied_embeddings: true,
        ..ModelSpec::dense(layers, hidden, heads, 4 * hidden, FfnAct::Gelu, 51200, 2048)
    }
}

/// A Llama-style (SwiGLU, RMSNorm, rotary, untied, no biases) model.
fn llama(layers: u64, hidden: u64, heads: u64, kv: u64, ffn: u64, vocab: u64) -> ModelSpec {
    ModelSpec {
        kv_heads: Some(kv),
        ffn_hidden: ffn,
        ffn_act: FfnAct::Swiglu,
        vocab,
        seq_len: 4096,
        tied_embeddings: false,
        ..gpt(layers, hidden, heads)
    }
}

/// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): 61 layers, the first 3 dense.
fn deepseek_v3() -> ModelSpec {
    ModelSpec {
        attention: Some(AttentionLayout::Mla),
        mla: Some(MlaSpec {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        }),
        moe: Some(MoeSpec {
            shared_experts: 1,
            dense_layers: 3,
            expert_groups: Some(8),
            group_top_k: Some(4),
            ..MoeSpec::new(256, 8, 2048)
        }),
        mtp_layers: 1,
        max_context: None,
        ..llama(61, 7168, 128, 128, 18432, 129280)
    }
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() / want <= tol
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
        assert_eq!(m.active_params(), m.params());
    }
}

/// Llama 2 7B: 6.74e9 parameters (Touvron et al. 2023), untied, SwiGLU, RMSNorm.
#[test]
fn llama2_7b_count() {
    let m = llama(32, 4096, 32, 32, 11008, 32000);
    let p = m.params() as f64;
    assert!((p - 6.738e9).abs() / 6.738e9 < 1e-3, "{p}");
}

/// Published totals and active counts of mixture-of-experts models, within 0.5%:
/// Mixtral 8x7B 46.7B / 12.9B (Jiang et al. 2024, arXiv:2401.04088 §2), Mixtral 8x22B 141B /
/// 39B (Mistral AI, 2024-04-17 announcement), Qwen3-235B-A22B 235B (Qwen3 technical report,
/// arXiv:2505.09388 Table 2), DeepSeek-V3 671B (DeepSeek 2024, arXiv:2412.19437 §1). Where a
/// source rounds to two significant figures the active count is checked against its
/// rounding interval instead (DeepSeek-V3 "37B": 37.55B counted with both embedding tables;
/// Qwen3-235B-A22B "22B": 22.19B).
#[test]
fn moe_parameter_counts() {
    let mixtral = ModelSpec {
        moe: Some(MoeSpec::new(8, 2, 14336)),
        seq_len: 32768,
        ..llama(32, 4096, 32, 8, 14336, 32000)
    };
    let p = mixtral.params() as f64;
    let a = mixtral.active_params() as f64;
    assert!(within(p, 46.7e9, 0.005), "{p}");
    assert!(within(a, 12.9e9, 0.005), "{a}");
    let mixtral_22 = ModelSpec {
        moe: Some(MoeSpec::new(8, 2, 16384)),
        ..llama(56, 6144, 48, 8, 16384, 32000)
    };
    let (p, a) = (
        mixtral_22.params() as f64,
        mixtral_22.active_params() as f64,
    );
    assert!(within(p, 141e9, 0.005) && within(a, 39e9, 0.01), "{p} {a}");
    let qwen = ModelSpec {
        head_dim: Some(128),
        moe: Some(MoeSpec::new(128, 8, 1536)),
        ..llama(94, 4096, 64, 4, 12288, 151936)
    };
    let (p, a) = (qwen.params() as f64, qwen.active_params() as f64);
    assert!(within(p, 235e9, 0.005), "{p}");
    assert!((21.5e9..22.5e9).contains(&a), "{a}");
    let ds = deepseek_v3();
    ds.validate().unwrap();
    let (p, a) = (ds.params() as f64, ds.active_params() as f64);
    assert!(within(p, 671e9, 0.005), "{p}");
    assert!((36.5e9..37.6e9).contains(&a), "{a}");
    // The HF checkpoint's 685B holds the MTP module (with its own copies of the embedding
    // and the head, README_WEIGHTS): 671B + MTP layer + projection + 2 tables.
    let with_copies = ds.params() + ds.mtp_params() + 2 * ds.vocab * ds.hidden;
    assert!(within(with_copies as f64, 685e9, 0.005), "{with_copies}");
    assert_eq!(ds.moe_layers(), 58);
    assert_eq!(ds.dense_layers(), 3);
}

/// Matmul weights per token (the schema's `P_mm`) of DeepSeek-V3: 61 MLA layers of
/// 187.1M, 3 dense MLPs of 396.4M, 58 MoE layers of 9 experts (44.04M each) and the router
/// (1.835M), the logit layer; by hand from the config.
#[test]
fn moe_matmul_params_per_token() {
    let ds = deepseek_v3();
    let mla = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168;
    assert_eq!(ds.attention_weights(), mla);
    let expert = 3 * 7168 * 2048;
    let want = 61 * mla + 3 * 3 * 7168 * 18432 + 58 * (9 * expert + 7168 * 256) + 129280 * 7168;
    assert_eq!(ds.matmul_params_per_token(), want);
    // Dense models: the old formula.
    let g = gpt(96, 12288, 96);
    assert_eq!(
        g.matmul_params_per_token(),
        96 * (4 * 12288 * 12288 + 8 * 12288 * 12288) + 51200 * 12288
    );
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

/// Bad sparse and attention fields: (mutation, key named).
#[test]
fn moe_and_mla_validation_names_the_key() {
    type Case = (fn(&mut ModelSpec), &'static str);
    let table: [Case; 14] = [
        (|m| m.moe.as_mut().unwrap().top_k = 300, "model.moe.top_k"),
        (|m| m.moe.as_mut().unwrap().experts = 0, "model.moe.experts"),
        (
            |m| m.moe.as_mut().unwrap().dense_layers = 61,
            "model.moe.dense_layers",
        ),
        (
            |m| m.moe.as_mut().unwrap().moe_layer_freq = 100,
            "model.moe.moe_layer_freq",
        ),
        (
            |m| m.moe.as_mut().unwrap().load_imbalance = Some(0.5),
            "model.moe.load_imbalance",
        ),
        (
            |m| m.moe.as_mut().unwrap().capacity_factor = Some(f64::NAN),
            "model.moe.capacity_factor",
        ),
        (
            |m| m.moe.as_mut().unwrap().expert_groups = Some(7),
            "model.moe.expert_groups",
        ),
        (
            |m| m.moe.as_mut().unwrap().group_top_k = Some(9),
            "model.moe.group_top_k",
        ),
        (|m| m.attention = None, "model.mla"),
        (|m| m.attention = Some(AttentionLayout::Gqa), "model.mla"),
        (|m| m.mla = None, "model.attention"),
        (|m| m.kv_heads = Some(8), "model.kv_heads"),
        (|m| m.sliding_window = Some(0), "model.sliding_window"),
        (
            |m| m.sliding_window_layers = Some(3),
            "model.sliding_window_layers",
        ),
    ];
    deepseek_v3().validate().unwrap();
    for (i, (mutate, key)) in table.into_iter().enumerate() {
        let mut m = deepseek_v3();
        mutate(&mut m);
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains(key), "case {i}: {e}");
    }
    let mut m = gpt(2, 64, 4);
    m.attention = Some(AttentionLayout::Mqa);
    assert!(m.validate().unwrap_err().to_string().contains("kv_heads"));
    m.kv_heads = Some(1);
    m.validate().unwrap();
    m.sliding_window = Some(128);
    m.sliding_window_layers = Some(3);
    assert!(m
        .validate()
        .unwrap_err()
        .to_string()
        .contains("sliding_window_layers"));
    m.sliding_window_layers = Some(1);
    let s = m.layer_spans(0, 2);
    assert_eq!((s.sliding, s.window, s.full), (1, 128, 1));
}

/// Layer kinds per layer: a pattern repeats from the first layer; the older count spreads
/// its sliding layers evenly; a stage counts its own layers.
#[test]
fn layer_spans_table() {
    use AttentionSpan::{Chunked as C, Full as F, Sliding as S};
    let model = |pattern: Option<Vec<AttentionSpan>>, count: Option<u64>| ModelSpec {
        sliding_window: pattern
            .as_ref()
            .is_none_or(|p| p.contains(&S))
            .then_some(128),
        sliding_window_layers: count,
        attention_chunk: pattern
            .as_ref()
            .is_some_and(|p| p.contains(&C))
            .then_some(1024),
        layer_pattern: pattern,
        max_context: Some(1 << 17),
        ..gpt(12, 256, 4)
    };
    // (pattern, count, first, layers) -> (full, sliding, chunked)
    type Row = (Option<Vec<AttentionSpan>>, Option<u64>, u64, u64, [u64; 3]);
    let table: [Row; 8] = [
        (Some(vec![S, F]), None, 0, 12, [6, 6, 0]),
        (Some(vec![S, F]), None, 1, 3, [2, 1, 0]),
        (Some(vec![C, C, C, F]), None, 0, 12, [3, 0, 9]),
        (Some(vec![C, C, C, F]), None, 3, 2, [1, 0, 1]),
        (Some(vec![S, S, S, S, S, F]), None, 0, 12, [2, 10, 0]),
        (None, None, 0, 12, [0, 12, 0]),
        (None, Some(6), 0, 12, [6, 6, 0]),
        (None, Some(4), 0, 6, [4, 2, 0]),
    ];
    for (i, (pattern, count, first, n, want)) in table.into_iter().enumerate() {
        let m = model(pattern, count);
        m.validate().unwrap();
        let s = m.layer_spans(first, n);
        assert_eq!([s.full, s.sliding, s.chunked], want, "case {i}");
        assert_eq!(s.layers(), n, "case {i}");
    }
    // The evenly spread count: every other layer slides for 6 of 12, the odd ones.
    let m = model(None, Some(6));
    let kinds: Vec<_> = (0..4).map(|i| m.span_of(i)).collect();
    assert_eq!(kinds, [F, S, F, S]);
    // A model without windows: every layer full, whatever the run.
    assert_eq!(gpt(12, 256, 4).layer_spans(2, 5), LayerSpans::full(5));
}

/// KV positions a sequence keeps and positions a query attends, per kind (GPT-OSS-120B's
/// 18 + 18 layers with a 128-token window; Llama 4's 36 chunked + 12 full with 8,192-token
/// chunks).
#[test]
fn kv_positions_and_attended_table() {
    let oss = LayerSpans {
        full: 18,
        sliding: 18,
        window: 128,
        ..LayerSpans::default()
    };
    let llama4 = LayerSpans {
        full: 12,
        chunked: 36,
        chunk: 8192,
        ..LayerSpans::default()
    };
    for (s, len, want) in [
        (oss, 100, 36 * 100),
        (oss, 128, 36 * 128),
        (oss, 10_000, 18 * 10_000 + 18 * 128),
        (llama4, 8192, 48 * 8192),
        (llama4, 100_000, 12 * 100_000 + 36 * 8192),
        (LayerSpans::full(4), 7, 28),
    ] {
        assert_eq!(s.kv_positions(len), want, "{s:?} {len}");
    }
    use AttentionSpan::*;
    for (s, span, pos, want) in [
        (oss, Full, 999, 1000),
        (oss, Sliding, 99, 100),
        (oss, Sliding, 999, 128),
        (llama4, Chunked, 8191, 8192),
        (llama4, Chunked, 8192, 1),
        (llama4, Chunked, 20_000, 20_000 - 16_384 + 1),
    ] {
        assert_eq!(s.attended(span, pos), want, "{span:?} {pos}");
    }
}

/// A pattern, window or chunk that disagree with each other or the context: errors naming
/// the key.
#[test]
fn bad_spans_name_the_key() {
    use AttentionSpan::{Chunked as C, Full as F, Sliding as S};
    let base = || ModelSpec {
        max_context: Some(4096),
        ..gpt(4, 256, 4)
    };
    let table: [(ModelSpec, &str, &str); 8] = [
        (
            ModelSpec {
                sliding_window: Some(8192),
                ..base()
            },
            "model.sliding_window",
            "longer than the model's context",
        ),
        (
            ModelSpec {
                layer_pattern: Some(vec![]),
                ..base()
            },
            "model.layer_pattern",
            "at least one",
        ),
        (
            ModelSpec {
                layer_pattern: Some(vec![S, F]),
                ..base()
            },
            "model.layer_pattern",
            "model.sliding_window is not set",
        ),
        (
            ModelSpec {
                layer_pattern: Some(vec![C, F]),
                ..base()
            },
            "model.layer_pattern",
            "model.attention_chunk is not set",
        ),
        (
            ModelSpec {
                attention_chunk: Some(1024),
                ..base()
            },
            "model.attention_chunk",
            "needs model.layer_pattern",
        ),
        (
            ModelSpec {
                sliding_window: Some(128),
                layer_pattern: Some(vec![F]),
                ..base()
            },
            "model.sliding_window",
            "no sliding layer",
        ),
        (
            ModelSpec {
                sliding_window: Some(128),
                sliding_window_layers: Some(2),
                layer_pattern: Some(vec![S, F]),
                ..base()
            },
            "model.sliding_window_layers",
            "give one of them",
        ),
        (
            ModelSpec {
                sliding_window: Some(128),
                layer_pattern: Some(vec![S, F, S, F, S]),
                ..base()
            },
            "model.layer_pattern",
            "more than model.layers",
        ),
    ];
    for (i, (m, key, what)) in table.into_iter().enumerate() {
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(what), "case {i}: {e}");
    }
}

/// `max_context` (the longest context) may not be shorter than the training length.
#[test]
fn max_context_is_at_least_seq_len() {
    let m = |c: Option<u64>| ModelSpec {
        max_context: c,
        ..gpt(2, 256, 4)
    };
    assert_eq!(m(None).context_limit(), m(None).seq_len);
    assert!(m(Some(1 << 20)).validate().is_ok());
    let e = m(Some(16)).validate().unwrap_err().to_string();
    assert!(
        e.contains("model.max_context") && e.contains("model.seq_len"),
        "{e}"
    );
}
