//! The training model on the built-in hardware plugins (through the registry), checked for
//! plausibility against the papers: compute-dominated where they say so, per-layer times and
//! step times in the published range. Tight accuracy is the validation harness's job.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::workload::ModelSpec;
use perfcast_core::AttentionKind;
use perfcast_engine::{Training, TrainingPlan};
use perfcast_testkit::{a100_from_registry, gpt};

fn plan(tp: u32, pp: u32, mb: u32, gb: u32, recompute: &str, sp: bool) -> TrainingPlan {
    TrainingPlan {
        tp,
        pp,
        micro_batch: mb,
        global_batch: gb,
        recompute: recompute.into(),
        sp,
        precision: perfcast_core::DType::Fp16,
        attention: AttentionKind::Plain,
        overlap_grad_reduce: false,
        overlap_param_gather: false,
        ..TrainingPlan::default()
    }
}

fn training(m: ModelSpec, devices: u32) -> Training {
    let r = perfcast_builtins::registry().unwrap();
    let sys = a100_from_registry(&r, devices).unwrap();
    Training::new(m, sys, &r).unwrap()
}

/// Korthikanti 2022 Table 4: 22B, TP 8, b = 4, per-layer forward / backward ms.
#[test]
fn korthikanti_table4_per_layer() {
    let t = training(gpt(48, 6144, 64), 8);
    // (policy, sp, forward ms, backward ms)
    let table = [
        ("none", false, 7.7, 11.9),
        ("none", true, 7.2, 11.8),
        ("full", false, 7.7, 19.5),
        ("selective", false, 7.7, 13.2),
        ("selective", true, 7.2, 13.1),
    ];
    for (policy, sp, f, b) in table {
        let r = t.evaluate(&plan(8, 1, 4, 4, policy, sp)).unwrap();
        let (pf, pb) = (r.layer.forward.millis(), r.layer.backward.millis());
        assert!(
            (pf / f - 1.0).abs() < 0.35,
            "{policy} sp={sp}: fwd {pf} vs {f}"
        );
        assert!(
            (pb / b - 1.0).abs() < 0.35,
            "{policy} sp={sp}: bwd {pb} vs {b}"
        );
    }
}

/// Korthikanti 2022 Table 5: 175B on 64 A100 (TP 8, PP 8), global batch 64: 18.13 s with full
/// recompute, 13.75 s with selective + SP; compute-dominated, MFU in the published range.
#[test]
fn korthikanti_table5_175b() {
    let t = training(gpt(96, 12288, 96), 64);
    for (policy, sp, want) in [("full", false, 18.13), ("selective", true, 13.75)] {
        let r = t.evaluate(&plan(8, 8, 1, 64, policy, sp)).unwrap();
        let got = r.iteration_time.0;
        assert!((got / want - 1.0).abs() < 0.3, "{policy}: {got} vs {want}");
        let compute = r.breakdown.compute_total().0 / got;
        assert!(compute > 0.7, "{policy}: compute fraction {compute}");
        assert!(r.mfu > 0.3 && r.mfu < 0.7, "{policy}: mfu {}", r.mfu);
        assert!(r.memory.fits, "{policy}: {:?}", r.memory);
    }
}
