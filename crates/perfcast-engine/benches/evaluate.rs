//! Criterion benchmark: one evaluation of GPT-3 175B on 1,024 A100 (TP 8, PP 16, DP 8,
//! micro-batch 1, global batch 1536, full recompute), on the engine's fixed test device, on
//! the built-in GPU/HBM/NVLink/InfiniBand plugins (the default, hierarchical network), and on
//! those wired as a 2:1 fat-tree.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_core::workload::ModelSpec;
use perfcast_engine::{Training, TrainingPlan};
use perfcast_testkit::{a100_from_registry, a100_system, gpt};

/// GPT-3 175B (Narayanan et al. 2021, Table 1).
fn gpt3() -> ModelSpec {
    ModelSpec {
        name: "gpt3-175b".into(),
        ..gpt(96, 12288, 96)
    }
}

fn bench(c: &mut Criterion) {
    let registry = perfcast_builtins::registry().expect("registry");
    let plan = TrainingPlan {
        tp: 8,
        pp: 16,
        dp: 8,
        micro_batch: 1,
        global_batch: 1536,
        recompute: "full".into(),
        ..TrainingPlan::default()
    };
    let fixed = Training::new(gpt3(), a100_system(1024), &registry).expect("training");
    fixed.evaluate(&plan).expect("evaluate");
    c.bench_function(
        "evaluate gpt3-175b 1024xA100 tp8 pp16 dp8 (test device)",
        |b| b.iter(|| fixed.evaluate(black_box(&plan)).expect("evaluate")),
    );
    let system = a100_from_registry(&registry, 1024).expect("system");
    let builtin = Training::new(gpt3(), system, &registry).expect("training");
    builtin.evaluate(&plan).expect("evaluate");
    c.bench_function(
        "evaluate gpt3-175b 1024xA100 tp8 pp16 dp8 (built-in plugins)",
        |b| b.iter(|| builtin.evaluate(black_box(&plan)).expect("evaluate")),
    );
    // The same on a 2:1 fat-tree topology (plugins/topology): NCCL's algorithms and the
    // concurrency of link loads instead of the levels alone.
    let mut system = a100_from_registry(&registry, 1024).expect("system");
    system.topology = Some(
        registry
            .topology("fat-tree", &serde_json::json!({"oversubscription": [2.0]}))
            .expect("fat-tree"),
    );
    let fat_tree = Training::new(gpt3(), system, &registry).expect("training");
    fat_tree.evaluate(&plan).expect("evaluate");
    c.bench_function(
        "evaluate gpt3-175b 1024xA100 tp8 pp16 dp8 (2:1 fat-tree topology)",
        |b| b.iter(|| fat_tree.evaluate(black_box(&plan)).expect("evaluate")),
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
