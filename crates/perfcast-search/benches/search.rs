//! Criterion benchmark: the search of the shipped GPT-3 175B / 1,024 x A100 scenario
//! (`configs/experiments/gpt3-175b-a100.toml`); a space of Calculon's scale (14.2 million
//! candidates); and the shipped space with every fitting plan timed (objective memory: the
//! time bound prunes nothing).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use perfcast_config::{Config, Sources};
use perfcast_search::{load_scenario, Objective, Summary};
use std::path::PathBuf;

fn scenario() -> perfcast_search::Scenario {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = root.join("configs/experiments/gpt3-175b-a100.toml");
    let mut s = Sources::files(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        [file],
    )
    .without_env();
    s.sections.push(perfcast_search::config::SECTION);
    let cfg = Config::load(&s).expect("config");
    load_scenario(&perfcast_scenario::Scenario::training(&cfg)).expect("scenario")
}

/// One line on stderr: what the search of `label` enumerated, pruned and evaluated, how fast.
fn print_summary(label: &str, s: &Summary) {
    eprintln!(
        "{label}: enumerated {} pruned {} (invalid {}, memory {}, bound {}) evaluated {} \
         in {:.3} s: {:.0} plans/s enumerated, {:.0} evaluations/s",
        s.enumerated,
        s.pruned,
        s.pruned_invalid,
        s.pruned_memory,
        s.pruned_bound,
        s.evaluated,
        s.seconds,
        s.plans_per_s,
        s.evaluations_per_s
    );
}

fn bench(c: &mut Criterion) {
    let sc = scenario();
    let r = sc.search().expect("search");
    print_summary("gpt3-175b-a100", &r.summary);
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    g.bench_function("gpt3-175b 1024xA100 top10 (time)", |b| {
        b.iter(|| sc.search().expect("search"))
    });
    // A space of Calculon's scale (it lists ~11.7 million candidates for GPT-3 175B on 1,024
    // GPUs): TP across nodes up to 64, CP 1/2/4, micro-batches up to 64 on top of the
    // shipped dimensions (placements included): 14.2 million plans.
    let mut rich = scenario();
    rich.constraints.max_tp = Some(64);
    rich.constraints.max_micro_batch = 64;
    rich.space.cp = Some(vec![1, 2, 4]);
    let r = rich.search().expect("search");
    print_summary("calculon-scale space", &r.summary);
    g.bench_function("gpt3-175b 1024xA100 calculon-scale space", |b| {
        b.iter(|| rich.search().expect("search"))
    });
    let mut all = scenario();
    all.objective = Objective::Memory;
    let r = all.search().expect("search");
    eprintln!(
        "gpt3-175b-a100, objective memory (no time-bound pruning): enumerated {} evaluated {} \
         in {:.3} s: {:.0} evaluations/s",
        r.summary.enumerated, r.summary.evaluated, r.summary.seconds, r.summary.evaluations_per_s
    );
    g.bench_function("gpt3-175b 1024xA100 every fitting plan timed", |b| {
        b.iter(|| all.search().expect("search"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
