//! Speed of one inference evaluation: Llama-2 70B on 8 H100 (TP 8), 2,048 prompt tokens,
//! 128 output tokens, batch 1 and batch 64 (target: < 100 µs each, issue 4).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};
use perfcast_testkit::llama2;

#[path = "../tests/inference_support/systems.rs"]
mod builtin_systems;
use builtin_systems::{builtin_system, Gpu};

fn bench(c: &mut Criterion) {
    let registry = perfcast_builtins::registry().expect("registry");
    let system = builtin_system(&registry, Gpu::H100, 8);
    let inf = Inference::new(llama2(70), system, InferenceOptions::default()).expect("model");
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
