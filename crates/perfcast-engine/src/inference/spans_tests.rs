//! Sliding-window and chunked layers in inference: KV bytes per layer kind (GPT-OSS-120B,
//! Llama 4), the per-kind decode sums against step-by-step sums, windows and chunks costing
//! less than full attention where they bind and nothing where they do not, and the serving
//! memory's blocks.

use super::time::{Acc, Pass};
use super::*;
use perfcast_core::workload::{AttentionSpan, FfnAct, LayerSpans};
use perfcast_core::DType;
use perfcast_testkit::flat::h100;

/// GPT-OSS-120B's attention (36 layers, 64 query heads and 8 KV heads of 64, a 128-token
/// window on every other layer, the first sliding), its MLP dense for the test.
fn gpt_oss_like(pattern: bool) -> ModelSpec {
    ModelSpec {
        kv_heads: Some(8),
        head_dim: Some(64),
        max_context: Some(131_072),
        sliding_window: pattern.then_some(128),
        layer_pattern: pattern.then(|| vec![AttentionSpan::Sliding, AttentionSpan::Full]),
        ..ModelSpec::dense(36, 2880, 64, 2880, FfnAct::Swiglu, 201_088, 4096)
    }
}

/// Llama 4's attention (48 layers, 40 heads and 8 KV heads of 128, 8,192-token chunks on
/// three of every four layers), its MLP dense for the test.
fn llama4_like(pattern: bool) -> ModelSpec {
    ModelSpec {
        kv_heads: Some(8),
        head_dim: Some(128),
        max_context: Some(1 << 20),
        attention_chunk: pattern.then_some(8192),
        layer_pattern: pattern.then(|| {
            use AttentionSpan::{Chunked, Full};
            vec![Chunked, Chunked, Chunked, Full]
        }),
        ..ModelSpec::dense(48, 5120, 40, 16384, FfnAct::Swiglu, 202_048, 8192)
    }
}

fn plan(tp: u32, batch: u32, input: u32, output: u32) -> InferencePlan {
    InferencePlan {
        tp,
        kv_dtype: DType::Bf16,
        ..InferencePlan::new(batch, input, output)
    }
}

fn engine(m: ModelSpec) -> Inference {
    Inference::new(m, h100(8), InferenceOptions::default()).unwrap()
}

/// KV bytes of one sequence, per layer kind: GPT-OSS-120B at TP 1 in bf16 keeps
/// `2 x 8 x 64 x 2` bytes per position and layer, all positions in its 18 full layers and at
/// most 128 in its 18 sliding ones; Llama 4 at TP 8 one KV head of 128 per rank, all
/// positions in its 12 full layers and at most 8,192 in its 36 chunked ones; a PP stage
/// counts its own layers.
#[test]
fn kv_bytes_per_layer_kind() {
    let per = (2 * 8 * 64 * 2) as f64;
    let oss = engine(gpt_oss_like(true));
    let sh = oss.shard(&plan(1, 1, 128, 2)).unwrap();
    assert_eq!(sh.kv_bytes_per_token(), 36.0 * per);
    for (len, positions) in [
        (100u64, 36 * 100),
        (128, 36 * 128),
        (65_536, 18 * 65_536 + 18 * 128),
    ] {
        assert_eq!(sh.kv_bytes(len), positions as f64 * per, "{len}");
    }
    let per = (2 * 128 * 2) as f64;
    let l4 = engine(llama4_like(true));
    let sh = l4.shard(&plan(8, 1, 128, 2)).unwrap();
    assert_eq!(
        sh.kv_bytes(100_000),
        (12 * 100_000 + 36 * 8192) as f64 * per
    );
    let p = InferencePlan {
        pp: 4,
        ..plan(2, 1, 128, 2)
    };
    let sh = l4.shard(&p).unwrap();
    assert_eq!(
        (sh.stage_spans.full, sh.stage_spans.chunked),
        (3, 9),
        "the first of four stages holds layers 0-11"
    );
    // TP 2: four KV heads per rank.
    assert_eq!(
        sh.kv_bytes(100_000),
        (3 * 100_000 + 9 * 8192) as f64 * 4.0 * per
    );
    // The static report's KV cache: the same sums for the batch.
    let r = l4.evaluate(&plan(8, 4, 60_000, 40_000)).unwrap();
    let full = engine(llama4_like(false))
        .evaluate(&plan(8, 4, 60_000, 40_000))
        .unwrap();
    let want = 4.0 * (12 * 100_000 + 36 * 8192) as f64 * per;
    assert!(
        (r.memory.kv_cache.0 - want).abs() < 1.0,
        "{}",
        r.memory.kv_cache.0
    );
    assert_eq!(full.memory.kv_cache.0, 4.0 * 48.0 * 100_000.0 * per);
    assert_eq!(r.memory.kv_per_token, full.memory.kv_per_token);
}

