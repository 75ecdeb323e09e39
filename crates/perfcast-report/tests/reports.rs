//! The engines' reports as text: the training table names the parts and says when a plan
//! does not fit, its CSV has one line per metric and stage field, and the inference table
//! and CSV carry the serving metrics, both phases and memory.

// A test target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::AttentionKind;
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};
use perfcast_engine::training::MOE_METRICS;
use perfcast_engine::training::{StageMemory, Training, TrainingPlan};
use perfcast_report::{inference, training};
use perfcast_testkit::flat::h100;
use perfcast_testkit::{a100_system, gpt, llama2, registry};

fn plan(tp: u32, pp: u32, dp: u32, gb: u32, recompute: &str) -> TrainingPlan {
    TrainingPlan {
        tp,
        pp,
        dp,
        micro_batch: 1,
        global_batch: gb,
        recompute: recompute.into(),
        attention: AttentionKind::Plain,
        ..TrainingPlan::default()
    }
}

#[test]
fn training_table_and_csv() {
    let t = Training::new(gpt(96, 12288, 96), a100_system(1024), &registry()).unwrap();
    let r = t.evaluate(&plan(8, 16, 8, 1536, "full")).unwrap();
    let table = training::table(&r);
    for part in [
        "iteration time",
        "MFU",
        "pipeline bubble",
        "exposed TP comm",
        "fits",
        "Notes",
    ] {
        assert!(table.contains(part), "{part}\n{table}");
    }
    let csv = training::csv(&r);
    assert!(csv.starts_with("metric,value,unit\n"));
    // pp = 16: the first, second and last stages, every field of each; a dense model's CSV
    // leaves out the MoE-only metrics.
    let fields = StageMemory::FIELDS.len();
    let metrics = r.metrics().len() - MOE_METRICS.len();
    assert_eq!(csv.lines().count(), 1 + metrics + 3 * fields + 2);
    assert!(!csv.contains("ep_comm,"));
    assert!(csv.contains("memory.second.total,"));
}

/// A run with a declared axis shows the axis's ledger by name: a table row, a CSV line, a key
/// of JSON's `breakdown.axes`, a note when it is a large part of the step; the parts still
/// add up to the step.
#[test]
fn training_declared_axis_ledger() {
    let mut r = registry();
    hsdp::register(&mut r).unwrap();
    let opts = perfcast_engine::TrainingOptions {
        strategies: Some(hsdp::STRATEGIES.map(String::from).to_vec()),
        ..Default::default()
    };
    let t = Training::with_options(gpt(8, 2048, 16), a100_system(64), &r, &opts).unwrap();
    let p = TrainingPlan {
        zero_stage: 3,
        axes: [("shard".to_string(), 8)].into(),
        ..plan(1, 1, 8, 64, "none")
    };
    let rep = t.evaluate(&p).unwrap();
    let shard = rep
        .breakdown
        .axes
        .iter()
        .find(|(n, _)| *n == "shard")
        .map(|(_, s)| s.0)
        .unwrap();
    assert!(shard > 0.0);
    let table = training::table(&rep);
    assert!(table.contains("exposed shard comm"), "{table}");
    let csv = training::csv(&rep);
    assert!(csv.contains(&format!("axes.shard,{shard},s\n")), "{csv}");
    let json = serde_json::to_value(rep).unwrap();
    assert_eq!(json["breakdown"]["axes"]["shard"].as_f64(), Some(shard));
    let b = &rep.breakdown;
    let step = rep.iteration_time.0;
    assert!((b.total().0 - step).abs() <= 1e-12 * step);
    // A note when the ledger is more than a tenth of the step (the notes' threshold).
    let notes = training::notes(&rep).join("\n");
    assert_eq!(
        notes.contains("declared axis `shard`"),
        shard / step > 0.1,
        "{shard} of {step}: {notes}"
    );
}

/// A plan that does not fit says so in the table and its notes, with by how much.
#[test]
fn training_does_not_fit() {
    let t = Training::new(gpt(96, 12288, 96), a100_system(8), &registry()).unwrap();
    let r = t.evaluate(&plan(8, 1, 1, 8, "none")).unwrap();
    assert!(!r.memory.fits);
    assert!(training::table(&r).contains("DOES NOT FIT"));
    assert!(training::notes(&r)
        .iter()
        .any(|n| n.starts_with("does not fit")));
}

#[test]
fn inference_table_and_csv() {
    let inf = Inference::new(llama2(7), h100(8), InferenceOptions::default()).unwrap();
    let p = InferencePlan {
        tp: 2,
        ..InferencePlan::new(4, 512, 64)
    };
    let r = inf.evaluate(&p).unwrap();
    let notes = inference::notes(&r);
    assert!(!notes.is_empty());
    let table = inference::table(&r, &notes);
    for part in [
        "time to first token",
        "time per output token",
        "prefill",
        "decode",
        "KV cache",
    ] {
        assert!(table.contains(part), "{part}\n{table}");
    }
    let csv = inference::csv(&r, &["suspicious, hardware".to_string()]);
    assert!(csv.starts_with("metric,value,unit\n"), "{csv}");
    for key in ["memory.kv_cache,", "memory.fits,", "decode."] {
        assert!(csv.contains(key), "{key}\n{csv}");
    }
    assert!(csv.contains("warning,\"suspicious, hardware\""), "{csv}");
}
