//! The analytical GEMM model (the GPU plugin at rated power, no end-to-end fit) against the
//! embedded bf16 GEMM tables (`perfcast_validation::kernel_tables`; shapes whose operands fit
//! in L2 left out), and fitted to them: per GPU with its preset's parameters; fitted on Ampere
//! and Hopper and predicting Blackwell from its datasheets (leave one generation out); fitted
//! on B200 and GB200 and predicting B300 and GB300 (leave one GPU out). Figures print with
//! `--nocapture`; each MAPE is held to a ceiling a little above what it is today
//! (2026-12-05), so the figures can only improve:
//!
//! | | all shapes | compute-bound |
//! |---|---|---|
//! | presets (A100 .. GB300) | 22-36% | 7-17% |
//! | fit A100+H100+H200, in the fit | 8-18% | 5-12% |
//! | the same, predicting B200, GB200, B300, GB300 | 8.5-10.4% | 5.5-7.9% |
//! | fit B200+GB200, in the fit | 8.6-9.0% | 6.2-6.3% |
//! | the same, predicting B300 / GB300 | 10.0% / 8.6% | 8.1% / 7.0% |
//!
//! The fits include the matrix engines' power draw (`matrix_pj_per_flop`, 2026-12-05): before
//! it, with the efficiencies at each part's rated power, Blackwell was predicted from Ampere
//! and Hopper within 10-18% (compute-bound 8-21%) and B300 / GB300 from B200 and GB200 within
//! 13.9% / 13.8% (8.8% / 11.2%). Issue 20's target, 12% and 8% for B300 and GB300 left out,
//! is met but for B300's compute-bound shapes (8.1%). A release-mode test: `.ci/run` runs
//! it; in debug it would take minutes.

#![cfg(not(debug_assertions))]
// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::Plugins;
use perfcast_validation::kernel_tables::{fit_gemm, gemm_check, kernel_level, GemmCheck};
use perfcast_validation::presets::Hardware;

/// Every seventh row: the figures move by a few tenths of a point against all rows.
const STRIDE: usize = 7;

/// Print `c` and hold its MAPE over all shapes and over the compute-bound ones to `ceiling`.
fn show(what: &str, c: &GemmCheck, ceiling: (f64, f64)) {
    println!(
        "{what:44} {:6} rows MAPE {:5.1}% bias {:+6.1}%  compute-bound {:5} rows MAPE {:5.1}%",
        c.rows,
        100.0 * c.mape,
        100.0 * c.bias,
        c.compute_bound_rows,
        100.0 * c.compute_bound_mape
    );
    assert!(
        c.mape <= ceiling.0 && c.compute_bound_mape <= ceiling.1,
        "{what}: MAPE {:.1}% / {:.1}% above the ceilings {:.0}% / {:.0}%",
        100.0 * c.mape,
        100.0 * c.compute_bound_mape,
        100.0 * ceiling.0,
        100.0 * ceiling.1
    );
}

#[test]
fn the_analytical_gemm_model_against_the_tables() {
    let plugins = Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    let catalog = perfcast_kernel_data::catalog().unwrap();
    let gpus = [
        ("A100-SXM4-80GB", "a100_sxm"),
        ("H100-SXM5-80GB", "h100_sxm"),
        ("H200-SXM-141GB", "h200_sxm"),
        ("B200-SXM-180GB", "b200_sxm"),
        ("GB200", "gb200"),
        ("B300-SXM", "b300_sxm"),
        ("GB300", "gb300"),
    ];
    let tables: Vec<_> = gpus
        .iter()
        .map(|(_, t)| catalog.get(t, perfcast_kernels::Op::Gemm).unwrap())
        .collect();
    let hw: Vec<Hardware> = gpus.iter().map(|(a, _)| Hardware::of(a).unwrap()).collect();
    for (i, (a, t)) in gpus.iter().enumerate() {
        let s = kernel_level(&hw[i], &plugins, None).unwrap();
        let c = gemm_check(&s, &tables[i], "bfloat16", STRIDE).unwrap();
        show(&format!("{a} preset vs {t}"), &c, (0.38, 0.19));
    }
    // Leave one generation out: fit on Ampere and Hopper, predict Blackwell.
    let older: Vec<_> = (0..3).map(|i| (hw[i].clone(), &*tables[i])).collect();
    let (v, checks) = fit_gemm(&older, &plugins, "bfloat16", STRIDE).unwrap();
    println!("fitted on A100+H100+H200: {v:?}");
    for (i, c) in checks.iter().enumerate() {
        show(&format!("  {} (in the fit)", gpus[i].0), c, (0.20, 0.13));
    }
    for i in 3..7 {
        let s = kernel_level(&hw[i], &plugins, Some(&v)).unwrap();
        let c = gemm_check(&s, &tables[i], "bfloat16", STRIDE).unwrap();
        show(&format!("  {} (predicted)", gpus[i].0), &c, (0.12, 0.09));
    }
    // Leave one GPU out inside Blackwell: fit on B200 and GB200, predict B300 and GB300.
    let b: Vec<_> = (3..5).map(|i| (hw[i].clone(), &*tables[i])).collect();
    let (v, checks) = fit_gemm(&b, &plugins, "bfloat16", STRIDE).unwrap();
    println!("fitted on B200+GB200: {v:?}");
    for (i, c) in checks.iter().enumerate() {
        show(
            &format!("  {} (in the fit)", gpus[i + 3].0),
            c,
            (0.10, 0.07),
        );
    }
    for i in 5..7 {
        let s = kernel_level(&hw[i], &plugins, Some(&v)).unwrap();
        let c = gemm_check(&s, &tables[i], "bfloat16", STRIDE).unwrap();
        show(&format!("  {} (predicted)", gpus[i].0), &c, (0.11, 0.09));
    }
}