/// The per-kind decode sum equals the step-by-step sum of each step's layers (sliding: the
/// context stops at the window; chunked: it restarts at every chunk), with runs that start
/// below and above the window and cross several chunks.
#[test]
fn decode_sums_match_step_by_step() {
    let options = InferenceOptions {
        decode_segments: 64,
        ..InferenceOptions::default()
    };
    let mut chunked = llama4_like(true);
    chunked.attention_chunk = Some(64);
    for (m, input, n) in [
        (gpt_oss_like(true), 20u64, 300u64),
        (gpt_oss_like(true), 500, 40),
        (chunked, 30, 200),
    ] {
        let inf = Inference::new(m, h100(8), options.clone()).unwrap();
        let sh = inf.shard(&plan(8, 8, input as u32, n as u32 + 1)).unwrap();
        let pass = Pass {
            tokens: 8,
            logits: 8,
            eager: true,
        };
        let sum = inf.layers_decode_sum(&sh, pass, 8, input, n).unwrap();
        let mut exact = Acc::default();
        for j in 1..=n {
            let a = inf
                .layers_attention(&sh, pass, 8, 1, input + j - 1)
                .unwrap();
            exact.add_scaled(&a, 1.0);
        }
        let rel = (sum.total() - exact.total()).abs() / exact.total();
        assert!(
            rel < 2e-3,
            "{input} {n}: {} vs {}",
            sum.total(),
            exact.total()
        );
        assert!((sum.bytes - exact.bytes).abs() / exact.bytes < 1e-9);
    }
}

/// A window or chunk longer than everything a request holds changes nothing; where it
/// binds, prefill and decode attention cost less than full attention, and a long decode's
/// attention stops growing with the context on the windowed layers.
#[test]
fn spans_cost_less_only_where_they_bind() {
    let short = plan(8, 16, 100, 20);
    for (with, without) in [
        (gpt_oss_like(true), gpt_oss_like(false)),
        (llama4_like(true), llama4_like(false)),
    ] {
        let (a, b) = (engine(with), engine(without));
        let (ra, rb) = (a.evaluate(&short).unwrap(), b.evaluate(&short).unwrap());
        let rel = |x: f64, y: f64| (x - y).abs() / y;
        if a.model().sliding_window.is_none() {
            // Chunks of 8,192 bind nothing at 120 tokens.
            assert!(
                rel(ra.latency.0, rb.latency.0) < 1e-12,
                "{}",
                a.model().name
            );
        } else {
            // A 128-token window binds on the last decode steps only.
            assert!(ra.latency.0 <= rb.latency.0 && rel(ra.latency.0, rb.latency.0) < 0.01);
        }
        let long = plan(8, 16, 32_768, 512);
        let (ra, rb) = (a.evaluate(&long).unwrap(), b.evaluate(&long).unwrap());
        assert!(ra.prefill.attention.0 < 0.7 * rb.prefill.attention.0);
        assert!(ra.decode.attention.0 < 0.7 * rb.decode.attention.0);
        assert!(ra.memory.kv_cache.0 < 0.7 * rb.memory.kv_cache.0);
        for r in [&ra, &rb] {
            assert!(r.latency.0.is_finite() && r.tokens_per_s > 0.0);
        }
    }
}

/// The serving step model agrees with the static one on a window: one decode step over a
/// long context costs the same as a decode over the window on the windowed layers, and the
/// serving memory counts a sequence's blocks by the positions its layers keep.
#[test]
fn serving_steps_and_blocks() {
    let inf = engine(gpt_oss_like(true));
    let p = plan(8, 1, 128, 2);
    let mem = inf.serving_memory(&p, 8192, 64).unwrap();
    assert_eq!(
        mem.kv_spans,
        LayerSpans {
            full: 18,
            sliding: 18,
            window: 128,
            ..LayerSpans::default()
        }
    );
    // 18·L + 18·min(L, 128) positions in blocks of 36 layers x 32 tokens.
    for (tokens, blocks) in [(32u32, 1u32), (128, 4), (129, 5), (1000, 18), (10_000, 159)] {
        assert_eq!(mem.kv_blocks(tokens, 32), blocks, "{tokens}");
    }
    let kv = mem.kv_per_token.0 * (18 * 10_000 + 18 * 128) as f64 / 36.0;
    assert!((mem.kv_bytes(10_000) - kv).abs() < 1e-6);
    let full = engine(gpt_oss_like(false))
        .serving_memory(&p, 8192, 64)
        .unwrap();
    assert_eq!(full.kv_blocks(10_000, 32), 313);
    assert_eq!(full.kv_bytes(10_000), full.kv_per_token.0 * 10_000.0);
    // 64 decodes at 20,000 positions, replayed as a graph: full layers over 20,000,
    // windowed over 128.
    let mut costs = inf.step_costs(&p).unwrap();
    let batch = StepBatch {
        decodes: 64,
        decode_context: 64 * 20_000,
        graph_batch: Some(64),
        ..StepBatch::default()
    };
    let step = costs.time(&batch).unwrap();
    let full_inf = engine(gpt_oss_like(false));
    let mut full_costs = full_inf.step_costs(&p).unwrap();
    let full_step = full_costs.time(&batch).unwrap();
    assert!(step < full_step, "{step} vs {full_step}");
}
