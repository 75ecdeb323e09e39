//! The device models against the kernel measurements of configs/validation/kernels.toml
//! (`cargo run --release -p perfcast-validation --example kernels` prints every row): each
//! source group on each device within its bound, so that the kernel-level grounding of the
//! efficiency parameters (configs/hardware/*.toml) cannot drift unnoticed.
//!
//! Bounds are the fit's error plus a margin; where a group is not modelled well the reason
//! is named. Accelerators without a hardware preset are built from their catalog entry, what
//! it does not publish derived by the catalog-median rule (`presets::hardware_from_catalog`):
//! every row is predicted, none skipped, except a row in a format the device has no peak for,
//! which is an error naming it.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_validation::kernels;
use std::collections::BTreeMap;

/// (source group, accelerator, MAPE bound, why the bound is what it is).
const BOUNDS: &[(&str, &str, f64, &str)] = &[
    ("mamf", "A100-SXM4-80GB", 0.03, "fitted"),
    ("mamf", "H100-SXM5-80GB", 0.08, "bf16 fitted; fp8 from DeepGEMM's H800 fit"),
    ("mamf", "H200-SXM-141GB", 0.22, "fp8 best-of-search shape: cuBLAS beats the DeepGEMM-fitted tile model"),
    ("mamf", "B200-SXM-180GB", 0.03, "fitted"),
    ("mamf", "GB200", 0.03, "fitted"),
    ("thunderkittens", "B200-SXM-180GB", 0.03, "fitted with the B200 matmul search"),
    ("deepgemm", "H800-SXM-80GB", 0.16, "M >= 1024 within 5%; M = 64/128 memory-bound shapes reach less bandwidth than the roofline's (few SMs busy)"),
    ("fa2", "A100-SXM4-80GB", 0.04, "fitted"),
    ("fa2", "H100-SXM5-80GB", 0.03, "fitted"),
    ("fa3", "H100-SXM5-80GB", 0.06, "fitted (forward only in the data)"),
    ("cudnn", "H200-SXM-141GB", 0.07, "bf16 2%, fp8 11%"),
    ("cudnn", "GB200", 0.08, "bf16 4%, fp8 6%; DeepSeek-V3's 192/128 head dims +25% on the backward"),
    ("cudnn", "GB300", 0.17, "not fitted: the GB200's attention fit on the GB300 preset, predicted from its datasheet (14.3% on 2026-12-02)"),
    ("torchao", "H100-SXM5-80GB", 0.70, "MoE grouped GEMMs: torchao's K-grouped weight-gradient kernel reaches a third of a dense GEMM (not modelled: issue 11)"),
    ("torchao", "B200-SXM-180GB", 0.70, "as torchao_h100 (MXFP8)"),
    ("mamf", "MI300X", 0.03, "fitted (one bf16 shape)"),
    ("mamf", "MI325X", 0.03, "fitted (one bf16 shape)"),
    ("mamf", "Gaudi2", 0.80, "no preset: a generic device from the catalog, its sm_count and fp32 peak derived by the catalog-median rule, with NVIDIA-like default efficiencies that do not describe Gaudi's MMEs (67% on 2026-12-02)"),
    ("mamf", "Gaudi3", 0.85, "as Gaudi2 (76%)"),
];

#[test]
fn kernel_groups_within_their_bounds() {
    let ks = kernels::parse(kernels::KERNELS).unwrap();
    let results = kernels::run(
        &ks,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    );
    let mut groups: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in &results {
        match r.relative_error() {
            Some(e) => groups
                .entry((r.group.clone(), r.gpu.clone()))
                .or_default()
                .push(e),
            // A row in a format the device has no peak for (Gaudi 2's FP8: the catalog
            // publishes its bf16 peak only) is an error naming the format.
            None => {
                let e = r.error.as_deref().unwrap_or("");
                assert!(e.contains("has no matrix engine for"), "{}: {e}", r.id);
            }
        }
    }
    let mut failures = Vec::new();
    for ((g, gpu), es) in &groups {
        let mape = es.iter().map(|e| e.abs()).sum::<f64>() / es.len() as f64;
        let Some((.., bound, why)) = BOUNDS.iter().find(|b| b.0 == g && b.1 == gpu) else {
            failures.push(format!(
                "{g} on {gpu}: no bound listed (MAPE {:.1}%)",
                100.0 * mape
            ));
            continue;
        };
        eprintln!(
            "{g:<15} {gpu:<16} n={:<3} MAPE {:>5.1}% (bound {:.0}%: {why})",
            es.len(),
            100.0 * mape,
            100.0 * bound
        );
        if mape > *bound {
            failures.push(format!(
                "{g} on {gpu}: MAPE {:.1}% > {:.0}%",
                100.0 * mape,
                100.0 * bound
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
