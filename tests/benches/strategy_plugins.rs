//! Criterion benchmark: the evaluation of `crates/perfcast-engine/benches/evaluate.rs` (GPT-3
//! 175B on 1,024 A100, TP 8, PP 16, DP 8, full recompute, built-in plugins) with its seven
//! parallel strategies compiled in, and with all seven loaded from a library
//! (`execution-builtins-lib`, Rust ABI 1.2), and with only `tensor` loaded: what crossing the
//! boundary costs per evaluation; the example `hsdp` on its declared axis compiled in and from
//! its library (Rust ABI 1.4). Then `tensor` in an isolated plugin host (a child `perfcast
//! plugin-host`, the debug build): a repeated evaluation (its answers cached by the host) and
//! a new plan each time (every call a round trip to the child).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_engine::{Training, TrainingOptions, TrainingPlan};
use perfcast_loader::isolate::IsolateOptions;
use perfcast_loader::{load_library, load_library_isolated};
use perfcast_testkit::plugins::build_rust;
use perfcast_testkit::{a100_from_registry, gpt};

const BUILTINS: [&str; 7] = [
    "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
];

fn bench(c: &mut Criterion) {
    let dir = perfcast_testkit::tmpdir("perfcast-bench-strategy-plugins");
    let libs = build_rust(&["execution-builtins-lib", "hsdp"], &dir);
    let lib = &libs[0];
    let mut registry = perfcast_builtins::registry().unwrap();
    load_library(lib, None, &mut registry).unwrap();
    hsdp::register(&mut registry).unwrap();
    // The same name from its library, in a registry of its own.
    let mut loaded = perfcast_builtins::registry().unwrap();
    load_library(&libs[1], None, &mut loaded).unwrap();
    let plan = TrainingPlan {
        tp: 8,
        pp: 16,
        dp: 8,
        micro_batch: 1,
        global_batch: 1536,
        recompute: "full".into(),
        ..TrainingPlan::default()
    };
    // `example/hsdp` on its declared axis: ZeRO-3 over 8 ranks inside `data`, one replica
    // (Rust ABI 1.4; the engine's tests check it against ZeRO-3 over the same 8 ranks).
    let hsdp_plan = TrainingPlan {
        dp: 1,
        zero_stage: 3,
        axes: [("shard".to_string(), 8)].into(),
        ..plan.clone()
    };
    let hsdp = hsdp::STRATEGIES.map(String::from).to_vec();
    let cases: [(&str, Vec<String>, &TrainingPlan, &_); 5] = [
        (
            "compiled-in strategies",
            BUILTINS.map(String::from).to_vec(),
            &plan,
            &registry,
        ),
        (
            "tensor from a library",
            BUILTINS
                .map(|n| {
                    if n == "tensor" {
                        format!("lib/{n}")
                    } else {
                        n.to_string()
                    }
                })
                .to_vec(),
            &plan,
            &registry,
        ),
        (
            "all seven from a library",
            BUILTINS.map(|n| format!("lib/{n}")).to_vec(),
            &plan,
            &registry,
        ),
        (
            "hsdp compiled in, shard 8",
            hsdp.clone(),
            &hsdp_plan,
            &registry,
        ),
        ("hsdp from a library, shard 8", hsdp, &hsdp_plan, &loaded),
    ];
    for (what, names, plan, registry) in cases {
        let options = TrainingOptions {
            strategies: Some(names),
            ..TrainingOptions::default()
        };
        let t = Training::with_options(
            gpt(96, 12288, 96),
            a100_from_registry(registry, 1024).unwrap(),
            registry,
            &options,
        )
        .unwrap();
        t.evaluate(plan).unwrap();
        c.bench_function(&format!("evaluate gpt3-175b 1024xA100 ({what})"), |b| {
            b.iter(|| t.evaluate(black_box(plan)).unwrap())
        });
    }
    isolated(c, lib, &plan);
}

/// `lib/tensor` served by a child process.
fn isolated(c: &mut Criterion, lib: &std::path::Path, plan: &TrainingPlan) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = perfcast_testkit::process::target_dir();
    perfcast_testkit::process::run_within(
        std::process::Command::new(cargo)
            .current_dir(perfcast_testkit::workspace_root())
            .args(["build", "--quiet", "-p", "perfcast-cli", "--target-dir"])
            .arg(&target),
        perfcast_testkit::process::BUILD_DEADLINE,
    );
    let opts = IsolateOptions {
        program: target.join("debug").join("perfcast"),
        args: vec!["plugin-host".into()],
        timeout: std::time::Duration::from_secs(10),
    };
    let mut registry = perfcast_builtins::registry().unwrap();
    load_library_isolated(lib, None, &mut registry, &opts).unwrap();
    let names = BUILTINS
        .map(|n| {
            if n == "tensor" {
                format!("lib/{n}")
            } else {
                n.to_string()
            }
        })
        .to_vec();
    let options = TrainingOptions {
        strategies: Some(names),
        ..TrainingOptions::default()
    };
    let t = Training::with_options(
        gpt(96, 12288, 96),
        a100_from_registry(&registry, 1024).unwrap(),
        &registry,
        &options,
    )
    .unwrap();
    t.evaluate(plan).unwrap();
    c.bench_function(
        "evaluate gpt3-175b 1024xA100 (tensor isolated, repeated plan)",
        |b| b.iter(|| t.evaluate(black_box(plan)).unwrap()),
    );
    // A global batch not seen before each time: the strategy's answers are asked anew.
    let mut batch = 1536u32;
    c.bench_function(
        "evaluate gpt3-175b 1024xA100 (tensor isolated, new plan)",
        |b| {
            b.iter(|| {
                batch += 8;
                let p = TrainingPlan {
                    global_batch: batch,
                    ..plan.clone()
                };
                t.evaluate(black_box(&p)).unwrap()
            })
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
