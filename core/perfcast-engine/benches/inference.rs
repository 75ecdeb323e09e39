//! Speed of one inference evaluation: Llama-2 70B on 8 H100 (TP 8), 2,048 prompt tokens,
//! 128 output tokens, batch 1 and batch 64 (target: < 100 µs each, issue 4).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};

#[path = "../tests/inference_support/systems.rs"]
mod builtin_systems;
use builtin_systems::{builtin_system, Gpu};

/// Llama-2 70B (Touvron et al. 2023; released config.json).
fn llama2_70b() -> ModelSpec {
    ModelSpec {
        name: "llama2-70b".into(),
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: Some(8),
        head_dim: None,
        ffn_hidden: 28672,
        ffn_act: FfnAct::Swiglu,
        vocab: 32000,
        seq_len: 4096,
        tied_embeddings: false,
        norm: None,
        position: None,
        bias: None,
        moe: None,
    }
}

fn bench(c: &mut Criterion) {
    let registry = perfcast_builtins::registry().expect("registry");
    let system = builtin_system(&registry, Gpu::H100, 8);
    let inf = Inference::new(llama2_70b(), system, InferenceOptions::default()).expect("model");
    let mut plan = InferencePlan::new(1, 2048, 128);
    plan.tp = 8;
    c.bench_function("inference llama2-70b h100 tp8 2048/128 batch 1", |b| {
        b.iter(|| inf.evaluate(black_box(&plan)).expect("evaluate"))
    });
    let mut big = plan.clone();
    big.batch = 64;
    c.bench_function("inference llama2-70b h100 tp8 2048/128 batch 64", |b| {
        b.iter(|| inf.evaluate(black_box(&big)).expect("evaluate"))
    });
    c.bench_function("inference max_batch llama2-70b h100 tp8 2048/128", |b| {
        b.iter(|| inf.max_batch(black_box(&plan)).expect("max_batch"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
