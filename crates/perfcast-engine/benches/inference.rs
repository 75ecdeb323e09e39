//! Speed of one inference evaluation: Llama-2 70B on 8 H100 (TP 8), 2,048 prompt tokens,
//! 128 output tokens, batch 1 and batch 64 (target: < 100 µs each, issue 4); DeepSeek-V3
//! (MoE, MLA) on 8 H100 with attention data parallelism and EP 8, batch 256 (target: <= 100 µs,
//! issue 21); Qwen3-235B-A22B the same way with GEMMs and routed experts from the H100's kernel
//! tables.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};
use perfcast_testkit::{deepseek_v3, llama2};

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
    let moe = Inference::new(
        deepseek_v3(),
        builtin_system(&registry, Gpu::H100, 8),
        InferenceOptions::default(),
    )
    .expect("model");
    let dep = InferencePlan {
        tp: 8,
        ep: 8,
        attention_dp: true,
        weight_dtype: perfcast_core::DType::Fp8,
        activation_dtype: perfcast_core::DType::Fp8,
        ..InferencePlan::new(256, 1024, 128)
    };
    c.bench_function("inference deepseek-v3 h100 dep8 1024/128 batch 256", |b| {
        b.iter(|| moe.evaluate(black_box(&dep)).expect("evaluate"))
    });
    let catalog = perfcast_kernel_data::shared().expect("kernel tables");
    let mut tabled = builtin_system(&registry, Gpu::H100, 8);
    let gemm = catalog
        .get("h100_sxm", perfcast_kernels::Op::Gemm)
        .expect("gemm table");
    tabled.compute = std::sync::Arc::new(
        perfcast_kernels::MeasuredCompute::new(tabled.compute.clone(), gemm)
            .with_tables(catalog, "h100_sxm"),
    );
    let qwen = Inference::new(qwen3_235b(), tabled, InferenceOptions::default()).expect("model");
    c.bench_function(
        "inference qwen3-235b h100 dep8 1024/128 batch 256, kernel tables",
        |b| b.iter(|| qwen.evaluate(black_box(&dep)).expect("evaluate")),
    );
}

/// Qwen3-235B-A22B (config.json): 94 layers, hidden 4096, 64 query and 4 KV heads of 128,
/// 128 experts of 1536, 8 per token.
fn qwen3_235b() -> perfcast_core::ModelSpec {
    use perfcast_core::workload::{FfnAct, ModelSpec, MoeSpec};
    let mut m = ModelSpec::dense(94, 4096, 64, 12288, FfnAct::Swiglu, 151936, 40960);
    m.kv_heads = Some(4);
    m.head_dim = Some(128);
    m.moe = Some(MoeSpec::new(128, 8, 1536));
    m
}

criterion_group!(benches, bench);
criterion_main!(benches);
