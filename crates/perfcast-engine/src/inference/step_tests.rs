//! Tests of the step model: its split of a pass into per-token and per-logit parts, its
//! agreement with `evaluate` on uniform batches, its memoised fast path against the direct
//! one, and chunked attention.

use super::*;

use perfcast_testkit::flat::{a100, h100};
use perfcast_testkit::llama2;

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs().max(1e-30)
}

fn registry_a100(devices: u32) -> System {
    let reg = perfcast_builtins::registry().expect("registry");
    perfcast_testkit::systems::a100_from_registry(&reg, devices).expect("system")
}

fn engines() -> Vec<(Inference, InferencePlan)> {
    let mut out = Vec::new();
    for (sys, size, tp) in [
        (h100(8), 70, 8),
        (registry_a100(4), 13, 4),
        (registry_a100(2), 7, 1),
    ] {
        let inf = Inference::new(llama2(size), sys, InferenceOptions::default()).unwrap();
        let mut plan = InferencePlan::new(1, 2048, 2048);
        plan.tp = tp;
        out.push((inf, plan));
    }
    out
}

#[test]
fn token_and_logit_parts_add_up_to_the_pass() {
    for (inf, plan) in engines() {
        let sh = inf.shard(&plan).unwrap();
        for (m, l) in [(1, 1), (7, 7), (64, 3), (300, 1), (2048, 16), (5000, 200)] {
            for eager in [true, false] {
                let pass = Pass {
                    tokens: m,
                    logits: l,
                    eager,
                };
                let want = inf
                    .pass_without_attention(&sh, &plan, pass)
                    .unwrap()
                    .total();
                let got = inf.tokens_part(&sh, &plan, m, eager).unwrap()
                    + inf.logits_part(&sh, l, eager).unwrap();
                assert!(close(got, want, 1e-12), "m {m} l {l}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn uniform_steps_equal_evaluate() {
    for (inf, plan) in engines() {
        for (b, s) in [(1u32, 128u32), (8, 512), (32, 2048)] {
            // A step of b whole prompts is evaluate's prefill pass.
            let p = InferencePlan {
                batch: b,
                input_len: s,
                output_len: 2,
                ..plan.clone()
            };
            let rep = inf.evaluate(&p).unwrap();
            let chunks = vec![
                PrefillChunk {
                    tokens: s,
                    prior: 0,
                    last: true
                };
                b as usize
            ];
            let prefill = StepBatch {
                chunks: &chunks,
                ..StepBatch::default()
            };
            let t = inf.step_time(&p, &prefill).unwrap();
            assert!(close(t, rep.ttft.0, 1e-12), "{t} vs {}", rep.ttft.0);
            // A step of b decodes at context s + 1 is its one decode step, eager or captured.
            for graph in [false, true] {
                let pg = InferencePlan {
                    graph_capture: graph,
                    ..p.clone()
                };
                let rep = inf.evaluate(&pg).unwrap();
                let decode = StepBatch {
                    decodes: b,
                    decode_context: b as u64 * (s as u64 + 1),
                    decode_tokens: 1,
                    graph_batch: graph.then_some(b),
                    ..StepBatch::default()
                };
                let t = inf.step_time(&pg, &decode).unwrap();
                assert!(
                    close(t, rep.decode.total.0, 1e-12),
                    "{t} vs {:?}",
                    rep.decode
                );
            }
        }
    }
}

#[test]
fn memoised_costs_equal_the_direct_model() {
    for (inf, plan) in engines() {
        let mut costs = inf.step_costs(&plan).unwrap();
        let chunks = [
            PrefillChunk {
                tokens: 512,
                prior: 0,
                last: false,
            },
            PrefillChunk {
                tokens: 300,
                prior: 1024,
                last: true,
            },
            PrefillChunk {
                tokens: 300,
                prior: 1024,
                last: true,
            },
        ];
        let batches = [
            StepBatch {
                chunks: &chunks,
                decodes: 40,
                decode_context: 40 * 900 + 17,
                decode_tokens: 1,
                graph_batch: None,
            },
            StepBatch {
                chunks: &chunks[1..],
                ..StepBatch::default()
            },
            StepBatch {
                decodes: 5,
                decode_context: 5 * 3000,
                decode_tokens: 4,
                graph_batch: Some(8),
                ..StepBatch::default()
            },
            StepBatch {
                decodes: 3,
                decode_context: 3 * 200,
                decode_tokens: 1,
                graph_batch: Some(4),
                ..StepBatch::default()
            },
        ];
        for _ in 0..2 {
            for b in &batches {
                let fast = costs.time(b).unwrap();
                let direct = inf.step_time(&plan, b).unwrap();
                assert_eq!(fast.to_bits(), direct.to_bits(), "{b:?}");
            }
        }
        // Graph padding computes the padded rows: never faster than the real batch captured.
        let padded = costs.time(&batches[3]).unwrap();
        let exact = costs
            .time(&StepBatch {
                graph_batch: Some(3),
                ..batches[3]
            })
            .unwrap();
        assert!(padded >= exact, "{padded} < {exact}");
        assert_eq!(costs.time(&StepBatch::default()).unwrap(), 0.0);
    }
}

#[test]
fn chunk_attention_counts_the_prior_context() {
    let inf = Inference::new(llama2(7), a100(1), InferenceOptions::default()).unwrap();
    let plan = InferencePlan::new(1, 4000, 2);
    let sh = inf.shard(&plan).unwrap();
    let pass = Pass {
        tokens: 512,
        logits: 1,
        eager: true,
    };
    // A chunk's op has the causal chunk's FLOPs: q·prior + q²/2 score entries per head
    // (4·heads·head_dim FLOPs each), and reads the whole prior + q positions of K and V.
    let (q, prior) = (512u64, 1536u64);
    let t = inf.chunk_attention(&sh, pass, 1, q, prior).unwrap();
    let want_flops =
        4.0 * sh.q_heads as f64 * sh.head_dim as f64 * q as f64 * (prior as f64 + q as f64 / 2.0);
    assert!(
        close(t.flops, want_flops, 1e-12),
        "{} vs {want_flops}",
        t.flops
    );
    let truth = sh.attention_op(1, q, prior + q);
    assert!(close(t.bytes, sh.attention_bytes(&truth, 1.0), 1e-12));
    // More prior context costs more; no prior context is the prefill's own op.
    let less = inf.chunk_attention(&sh, pass, 1, q, 512).unwrap();
    assert!(t.busy > less.busy);
    let whole = inf.chunk_attention(&sh, pass, 1, q, 0).unwrap();
    let own = inf.attention_timed(&sh, pass, 1, q, q).unwrap().1;
    assert_eq!(whole.busy.to_bits(), own.busy.to_bits());
    // The token counts a step reports.
    let chunks = [PrefillChunk {
        tokens: 10,
        prior: 0,
        last: false,
    }];
    let b = StepBatch {
        chunks: &chunks,
        decodes: 3,
        decode_context: 30,
        decode_tokens: 2,
        graph_batch: None,
    };
    assert_eq!((b.tokens(), b.logits()), (16, 6));
}

#[test]
fn serving_memory_adds_up() {
    let inf = Inference::new(llama2(70), h100(8), InferenceOptions::default()).unwrap();
    let mut plan = InferencePlan::new(1, 4000, 1);
    plan.tp = 8;
    let m = inf.serving_memory(&plan, 8192, 256).unwrap();
    let sh = inf.shard(&plan).unwrap();
    assert_eq!(m.weights.0, inf.weight_bytes(&sh));
    assert_eq!(m.kv_per_token.0, sh.kv_bytes_per_token());
    assert_eq!(m.capacity.0, 80e9);
    assert!(close(
        m.free(),
        80e9 - m.weights.0 - m.workspace.0 - m.reserve.0,
        1e-12
    ));
    // More tokens per step or more sequences need more workspace.
    assert!(inf.serving_memory(&plan, 16384, 256).unwrap().workspace.0 > m.workspace.0);
    assert!(inf.serving_memory(&plan, 8192, 512).unwrap().workspace.0 > m.workspace.0);
}
