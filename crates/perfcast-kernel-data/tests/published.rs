//! The embedded GEMM tables against the independent, published GEMM measurements of
//! `configs/validation/kernels.toml` where they overlap (same GPU die, operand format and a
//! shape inside the table), printed with `--nocapture`. What they show (2026-12-02):
//!
//! - 16-bit GEMMs on A100 and H100: the best shape of a maximum-achievable-matmul search over
//!   cuBLAS (`mamf_*`) and TensorRT-LLM's kernel at that shape agree within 5% (+3.0%, +0.7%).
//! - Everywhere else the table is slower than the published figure, never faster: B200 and
//!   GB200 16-bit by 13-14% and their FP8 by 40-46% against the same searches (H100/H200 FP8
//!   16-31%), DeepGEMM's block-scaled FP8 on H800 by 12-40%, ThunderKittens on B200 by 21%.
//!   A best-of-search shape or a hand-written kernel may beat a framework's kernel; the
//!   reverse would mean a unit or a mapping is wrong. The tables time what TensorRT-LLM runs,
//!   which for FP8 on Blackwell is well below what the silicon can do.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::op::Gemm;
use perfcast_core::DType;
use perfcast_kernels::measured::gemm_dtype;
use perfcast_validation::kernels::{parse, KernelKind};

/// The table of a catalog GPU: its own, or its die's (the H800 is a GH100 at the H100's
/// clocks and HBM3; only its NVLink differs).
fn table_of(gpu: &str) -> Option<&'static str> {
    Some(match gpu {
        "A100-SXM4-80GB" => "a100_sxm",
        "H100-SXM5-80GB" | "H800-SXM-80GB" => "h100_sxm",
        "H200-SXM-141GB" => "h200_sxm",
        "B200-SXM-180GB" => "b200_sxm",
        "GB200" => "gb200",
        "GB300" => "gb300",
        _ => return None,
    })
}

#[test]
fn tables_agree_with_published_library_gemms() {
    let kernels = parse(perfcast_assets::validation::KERNELS).unwrap();
    let catalog = perfcast_kernel_data::catalog().unwrap();
    let (mut library, mut hand_written) = (Vec::new(), Vec::new());
    for k in kernels.iter().filter(|k| k.kind == KernelKind::Gemm) {
        let Some(gpu) = table_of(&k.gpu) else {
            continue;
        };
        let dtype = k.dtype.dtype();
        let g = Gemm {
            m: k.m.unwrap(),
            n: k.n.unwrap(),
            k: k.k.unwrap(),
            batch: 1,
            a: dtype,
            b: dtype,
            out: DType::Bf16,
            scaling: k.scaling.map(|s| s.scaling()).unwrap_or_default(),
        };
        let Some(td) = gemm_dtype(&g) else { continue };
        let t = catalog.get(gpu, perfcast_kernels::Op::Gemm).unwrap();
        let Some(kernel) = t.main_kernel(&[td]) else {
            continue;
        };
        let Some(l) = t.time(&[td, kernel], &[g.m, g.n, g.k]) else {
            println!("{:48} outside the {gpu} table", k.id);
            continue;
        };
        let table = 2.0 * (g.m * g.n * g.k) as f64 / (l.latency_ms * 1e-3) / 1e12;
        let err = table / k.tflops - 1.0;
        println!(
            "{:48} {gpu:9} {td:9} published {:7.1}  table {table:7.1} TFLOP/s ({}) {:+.1}%",
            k.id,
            k.tflops,
            l.path.name(),
            100.0 * err
        );
        if k.id.starts_with("mamf_") {
            library.push((k.id.clone(), err));
        } else {
            hand_written.push((k.id.clone(), err));
        }
    }
    let agree = ["mamf_a100_bf16", "mamf_h100_bf16"];
    for id in agree {
        let (_, err) = library.iter().find(|(i, _)| i == id).unwrap();
        assert!(
            err.abs() <= 0.05,
            "{id}: the table is {:+.1}% off",
            100.0 * err
        );
    }
    assert!(library.len() >= 8 && hand_written.len() >= 10);
    for (id, err) in library.iter().chain(&hand_written) {
        if !agree.contains(&id.as_str()) {
            assert!(*err < 0.0, "{id}: the table is {:+.1}% faster", 100.0 * err);
        }
    }
}
