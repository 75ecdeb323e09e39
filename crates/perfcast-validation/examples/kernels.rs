//! `cargo run -p perfcast-validation --example kernels`: every kernel measurement of
//! configs/validation/kernels.toml against the device model, per source group.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_validation::kernels;
use std::collections::BTreeMap;

fn main() {
    let ks = match kernels::parse(kernels::KERNELS) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    // Arguments: an id filter, then `GPU_ID:key=value` overrides.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args.first().cloned().unwrap_or_default();
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in args.iter().skip(1) {
        if let Some((gpu, kv)) = a.split_once(':') {
            sets.entry(gpu.to_string())
                .or_default()
                .push(kv.to_string());
        }
    }
    let results = kernels::run_with(
        &ks,
        &sets,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    );
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (k, r) in ks.iter().zip(&results) {
        match r.relative_error() {
            Some(e) => {
                if k.id.contains(&filter) {
                    println!(
                        "{:<58} {:>9.1} {:>9.1} {:>+7.1}%",
                        r.id,
                        r.predicted_tflops.unwrap_or(0.0),
                        r.measured_tflops,
                        100.0 * e
                    );
                }
                groups
                    .entry(format!("{} {}", r.group, r.gpu))
                    .or_default()
                    .push(e);
            }
            None => println!("{:<58} ERROR {}", r.id, r.error.as_deref().unwrap_or("")),
        }
    }
    println!();
    for (g, es) in groups {
        let mape = es.iter().map(|e| e.abs()).sum::<f64>() / es.len() as f64;
        let bias = es.iter().sum::<f64>() / es.len() as f64;
        println!(
            "{g:<40} n={:<3} MAPE {:>5.1}% bias {:>+6.1}%",
            es.len(),
            100.0 * mape,
            100.0 * bias
        );
    }
}
