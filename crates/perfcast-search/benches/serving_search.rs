//! Criterion benchmark (target, issue 12: >= 1,000 deployments in <= 10 s on this 2-core
//! machine): the deployment search of `configs/serving/llama3.1-70b-dgx-h100-search.toml`,
//! 1,536 deployments of Llama 3.1 70B on 8 H100 (aggregated and disaggregated), each
//! simulated in closed loops of 1, 16 and max_batch clients per instance.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use perfcast_config::{Config, Sources};
use std::path::PathBuf;

fn bench(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = root.join("configs/serving/llama3.1-70b-dgx-h100-search.toml");
    let mut s = Sources::files(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        [file],
    )
    .without_env();
    s.sections
        .extend(["serving", "slo", perfcast_search::serving::SECTION]);
    let cfg = Config::load(&s).expect("config");
    let search = perfcast_search::serving::load(&cfg).expect("search");
    let r = perfcast_search::serving::search(&search).expect("search");
    eprintln!(
        "deployment search: {} deployments ({} refused), {} load points, {} requests, {:.3} s on {} threads",
        r.configurations, r.refused, r.points, r.requests, r.seconds, r.threads
    );
    let mut g = c.benchmark_group("serving search");
    g.sample_size(10);
    g.bench_function("llama3.1-70b 8xH100 1536 deployments", |b| {
        b.iter(|| perfcast_search::serving::search(&search).expect("search"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
