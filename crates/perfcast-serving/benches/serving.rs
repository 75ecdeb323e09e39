//! Speed of the serving simulator (target, issue 12: 10,000 requests in <= 1 s on one core):
//! Llama-2 7B on one H100 (built-in plugins, the repository's preset), 10,000 requests of
//! 512 prompt and 256 output tokens, chunked prefill, at a Poisson rate near saturation (15 req/s of 17 at most: the
//! largest batches), at a low rate (the most steps: one request at a time, a million steps),
//! and all at once (offline).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_engine::inference::{Inference, InferenceOptions};
use perfcast_serving::{ArrivalProcess, Length, Load, ServingConfig, Simulator, WorkloadSpec};
use perfcast_testkit::llama2;

#[path = "../../perfcast-engine/tests/inference_support/systems.rs"]
mod builtin_systems;
use builtin_systems::{builtin_system, Gpu};

fn bench(c: &mut Criterion) {
    let registry = perfcast_builtins::registry().expect("registry");
    let system = builtin_system(&registry, Gpu::H100, 1);
    let inf = Inference::new(llama2(7), system, InferenceOptions::default()).expect("model");
    let cfg = ServingConfig {
        max_batch: 256,
        max_num_tokens: 8192,
        ..ServingConfig::default()
    };
    let mut g = c.benchmark_group("serving");
    g.sample_size(10);
    for (name, load) in [
        (
            "10k requests llama2-7b h100 512/256 poisson 15 req/s",
            Load::Rate {
                rate: 15.0,
                process: ArrivalProcess::Poisson,
            },
        ),
        (
            "10k requests llama2-7b h100 512/256 poisson 0.5 req/s",
            Load::Rate {
                rate: 0.5,
                process: ArrivalProcess::Poisson,
            },
        ),
        ("10k requests llama2-7b h100 512/256 burst", Load::Burst),
    ] {
        let w = WorkloadSpec {
            input_len: Length::Fixed(512),
            output_len: Length::Fixed(256),
            requests: 10_000,
            load,
            seed: 0,
        };
        let traffic = w.traffic();
        let d = cfg
            .deployment(None, traffic.max_context())
            .expect("deployment");
        let r = Simulator::new(&inf).run(&d, &traffic, 0, &[]).expect("run");
        eprintln!(
            "{name}: {} steps, mean batch {:.1}, {:.0} output tok/s, TTFT mean {:.1} ms",
            r.pools[0].steps,
            r.pools[0].mean_batch,
            r.output_tokens_per_s,
            r.ttft.mean.millis()
        );
        g.bench_function(name, |b| {
            b.iter(|| {
                // A new simulator each time: the step tables are rebuilt, as in one run.
                let mut sim = Simulator::new(&inf);
                sim.run(black_box(&d), &traffic, 0, &[]).expect("run")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
