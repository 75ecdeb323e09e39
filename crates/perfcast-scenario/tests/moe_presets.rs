//! The mixture-of-experts model presets of configs/models/ read through the scenario layer
//! and counted: each total (and active count) against the figure its source publishes.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::{Config, Sources};

fn model(preset: &str) -> perfcast_core::ModelSpec {
    let cfg = Config::load(
        &Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            [format!("preset:{preset}")],
        )
        .without_env(),
    )
    .unwrap_or_else(|e| panic!("{preset}: {e}"));
    perfcast_scenario::model(&cfg).unwrap_or_else(|e| panic!("{preset}: {e}"))
}

/// (preset, published total, tolerance, published active, tolerance). Tolerances: 0.5% where
/// the source gives three significant figures; wider where it rounds (DeepSeek-V3 "37B" is
/// 37.55B with both embedding tables; Llama 4 Scout's 109B includes the vision encoder;
/// GPT-OSS counts active parameters without the input embedding, 5.13B here; the released
/// Kimi K2 config counts to 1.026T and 32.86B against the report's 1.04T and 32.6B).
const TABLE: &[(&str, f64, f64, f64, f64)] = &[
    ("mixtral-8x7b", 46.7, 0.005, 12.9, 0.005),
    ("mixtral-8x22b", 141.0, 0.005, 39.0, 0.01),
    ("deepseek-v2", 236.0, 0.005, 21.0, 0.03),
    ("deepseek-v3", 671.0, 0.005, 37.0, 0.015),
    ("deepseek-r1", 671.0, 0.005, 37.0, 0.015),
    ("kimi-k2", 1040.0, 0.015, 32.6, 0.01),
    ("qwen3-30b-a3b", 30.5, 0.005, 3.3, 0.02),
    ("qwen3-235b-a22b", 235.0, 0.005, 22.0, 0.01),
    ("gpt-oss-120b", 116.8, 0.005, 5.7, 0.01),
    ("gpt-oss-20b", 20.9, 0.01, 4.2, 0.02),
    ("llama4-scout", 109.0, 0.015, 17.0, 0.015),
    ("llama4-maverick", 400.0, 0.005, 17.0, 0.015),
];

#[test]
fn moe_presets_match_their_published_sizes() {
    let mut failures = Vec::new();
    for &(name, total, tol_t, active, tol_a) in TABLE {
        let m = model(name);
        assert!(m.moe.is_some(), "{name}");
        let p = m.params() as f64 / 1e9;
        let a = m.active_params() as f64 / 1e9;
        if (p - total).abs() / total > tol_t || (a - active).abs() / active > tol_a {
            failures.push(format!(
                "{name}: {p:.2}B total (published {total}), {a:.2}B active (published {active})"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// GPT-OSS active parameters as its model card counts them (without the input embedding):
/// 5.1B.
#[test]
fn gpt_oss_card_convention() {
    let m = model("gpt-oss-120b");
    let a = (m.active_params() - m.vocab * m.hidden) as f64 / 1e9;
    assert!((a - 5.1).abs() / 5.1 < 0.01, "{a}");
    let s = m.layer_spans(0, m.layers);
    assert_eq!((s.full, s.sliding, s.window), (18, 18, 128));
}

/// Llama 4's chunked local attention: 36 of 48 layers attend within 8,192-token chunks
/// (every fourth layer global), as the preset and the Hugging Face reader both say.
#[test]
fn llama4_chunked_layers() {
    for name in ["llama4-scout", "llama4-maverick"] {
        let m = model(name);
        let s = m.layer_spans(0, m.layers);
        assert_eq!((s.full, s.chunked, s.chunk), (12, 36, 8192), "{name}");
        assert_eq!(m.span_of(3), perfcast_core::workload::AttentionSpan::Full);
    }
}
