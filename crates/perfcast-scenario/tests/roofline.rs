//! The roofline table of `perfcast roofline`: each `[[ops]]` entry timed on the device of a
//! preset by its compute unit's own `op_time`, with its intensity, ridge and bound.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::{Config, Plugins, Sources};
use perfcast_core::{DType, Engine, TimeBound};
use perfcast_scenario::roofline::analyze;

fn a100_with(test: &str, ops: &str) -> Config {
    let dir = perfcast_testkit::tmpdir("perfcast-roofline-test");
    let f = dir.join(format!("{test}.toml"));
    std::fs::write(&f, format!("include = [\"preset:a100-sxm4-80gb\"]\n{ops}")).unwrap();
    let plugins = Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    Config::load(&Sources::files(&plugins, [f]).without_env()).unwrap()
}

#[test]
fn roofline_of_a_preset() {
    let cfg = a100_with(
        "preset",
        "[[ops]]\nname = \"big\"\nop = \"gemm\"\nm = 8192\nn = 8192\nk = 8192\ndtype = \"bf16\"\n\
         [[ops]]\nop = \"vector\"\nkind = \"norm\"\nelements = 100000000\nflops_per_element = 4.0\nbytes_per_element = 4.0\ndtype = \"bf16\"\n",
    );
    let dev = cfg.device().unwrap();
    let ops = cfg.ops().unwrap();
    let r = analyze(&dev, &ops).unwrap();
    assert_eq!(r.device_tier, "a100_sxm4_80gb_hbm");
    let big = &r.ops[0];
    assert_eq!(big.bound, "compute");
    assert_eq!(big.flops, 2.0 * 8192f64.powi(3));
    assert!((big.intensity - big.flops / big.bytes).abs() < 1e-9);
    // Ridge: peak x efficiency over the HBM's achievable bandwidth.
    let peak = dev.compute.peak(Engine::Matrix, DType::Bf16).unwrap().0;
    let eff = dev.compute.efficiency(&ops[0].op);
    let bw = dev.memory.tiers[1].effective_bandwidth().0;
    assert!((big.ridge - peak * eff / bw).abs() < 1e-9 * big.ridge);
    // The time is the compute unit's own.
    let t = dev.compute.op_time(&ops[0].op, &dev.memory).unwrap();
    assert_eq!(big.time_s, t.time.0);
    assert_eq!(t.bound, TimeBound::Compute);
    assert_eq!(r.ops[1].bound, "a100_sxm4_80gb_hbm");
}

/// A dtype the device has no engine for is a model error naming the op.
#[test]
fn an_op_the_device_cannot_run_is_named() {
    let cfg = a100_with(
        "fp8",
        "[[ops]]\nname = \"q\"\nop = \"gemm\"\nm = 64\nn = 64\nk = 64\ndtype = \"fp8\"\n",
    );
    let e = analyze(&cfg.device().unwrap(), &cfg.ops().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("op `q`") && e.contains("fp8"), "{e}");
}
